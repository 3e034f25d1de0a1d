"""DistributedSampler against torch's: the same indices without shuffling (padding, drop_last),
and with shuffling a partition of the dataset that changes with the epoch."""
import pytest
import torch.utils.data.distributed as tdd

from ember.utils.data.distributed import DistributedSampler


@pytest.mark.parametrize("n", [1, 5, 8, 11])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_unshuffled_matches_torch(n, replicas, drop_last):
    for rank in range(replicas):
        ours = DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        ref = tdd.DistributedSampler(range(n), replicas, rank, shuffle=False,
                                     drop_last=drop_last)
        assert list(ours) == list(ref) and len(ours) == len(ref), (n, replicas, rank)


@pytest.mark.parametrize("drop_last", [False, True])
def test_shuffled_partition_per_epoch(drop_last):
    n, replicas = 10, 3
    orders = []
    for epoch in range(2):
        got = []
        for rank in range(replicas):
            s = DistributedSampler(range(n), replicas, rank, seed=7, drop_last=drop_last)
            s.set_epoch(epoch)
            again = DistributedSampler(range(n), replicas, rank, seed=7, drop_last=drop_last)
            again.set_epoch(epoch)
            assert list(s) == list(again)  # every rank computes the same permutation
            got.append(list(s))
        flat = [i for part in got for i in part]
        assert len(flat) == (9 if drop_last else 12)
        assert set(flat) <= set(range(n)) and (drop_last or set(flat) == set(range(n)))
        orders.append(flat)
    assert orders[0] != orders[1]


def test_rank_out_of_range():
    with pytest.raises(ValueError, match="Invalid rank 2"):
        DistributedSampler(range(4), 2, 2)
