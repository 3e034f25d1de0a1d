"""Script for the launcher tests: argv[1] picks the behaviour of rank 1 (rank 0 all-reduces)."""
import datetime
import os
import signal
import sys
import time

import ember
import ember.distributed as dist

mode = sys.argv[1]
env = {k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                   "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT")}
timeout = datetime.timedelta(seconds=3 if mode == "hang" else 600)
dist.init_process_group("gloo", timeout=timeout)
rank = dist.get_rank()
if rank == 1:
    if mode == "raise" or (mode == "restart" and env["TORCHELASTIC_RESTART_COUNT"] == "0"):
        raise ValueError(f"boom on rank 1 (attempt {env['TORCHELASTIC_RESTART_COUNT']})")
    if mode == "hang":
        time.sleep(600)
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
t = ember.full((2,), float(rank + 1))
dist.all_reduce(t)
print(f"RESULT {rank} {t.tolist()} {sorted(env.items())} {sys.argv[1:]}", flush=True)
dist.destroy_process_group()
