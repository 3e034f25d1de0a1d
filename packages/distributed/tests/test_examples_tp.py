"""examples/tensor_parallel_example.py and examples/fsdp_tp_example.py (in the style of PyTorch's
tensor/sequence-parallel and FSDP + TP examples; a Llama-style model with a vocabulary-parallel
embedding, sequence-parallel RMSNorms and a 2-D (dp, tp) mesh) started by the launcher print the
losses of one process."""
from mpi_launch import assert_losses_equal, run_example


def test_tensor_and_sequence_parallel_two_ranks():
    for flags in ((), ("--sequence-parallel",)):
        one = run_example("tensor_parallel_example.py", 1, *flags)
        assert_losses_equal(run_example("tensor_parallel_example.py", 2, *flags), one)


def test_fsdp_tp_2d_four_ranks_and_tp_two_ranks():
    one = run_example("fsdp_tp_example.py", 1)
    assert len(one) == 3
    assert_losses_equal(run_example("fsdp_tp_example.py", 2), one)  # mesh 1 x 2: TP only
    assert_losses_equal(run_example("fsdp_tp_example.py", 4), one)  # mesh 2 x 2
