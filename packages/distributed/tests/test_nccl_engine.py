"""The NCCL engine's calls on 2 CPU ranks: cuda tensors on ember-devices' fake device
(EMBER_CUDA_FAKE=1: host memory, Triton's interpreter) and a stand-in for nccl4py's low-level
bindings that carries out each NCCL call with MPI (workers/fake_nccl). The real library runs only
on a GPU machine; this checks pointers, counts, types, roots and group calls, not NCCL itself."""
import sys

from mpi_launch import fake_nccl_env, worker_suite

globals().update(worker_suite("nccl_worker.py", sizes=(2,), timeout=240, env=fake_nccl_env))


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
