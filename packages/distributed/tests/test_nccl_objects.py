"""Object collectives and barrier on a group with backend "nccl" only (no CPU engine), on 2 CPU
ranks through the fake CUDA device and the nccl4py stand-in (workers/nccl_objects_worker.py)."""
import os
import sys

import pytest
from mpi_launch import HERE, assert_check, check_names, checks, mpirun

WORKER = "nccl_objects_worker.py"
NAMES = check_names(WORKER)


@pytest.fixture(scope="module")
def run():
    path = os.pathsep.join([os.path.join(HERE, "workers", "fake_nccl"), *filter(None, sys.path)])
    env = {"EMBER_CUDA_FAKE": "1", "TRITON_INTERPRET": "1", "PYTHONPATH": path}
    proc = mpirun(WORKER, 2, timeout=240, env=env)
    return proc, checks(proc)


def test_run_exits_cleanly(run):
    proc, _ = run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("rank", range(2))
def test_check(run, name, rank):
    assert_check(run, rank, name)
