"""The NCCL engine's calls on 2 CPU ranks: cuda tensors on ember-devices' fake device
(EMBER_CUDA_FAKE=1: host memory, Triton's interpreter) and a stand-in for nccl4py's low-level
bindings that carries out each NCCL call with MPI (workers/fake_nccl). The real library runs only
on a GPU machine; this checks pointers, counts, types, roots and group calls, not NCCL itself."""
import os
import sys

import pytest
from mpi_launch import HERE, assert_check, check_names, checks, mpirun

WORKER = "nccl_worker.py"
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


def test_engine_imports_lazily():
    """Importing ember.distributed loads neither nccl4py, the NCCL engine nor mpi4py."""
    import subprocess

    from mpi_launch import child_env
    code = ("import sys, ember.distributed as d; "
            "print('nccl' in sys.modules, 'ember.distributed._engine_nccl' in sys.modules, "
            "'mpi4py' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.split() == ["False", "False", "False"], out.stdout + out.stderr
