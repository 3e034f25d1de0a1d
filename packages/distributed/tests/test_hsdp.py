"""fully_shard on a 2x2 mesh of 4 ranks (HSDP) trains like one process
(workers/hsdp_worker.py)."""

from mpi_launch import worker_suite

globals().update(worker_suite(
    "hsdp_worker.py", sizes=(4,), timeout=180,
    expect=("hsdp_training_equals_single_process",)))
