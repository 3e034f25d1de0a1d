"""DeviceMesh (2x2 on 4 MPI ranks: groups per dim, slicing), functional collectives (eager and in
ember.compile) and DTensor (distribute, redistribute between placements, Partial), against numpy
(workers/mesh_worker.py)."""

import pytest
from mpi_launch import assert_check, check_names, checks, mpirun

WORKER = "mesh_worker.py"
NAMES = check_names(WORKER)
N = 4


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
    assert "functional_collectives" in NAMES and len(NAMES) >= 3
