"""DistributedSampler: each rank draws its own slice of a dataset's indices (torch's rules for
padding, drop_last, seed + epoch shuffling)."""
from __future__ import annotations

import math

from ember.utils.data import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """Indices rank, rank + num_replicas, ... of a (shuffled, padded) index list.

    >>> list(DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False))
    [1, 3, 0]
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None or rank is None:
            from ._group import get_rank, get_world_size, is_initialized
            if not is_initialized():
                raise RuntimeError("Requires distributed package to be available")
            num_replicas = get_world_size() if num_replicas is None else num_replicas
            rank = get_rank() if rank is None else rank
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.epoch, self.drop_last, self.shuffle, self.seed = 0, drop_last, shuffle, seed
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        import ember
        n = len(self.dataset)
        if self.shuffle:
            g = ember.Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = ember.randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """A new shuffle order for this epoch (the same on every rank)."""
        self.epoch = epoch
