"""DistributedDataParallel on 2 MPI ranks equals single-process training on the same data
(workers/ddp_worker.py prints one CHECK line per rank and check)."""

from mpi_launch import worker_suite

globals().update(worker_suite(
    "ddp_worker.py", sizes=(2,), timeout=180,
    expect=("ddp_matches_single_process",), min_checks=4))
