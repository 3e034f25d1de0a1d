"""examples/fsdp2_example.py (an FSDP2 script in the style of PyTorch's FSDP2 example: meta-device
model, fully_shard per block, explicit prefetching, mixed precision, checkpoints through the
DTensor API or the DCP state-dict API) started by the launcher on 2 and 4 ranks prints the losses
of one process, and resumes from its checkpoint."""
import pytest
from mpi_launch import assert_losses_equal, run_example

SCRIPT = "fsdp2_example.py"


@pytest.fixture(scope="module")
def one(tmp_path_factory):
    """4 steps in one process."""
    return run_example(SCRIPT, 1, "--folder", tmp_path_factory.mktemp("one"), "--steps", 4)


def test_two_ranks_prefetching_dtensor_checkpoint(tmp_path, one):
    assert len(one) == 4 and one[-1][1] < one[0][1]
    args = ("--folder", tmp_path / "two", "--steps", 2, "--explicit-prefetching")
    assert_losses_equal(run_example(SCRIPT, 2, *args), one[:2])
    assert_losses_equal(run_example(SCRIPT, 2, *args), one[2:])  # resumed from step 2


def test_four_ranks_dcp_api_checkpoint_loads_into_one(tmp_path, one):
    folder = tmp_path / "four"
    assert_losses_equal(run_example(SCRIPT, 4, "--folder", folder, "--steps", 2, "--dcp-api"),
                        one[:2])
    # saved by 4 ranks, resumed by 1 process
    assert_losses_equal(run_example(SCRIPT, 1, "--folder", folder, "--steps", 2, "--dcp-api"),
                        one[2:])


def test_mixed_precision_two_ranks(tmp_path):
    one = run_example(SCRIPT, 1, "--folder", tmp_path / "one", "--steps", 2,
                      "--mixed-precision")
    two = run_example(SCRIPT, 2, "--folder", tmp_path / "two", "--steps", 2,
                      "--mixed-precision", "--explicit-prefetching")
    assert_losses_equal(two, one, rtol=1e-4)  # bfloat16 parameters, float32 reduce
