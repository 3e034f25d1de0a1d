"""DistributedDataParallel on 2 MPI ranks equals single-process training on the same data
(workers/ddp_worker.py prints one CHECK line per rank and check)."""

import pytest
from mpi_launch import assert_check, check_names, checks, mpirun

WORKER = "ddp_worker.py"
NAMES = check_names(WORKER)
N = 2


@pytest.fixture(scope="module")
def run():
    proc = mpirun(WORKER, N, timeout=180)
    return proc, checks(proc)


def test_run_exits_cleanly(run):
    proc, _ = run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("rank", range(N))
def test_check(run, name, rank):
    assert_check(run, rank, name)


def test_checks_found():
    assert "ddp_matches_single_process" in NAMES and len(NAMES) >= 4
