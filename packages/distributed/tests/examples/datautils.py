"""A small in-memory dataset for the DDP example (after the ddp-tutorial-series' own): fixed
random samples drawn from one seeded generator, so every rank and every run sees the same data."""
import ember as torch
from ember.utils.data import Dataset


class RandomClassification(Dataset):
    """`size` samples of (20 features, one of 4 classes), fixed by `seed`."""

    def __init__(self, size: int, seed: int = 1234):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.rand(size, 20, generator=g)
        self.y = torch.randint(0, 4, (size,), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return self.x[index], self.y[index]
