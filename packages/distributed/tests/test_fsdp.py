"""fully_shard (FSDP2) on 2 and 3 ranks (uneven shards): training equal to single-process training,
gradient accumulation without sync, unshard/reshard, mixed precision (workers/fsdp_worker.py)."""

import pytest
from mpi_launch import assert_check, check_names, checks, mpirun

WORKER = "fsdp_worker.py"
NAMES = check_names(WORKER)
SIZES = (2, 3)


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
    assert "training_sgd_equals_single_process" in NAMES and len(NAMES) >= 6
