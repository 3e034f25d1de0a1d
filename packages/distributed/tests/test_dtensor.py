"""Ops on DTensors with sharding propagation and autograd through them, on 3 ranks
(uneven shards of 5 rows), against whole-tensor computation (workers/dtensor_worker.py)."""

from mpi_launch import worker_suite

globals().update(worker_suite(
    "dtensor_worker.py", sizes=(3,), timeout=180,
    expect=("autograd_through_ops",), min_checks=8))
