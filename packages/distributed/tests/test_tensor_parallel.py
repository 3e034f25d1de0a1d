"""Tensor parallel (Colwise/Rowwise/Sequence parallel, PrepareModuleInput) on an MLP, a
transformer block and an embedding, 2 and 4 ranks, against the single-process model
(workers/tp_worker.py)."""

from mpi_launch import worker_suite

globals().update(worker_suite(
    "tp_worker.py", sizes=(2, 4), timeout=180,
    expect=("transformer_block",), min_checks=4))
