"""One worker of `ember.distributed.run`: torchrun's environment (from Open MPI's under mpiexec),
then the user's script (or `-m module`) as __main__; a failure leaves a record for the launcher to
report."""
from __future__ import annotations

import json
import os
import runpy
import sys
import time
import traceback

from . import _mpi


def _setup_env() -> tuple[int, int]:
    env = os.environ
    if "OMPI_COMM_WORLD_RANK" not in env and "PMIX_RANK" not in env and "RANK" in env:
        rank = int(env["RANK"])  # started by the launcher itself (no mpiexec)
        return rank, int(env.get("LOCAL_RANK", rank))
    rank = int(env.get("OMPI_COMM_WORLD_RANK", env.get("PMIX_RANK", "0")))
    local = int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", rank))
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(local), ROLE_RANK=str(rank))
    return rank, local


def _record(rank, local, exitcode, exc: BaseException) -> None:
    folder = os.environ.get("EMBER_ERROR_DIR")
    if not folder:
        return
    rec = {"rank": rank, "local_rank": local, "pid": os.getpid(), "exitcode": exitcode,
           "message": f"{type(exc).__name__}: {exc}", "timestamp": time.time(),
           "traceback": "".join(traceback.format_exception(exc))}
    tmp = os.path.join(folder, f".rank{rank}.json")
    with open(tmp, "w") as f:
        json.dump(rec, f)
    os.replace(tmp, os.path.join(folder, f"rank{rank}.json"))


def run(target: list[str], rank: int, local: int) -> None:
    """Run target ([script, *args] or ["-m", module, *args]) as __main__."""
    try:
        if target[0] == "-m":
            sys.argv = [target[1], *target[2:]]
            runpy.run_module(target[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(target)
            sys.path.insert(0, os.path.dirname(os.path.abspath(target[0])))
            runpy.run_path(target[0], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if code:
            _record(rank, local, code, e)
            _mpi.abort_job(code)
        raise
    except BaseException as e:
        _record(rank, local, 1, e)
        traceback.print_exc()
        _mpi.abort_job(1)
        raise


def main() -> None:
    rank, local = _setup_env()
    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m ember.distributed._worker script.py [args...]")
    run(sys.argv[1:], rank, local)


if __name__ == "__main__":
    main()
