"""Samplers: which indices a DataLoader draws, in what order, in what batches."""
from __future__ import annotations

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]


class Sampler:
    """Iterates over indices of a dataset."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _generator(generator):
    import ember
    if generator is not None:
        return generator
    g = ember.Generator()
    g.manual_seed(int(ember.empty((), dtype=ember.int64).random_().item()))
    return g


class RandomSampler(Sampler):
    """A random permutation (or draws with replacement), from `generator` when given."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        import ember
        n = len(self.data_source)
        g = _generator(self.generator)
        if self.replacement:  # drawn lazily, 32 at a time as PyTorch does: num_samples may be huge
            for _ in range(self.num_samples // 32):
                yield from ember.randint(0, n, (32,), generator=g).tolist()
            yield from ember.randint(0, n, (self.num_samples % 32,), generator=g).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from ember.randperm(n, generator=g).tolist()
        yield from ember.randperm(n, generator=g).tolist()[: self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        import ember
        for i in ember.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    def __init__(self, weights, num_samples, replacement=True, generator=None):
        import ember
        self.weights = ember.as_tensor(weights, dtype=ember.float64)
        self.num_samples, self.replacement, self.generator = num_samples, replacement, generator

    def __iter__(self):
        import ember
        idx = ember.multinomial(self.weights, self.num_samples, self.replacement,
                                generator=self.generator)
        yield from idx.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of batch_size."""

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
