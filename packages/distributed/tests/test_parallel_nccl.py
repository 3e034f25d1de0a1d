"""DTensor, tensor parallel and fully_shard on cuda tensors through the NCCL engine, on 2 CPU
ranks: ember-devices' fake cuda device (EMBER_CUDA_FAKE=1, Triton's interpreter) and the nccl4py
stand-in of workers/fake_nccl (workers/parallel_nccl_worker.py; gpu_nccl_check.py runs the same
worker on GPUs with the real library)."""
import os
import sys

import pytest
from mpi_launch import HERE, assert_check, check_names, checks, mpirun

WORKER = "parallel_nccl_worker.py"
NAMES = check_names(WORKER)
N = 2


@pytest.fixture(scope="module")
def run():
    path = os.pathsep.join([os.path.join(HERE, "workers", "fake_nccl"), *filter(None, sys.path)])
    env = {"EMBER_CUDA_FAKE": "1", "TRITON_INTERPRET": "1", "PYTHONPATH": path}
    proc = mpirun(WORKER, N, timeout=240, env=env)
    return proc, checks(proc)


def test_run_exits_cleanly(run):
    proc, _ = run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("rank", range(N))
def test_check(run, name, rank):
    assert_check(run, rank, name)


def test_checks_found():
    assert "fully_shard_training" in NAMES and len(NAMES) >= 3
