"""FSDP + TP on a 2 x 2 ("dp", "tp") mesh of 4 ranks: parameters are 2-D DTensors and training
equals single-process training (workers/fsdp_tp_worker.py)."""

from mpi_launch import worker_suite

globals().update(worker_suite(
    "fsdp_tp_worker.py", sizes=(4,), timeout=300,
    expect=("training_equals_single_process",), min_checks=3))
