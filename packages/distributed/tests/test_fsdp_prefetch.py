"""FSDP2 prefetching on 2 and 4 ranks: forward/backward prefetch trains like one process, and the
collectives go out in the promised order (workers/fsdp_prefetch_worker.py)."""

import pytest
from mpi_launch import assert_check, check_names, checks, mpirun

WORKER = "fsdp_prefetch_worker.py"
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
    assert "backward_prefetches_in_reverse_order" in NAMES and len(NAMES) >= 6
