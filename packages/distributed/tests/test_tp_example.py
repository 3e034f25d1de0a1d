"""A PyTorch-style tensor/sequence-parallel script (`import ember as torch`) started by the
launcher on 2 ranks prints what it prints on 1 rank (workers/tp_example.py)."""
import os
import re
import subprocess
import sys

from mpi_launch import HERE, child_env

SCRIPT = os.path.join(HERE, "workers", "tp_example.py")


def run(n):
    cmd = [sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", str(n), SCRIPT]
    proc = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    steps = dict(((k, int(i)), float(v)) for k, i, v in
                 re.findall(r"^STEP (\w+) (\d) (\S+)$", proc.stdout, re.M))
    assert len(steps) == 6, proc.stdout
    return steps


def test_two_ranks_equal_one():
    one, two = run(1), run(2)
    for k in one:
        assert abs(one[k] - two[k]) <= 1e-5 * max(1.0, abs(one[k])), (k, one[k], two[k])
