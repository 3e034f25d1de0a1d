"""Script for the direct-launch tests (no mpiexec): the default backend's group comes up over the
TCP store, a CPU collective raises the MPI engine's "needs mpiexec" error, and argv[1] picks
what rank 1 does (ok / raise / kill)."""
import os
import signal
import sys
import time

import ember
import ember.distributed as dist

mode = sys.argv[1]
dist.init_process_group()  # the default "cpu:gloo,cuda:nccl", as a CUDA script would
rank = dist.get_rank()
try:
    dist.all_reduce(ember.ones(2))
    err = "no error"
except RuntimeError as e:
    err = str(e)
if rank == 1 and mode == "raise":
    raise ValueError("boom on rank 1")
if rank == 1 and mode == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if mode != "ok" and rank == 0:
    time.sleep(120)  # the launcher must end this rank when rank 1 fails
# one write per line: the workers run `python -u`, where print's text and newline are two writes
sys.stdout.write(f"RESULT {rank} {dist.get_world_size()} {os.environ['RANK']} "
                 f"{os.environ['LOCAL_RANK']} {'OMPI_COMM_WORLD_SIZE' in os.environ} | {err}\n")
dist.destroy_process_group()
