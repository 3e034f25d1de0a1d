"""Starting N worker processes on this node, and telling which one failed first.

Each worker runs `ember.distributed._worker`, which sets torchrun's environment (RANK,
LOCAL_RANK, ...) and writes an error record (rank, pid, traceback) to the run's error folder if it
fails. Workers start through Open MPI's mpiexec where Open MPI is installed (the MPI engine needs
its communicator); mpiexec kills the other workers when one exits non-zero, and a worker that
dies without a record (killed by a signal) is named from mpiexec's own report. Without Open MPI
(a GPU host running NCCL jobs only), or with EMBER_LAUNCHER=direct, the launcher starts the
workers itself, as torchrun does, and ends the others when the first one fails.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

from . import _mpi

__all__ = ["launch", "LaunchResult", "WorkerFailure"]


class WorkerFailure:
    """The first worker that failed: rank, exit code, and its traceback when it had one."""

    def __init__(self, rank, local_rank=None, pid=None, exitcode=None, message="",
                 traceback="", timestamp=0.0):
        self.rank, self.local_rank, self.pid = rank, local_rank, pid
        self.exitcode, self.message, self.traceback = exitcode, message, traceback
        self.timestamp = timestamp

    def __str__(self):
        head = f"rank {self.rank}"
        if self.local_rank is not None:
            head += f" (local_rank {self.local_rank}"
            head += f", pid {self.pid})" if self.pid else ")"
        out = f"{head} failed with exit code {self.exitcode}"
        if self.message:
            out += f": {self.message}"
        if self.traceback:
            out += "\n" + self.traceback.rstrip()
        return out


class LaunchResult:
    def __init__(self, returncode: int, failure: WorkerFailure | None, attempts: int):
        self.returncode, self.failure, self.attempts = returncode, failure, attempts


# mpiexec's (prterun's) reports: "Process name: [prterun-vm-1@1,R]" ... "Exit code: C", or
# "process rank R with PID P on node N exited on" ... "signal S (Killed)."
_PRTE_RANK = re.compile(r"Process name:\s*\[[^,\]]*,(\d+)\]|process rank (\d+) with PID (\d+)")
_PRTE_CODE = re.compile(r"Exit code:\s*(-?\d+)|signal (\d+)")


def _pump(src, dst, seen: list):
    """Copy mpiexec's stderr through, remembering the rank and code it names on a failure."""
    for line in iter(src.readline, ""):
        dst.write(line)
        dst.flush()
        m = _PRTE_RANK.search(line)
        if m:
            rank = int(m.group(1) or m.group(2))
            seen.append({"rank": rank, "pid": int(m.group(3)) if m.group(3) else None})
        m = _PRTE_CODE.search(line)
        if m and seen and "code" not in seen[-1]:
            seen[-1]["code"] = int(m.group(1)) if m.group(1) else -int(m.group(2))


def _first_failure(err_dir: str, prte_seen: list, rc: int) -> WorkerFailure:
    records = []
    for name in os.listdir(err_dir):
        try:
            with open(os.path.join(err_dir, name)) as f:
                records.append(json.load(f))
        except (OSError, ValueError):
            continue
    if records:
        r = min(records, key=lambda r: r["timestamp"])
        return WorkerFailure(r["rank"], r["local_rank"], r["pid"], r["exitcode"], r["message"],
                             r["traceback"], r["timestamp"])
    for item in prte_seen:
        if "code" in item:
            how = (f"killed by signal {-item['code']}" if item["code"] < 0 else
                   "exited without a Python error")
            return WorkerFailure(item["rank"], item["rank"], item["pid"], item["code"], how)
    return WorkerFailure(-1, None, None, rc, "mpiexec failed before naming a worker")


def _env(nproc, master_addr, master_port, restart, max_restarts, err_dir, extra, mpi=True):
    env = _mpi.mpi_env() if mpi else dict(os.environ)
    env.update(extra or {})
    env.update(MASTER_ADDR=master_addr, MASTER_PORT=str(master_port), WORLD_SIZE=str(nproc),
               LOCAL_WORLD_SIZE=str(nproc), GROUP_RANK="0", ROLE_NAME="default",
               ROLE_WORLD_SIZE=str(nproc), TORCHELASTIC_RESTART_COUNT=str(restart),
               TORCHELASTIC_MAX_RESTARTS=str(max_restarts), EMBER_ERROR_DIR=err_dir,
               TORCHELASTIC_RUN_ID=env.get("TORCHELASTIC_RUN_ID", "ember"))
    if nproc > 1 and "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = "1"  # as torchrun: N workers on one node share its cores
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.getcwd(), *sys.path] if p)
    return env


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _use_mpiexec() -> bool:
    how = os.environ.get("EMBER_LAUNCHER", "auto")
    if how not in ("auto", "mpi", "direct"):
        raise ValueError(f"EMBER_LAUNCHER must be auto, mpi or direct, got {how!r}")
    if how != "auto":
        return how == "mpi"
    try:
        _mpi.mpi_home()
    except RuntimeError:
        return False
    return True


def _run_mpiexec(cmd, env, nproc, stdout, stderr, timeout, err_dir) -> tuple[int, list]:
    proc = subprocess.Popen(_mpi.mpiexec_cmd(nproc) + cmd, env=env, stdout=stdout,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen: list = []
    pump = threading.Thread(target=_pump, args=(proc.stderr, stderr, seen), daemon=True)
    pump.start()
    try:
        rc = proc.wait(timeout)
    except (KeyboardInterrupt, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        raise
    finally:
        pump.join(5)
    return rc, seen


def _end_all(procs, grace: float = 5.0) -> None:
    """SIGTERM every live worker's process group, SIGKILL what is left after `grace` seconds."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def _run_direct(cmd, env, nproc, stdout, stderr, timeout, err_dir) -> tuple[int, list]:
    """Start the workers with RANK / LOCAL_RANK set; the first non-zero exit ends the rest."""
    procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=stdout, stderr=stderr, start_new_session=True)
             for r in range(nproc)]
    deadline = None if timeout is None else time.monotonic() + timeout
    seen: list = []
    try:
        while True:
            codes = [p.poll() for p in procs]
            bad = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
            if bad:
                r, c = bad[0]
                seen.append({"rank": r, "pid": procs[r].pid, "code": c})
                _end_all(procs)
                return c if c > 0 else 128 - c, seen
            if all(c == 0 for c in codes):
                return 0, seen
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(cmd, timeout)
            time.sleep(0.05)
    except BaseException:
        _end_all(procs)
        raise


def launch(target: list[str], nproc: int, master_addr="127.0.0.1", master_port=None,
           max_restarts=0, env=None, stdout=None, stderr=None, timeout=None) -> LaunchResult:
    """Run `python -m ember.distributed._worker *target` on nproc ranks; retry on failure up to
    max_restarts times. target: [script, *args] or ["-m", module, *args]."""
    stderr = stderr or sys.stderr
    mpi = _use_mpiexec()
    run_once = _run_mpiexec if mpi else _run_direct
    failure, rc = None, 0
    for attempt in range(max_restarts + 1):
        port = master_port or free_port()
        with tempfile.TemporaryDirectory(prefix="ember-run-") as err_dir:
            cmd = [sys.executable, "-u", "-m", "ember.distributed._worker", *target]
            wenv = _env(nproc, master_addr, port, attempt, max_restarts, err_dir, env, mpi)
            rc, seen = run_once(cmd, wenv, nproc, stdout, stderr, timeout, err_dir)
            if rc == 0:
                return LaunchResult(0, None, attempt + 1)
            failure = _first_failure(err_dir, seen, rc)
        if attempt < max_restarts:
            stderr.write(f"[ember.distributed.run] attempt {attempt + 1} failed ({failure}); "
                         f"restarting ({attempt + 1}/{max_restarts})\n")
    return LaunchResult(rc or 1, failure, max_restarts + 1)
