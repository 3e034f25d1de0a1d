"""FSDP + TP on a 2 x 2 ("dp", "tp") mesh of 4 ranks: parameters are 2-D DTensors and training
equals single-process training (workers/fsdp_tp_worker.py)."""

import pytest
from mpi_launch import assert_check, check_names, checks, mpirun

WORKER = "fsdp_tp_worker.py"
NAMES = check_names(WORKER)


@pytest.fixture(scope="module")
def run():
    proc = mpirun(WORKER, 4, timeout=300)
    return proc, checks(proc)


def test_run_exits_cleanly(run):
    proc, _ = run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.parametrize("name", NAMES)
def test_check(run, name):
    for rank in range(4):
        assert_check(run, rank, name)


def test_checks_found():
    assert "training_equals_single_process" in NAMES and len(NAMES) >= 3
