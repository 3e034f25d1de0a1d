"""A PyTorch-style FSDP2 script (`import ember as torch`: meta-device model, fully_shard per
block, to_empty + init, AdamW, a distributed checkpoint round trip, a full state dict) started by
the launcher on 2 ranks prints the losses of the same script on 1 rank
(workers/fsdp2_example.py)."""
import os
import re
import subprocess
import sys

import pytest
from mpi_launch import HERE, child_env

SCRIPT = os.path.join(HERE, "workers", "fsdp2_example.py")


def run(n, ckpt, *flags):
    cmd = [sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", str(n), SCRIPT,
           str(ckpt), *flags]
    proc = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    losses = [float(v) for v in re.findall(r"^LOSS \d+ (\S+)$", proc.stdout, re.M)]
    checksum = float(re.search(r"^CHECKSUM (\S+)$", proc.stdout, re.M).group(1))
    assert len(losses) == 3, proc.stdout
    return losses, checksum


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    return run(1, tmp_path_factory.mktemp("one") / "ckpt")


def test_two_ranks_train_like_one(tmp_path, one_rank):
    one, c1 = one_rank
    two, c2 = run(2, tmp_path / "two")
    assert all(abs(a - b) < 1e-5 for a, b in zip(one, two)), (one, two)
    assert one[2] < one[0]  # it learns
    assert abs(c1 - c2) < 1e-3, (c1, c2)
    files = sorted(os.listdir(tmp_path / "two"))
    assert files == [".metadata", "__0_0.safetensors", "__1_0.safetensors"], files


def test_mixed_precision_two_ranks(tmp_path, one_rank):
    one, _ = one_rank
    mp, _ = run(2, tmp_path / "mp", "--mixed-precision")  # float64 compute, float32 params
    assert all(abs(a - b) < 1e-4 for a, b in zip(one, mp)), (one, mp)
