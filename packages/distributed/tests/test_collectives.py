"""Every collective on 2 MPI ranks (one mpiexec run) against a single-process numpy reference;
the worker prints one CHECK line per rank and check (workers/collectives_worker.py)."""
import os
import re

import pytest
from mpi_launch import HERE, checks, mpirun

WORKER = "collectives_worker.py"
NAMES = re.findall(r"@check\ndef (\w+)", open(os.path.join(HERE, "workers", WORKER)).read())
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
    proc, got = run
    assert (rank, name) in got, f"rank {rank} did not report {name}:\n" + proc.stderr[-3000:]
    assert got[(rank, name)] == "OK", got[(rank, name)]


def test_checks_found():
    assert len(NAMES) >= 15 and "timeouts_raise" in NAMES
