"""fully_shard (FSDP2) on 2 and 3 ranks (uneven shards): training equal to single-process training,
gradient accumulation without sync, unshard/reshard, mixed precision (workers/fsdp_worker.py)."""

from mpi_launch import worker_suite

globals().update(worker_suite(
    "fsdp_worker.py", sizes=(2, 3), timeout=180,
    expect=("training_sgd_equals_single_process", "cpu_offload_policy_on_a_cpu_mesh"),
    min_checks=7))
