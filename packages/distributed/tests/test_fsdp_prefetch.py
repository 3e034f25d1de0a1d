"""FSDP2 prefetching on 2 and 4 ranks: forward/backward prefetch trains like one process, and the
collectives go out in the promised order (workers/fsdp_prefetch_worker.py)."""

from mpi_launch import worker_suite

globals().update(worker_suite(
    "fsdp_prefetch_worker.py", sizes=(2, 4), timeout=180,
    expect=("backward_prefetches_in_reverse_order",), min_checks=6))
