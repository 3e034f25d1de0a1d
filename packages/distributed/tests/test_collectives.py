"""Every collective on 2 MPI ranks (one mpiexec run) against a single-process numpy reference;
the worker prints one CHECK line per rank and check (workers/collectives_worker.py)."""

import pytest
from mpi_launch import assert_check, check_names, checks, mpirun

WORKER = "collectives_worker.py"
NAMES = check_names(WORKER)
N = 2


@pytest.fixture(scope="module")
def run():
    proc = mpirun(WORKER, N, timeout=180)
    return proc, checks(proc)


def test_run_exits_cleanly(run):
    proc, _ = run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for r in range(N):
        assert f"DONE {r} failed=[]" in proc.stdout


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("rank", range(N))
def test_check(run, name, rank):
    assert_check(run, rank, name)


def test_checks_found():
    assert len(NAMES) >= 15 and "timeouts_raise" in NAMES
