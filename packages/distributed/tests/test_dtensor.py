"""Ops on DTensors with sharding propagation and autograd through them, on 3 ranks
(uneven shards of 5 rows), against whole-tensor computation (workers/dtensor_worker.py)."""

import pytest
from mpi_launch import assert_check, check_names, checks, mpirun

WORKER = "dtensor_worker.py"
NAMES = check_names(WORKER)
SIZES = (3,)  # (2 ranks: the tensor-parallel and fully_shard tests; 3 gives uneven shards)


@pytest.fixture(scope="module", params=SIZES)
def run(request):
    proc = mpirun(WORKER, request.param, timeout=180)
    return request.param, proc, checks(proc)


def test_run_exits_cleanly(run):
    _, proc, _ = run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.parametrize("name", NAMES)
def test_check(run, name):
    n, proc, got = run
    for rank in range(n):
        assert_check((proc, got), rank, name)


def test_checks_found():
    assert "autograd_through_ops" in NAMES and len(NAMES) >= 8
