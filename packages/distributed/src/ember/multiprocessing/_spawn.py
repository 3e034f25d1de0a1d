"""spawn(fn, args, nprocs): fn(i, *args) in nprocs processes started by mpiexec; the first
failure is raised in the parent with the child's traceback."""
from __future__ import annotations

import os
import pickle
import sys
import tempfile
import threading

__all__ = ["spawn", "start_processes", "ProcessContext", "ProcessRaisedException",
           "ProcessExitedException"]


class ProcessException(Exception):
    def __init__(self, msg: str, error_index: int = -1, pid: int | None = None):
        super().__init__(msg)
        self.msg, self.error_index, self.pid = msg, error_index, pid


class ProcessRaisedException(ProcessException):
    """A spawned process raised: the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A spawned process exited with a non-zero code or was killed."""

    def __init__(self, msg, error_index=-1, pid=None, exit_code=None, signal_name=None):
        super().__init__(msg, error_index, pid)
        self.exit_code, self.signal_name = exit_code, signal_name


class ProcessContext:
    """The running group (join() waits; returns True when all processes ended well)."""

    def __init__(self, thread, box):
        self._thread, self._box = thread, box

    def join(self, timeout=None) -> bool:
        self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        res = self._box["result"]
        if res.returncode == 0:
            return True
        f = res.failure
        if f.traceback:
            raise ProcessRaisedException(
                f"\n\n-- Process {f.rank} terminated with the following error:\n{f.traceback}",
                f.rank, f.pid)
        raise ProcessExitedException(f"process {f.rank} terminated with exit code {f.exitcode}",
                                     f.rank, f.pid, f.exitcode)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    from ember.distributed._launcher import launch
    tmp = tempfile.mkdtemp(prefix="ember-spawn-")
    path = os.path.join(tmp, "fn.pkl")
    with open(path, "wb") as f:
        pickle.dump((fn, tuple(args)), f)
    box = {}

    def run():
        try:
            port = os.environ.get("MASTER_PORT")  # the caller's rendezvous, if it set one
            box["result"] = launch(["-m", "ember.multiprocessing._child", path], nprocs,
                                   os.environ.get("MASTER_ADDR", "127.0.0.1"),
                                   int(port) if port else None)
        finally:
            os.unlink(path)
            os.rmdir(tmp)
    t = threading.Thread(target=run, daemon=daemon)
    t.start()
    ctx = ProcessContext(t, box)
    if not join:
        return ctx
    ctx.join()
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Run fn(i, *args) for i in range(nprocs), each in its own process (torch's API).

    >>> spawn(print, ("hi",), nprocs=1)  # doctest: +SKIP
    """
    if start_method != "spawn":
        sys.stderr.write(f"ember.multiprocessing.spawn: start_method={start_method!r} runs as "
                         "'spawn' (the processes are started by mpiexec)\n")
    return start_processes(fn, args, nprocs, join, daemon)
