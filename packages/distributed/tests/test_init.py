"""init_process_group: init methods, ranks from args/env/MPI, errors, world size 1 in-process."""
import datetime
import os
import socket
import subprocess
import sys

import pytest
from mpi_launch import checks, child_env, mpirun


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_init_methods_on_two_ranks(tmp_path):
    port = free_port()
    proc = mpirun("init_worker.py", 2, [str(tmp_path / "store"), str(port)], timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    got = checks(proc)
    for name in ["file", "tcp", "env", "mpi_only"]:
        for r in range(2):
            assert got.get((r, name)) == "OK", (name, r, proc.stderr[-2000:])


SINGLE = r'''
import datetime, ember, ember.distributed as dist
try:
    dist.get_rank()
except ValueError as e:
    assert "init_process_group" in str(e)
else:
    raise AssertionError
dist.init_process_group("gloo", init_method="file://" + PATH, rank=0, world_size=1)
assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
t = ember.arange(3.)
dist.all_reduce(t, dist.ReduceOp.AVG)
assert t.tolist() == [0., 1., 2.]
out = [ember.zeros(3)]
dist.all_gather(out, t)
assert out[0].tolist() == [0., 1., 2.]
try:
    dist.init_process_group("gloo", rank=0, world_size=1)
except ValueError as e:
    assert "twice" in str(e)
else:
    raise AssertionError
try:
    dist.all_reduce(ember.ones(1), group=dist.new_group([0]), op=dist.ReduceOp.PREMUL_SUM)
except RuntimeError as e:
    assert "PREMUL_SUM" in str(e)
dist.destroy_process_group()
try:
    dist.init_process_group("gloo", init_method="file://" + PATH + "2", rank=0, world_size=2,
                            timeout=datetime.timedelta(seconds=5))
except RuntimeError as e:
    assert "mpiexec" in str(e), e
else:
    raise AssertionError
print("SINGLE OK")
'''


def test_world_size_one_without_mpiexec(tmp_path):
    code = f"PATH = {str(tmp_path / 'fs')!r}\n" + SINGLE
    proc = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                          text=True, timeout=120)
    assert "SINGLE OK" in proc.stdout, proc.stdout + proc.stderr[-3000:]


def test_backend_names():
    import ember.distributed as dist
    from ember.distributed._group import _parse_backend
    assert _parse_backend("gloo") == {"cpu": "gloo"}
    assert _parse_backend("NCCL") == {"cuda": "nccl"}
    assert _parse_backend("cpu:gloo,cuda:nccl") == {"cpu": "gloo", "cuda": "nccl"}
    with pytest.raises(ValueError, match="Invalid backend"):
        _parse_backend("ucc2")
    assert dist.get_default_backend_for_device("cpu") == "gloo"
    assert dist.get_default_backend_for_device("cuda:1") == "nccl"
    assert dist.Backend("GLOO") == "gloo" and dist.Backend.NCCL == "nccl"
    assert int(dist.ReduceOp.SUM) == 0 and dist.ReduceOp.BXOR.name == "BXOR"
    assert dist.is_mpi_available() and dist.is_gloo_available()


def test_not_initialized_errors():
    import ember
    import ember.distributed as dist
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.all_reduce(ember.ones(1))
    with pytest.raises(ValueError, match="rank and world_size"):
        env = {k: os.environ.pop(k) for k in ("RANK", "WORLD_SIZE") if k in os.environ}
        try:
            dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=1))
        finally:
            os.environ.update(env)
