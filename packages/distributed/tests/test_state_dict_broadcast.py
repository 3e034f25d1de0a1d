"""set_model_state_dict / set_optimizer_state_dict with broadcast_from_rank0 on 2 ranks: rank 0
holds the whole state, rank 1 passes empty dicts, the fresh model was built on the meta device
(workers/bcast_state_worker.py; the reload of PyTorch's FSDP2 example)."""
import pytest
from mpi_launch import assert_check, check_names, checks, mpirun

WORKER = "bcast_state_worker.py"
NAMES = check_names(WORKER)


@pytest.fixture(scope="module")
def run():
    proc = mpirun(WORKER, 2, timeout=180)
    return proc, checks(proc)


def test_run_exits_cleanly(run):
    proc, _ = run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("rank", range(2))
def test_check(run, name, rank):
    assert_check(run, rank, name)
