"""Tensor parallel (Colwise/Rowwise/Sequence parallel, PrepareModuleInput) on an MLP, a
transformer block and an embedding, 2 and 4 ranks, against the single-process model
(workers/tp_worker.py)."""

import pytest
from mpi_launch import assert_check, check_names, checks, mpirun

WORKER = "tp_worker.py"
NAMES = check_names(WORKER)
SIZES = (2, 4)


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
    assert "transformer_block" in NAMES and len(NAMES) >= 4
