"""examples/ddp_trainer.py (a DDP script in the style of PyTorch's ddp-tutorial-series) started by
the launcher on 2 and 4 ranks prints the losses of one process on the same global batches, and
resumes from its snapshot."""
from mpi_launch import assert_losses_equal, run_example

SCRIPT = "ddp_trainer.py"


def test_ddp_trainer_two_and_four_ranks_match_one(tmp_path):
    one = run_example(SCRIPT, 1, 3, 1, "--batch_size", 16, "--snapshot_path", tmp_path / "s1.pt")
    assert len(one) == 12 and one[-1][1] < one[0][1]  # 3 epochs of 4 steps; it learns
    snap = tmp_path / "s2.pt"
    two = run_example(SCRIPT, 2, 2, 1, "--batch_size", 8, "--snapshot_path", snap)
    assert_losses_equal(two, one[:8])
    resumed = run_example(SCRIPT, 2, 3, 1, "--batch_size", 8, "--snapshot_path", snap)
    assert_losses_equal(resumed, one[8:])  # epoch 2 only, from the snapshot of epoch 1
    four = run_example(SCRIPT, 4, 1, 1, "--batch_size", 4, "--snapshot_path", tmp_path / "s4.pt")
    assert_losses_equal(four, one[:4])
