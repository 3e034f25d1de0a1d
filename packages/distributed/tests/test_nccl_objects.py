"""Object collectives and barrier on a group with backend "nccl" only (no CPU engine), on 2 CPU
ranks through the fake CUDA device and the nccl4py stand-in (workers/nccl_objects_worker.py)."""
from mpi_launch import fake_nccl_env, worker_suite

globals().update(worker_suite("nccl_objects_worker.py", sizes=(2,), timeout=240,
                              env=fake_nccl_env, min_checks=5))
