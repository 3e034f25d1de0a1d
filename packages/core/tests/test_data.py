"""ember.utils.data: batching, shuffling reproducibility, collate of nested samples, workers."""
import collections

import numpy as np
import pytest

import ember
from ember.utils.data import (
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    default_collate,
    get_worker_info,
    random_split,
)


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return {"x": ember.tensor([float(i), float(i * i)]), "y": i, "name": f"s{i}"}


def test_batching_and_drop_last():
    ds = TensorDataset(ember.arange(10.0), ember.arange(10))
    batches = list(DataLoader(ds, batch_size=4))
    assert [b[0].shape[0] for b in batches] == [4, 4, 2]
    assert batches[2][1].tolist() == [8, 9]
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    assert len(list(DataLoader(ds, batch_size=4, drop_last=True))) == 2


def test_collate_nested():
    b = default_collate([Squares(3)[i] for i in range(3)])
    assert b["x"].shape == (3, 2) and b["y"].tolist() == [0, 1, 2]
    assert b["y"].dtype == ember.int64 and b["name"] == ["s0", "s1", "s2"]
    Point = collections.namedtuple("Point", "a b")
    p = default_collate([Point(1.0, np.ones(2)), Point(2.0, np.zeros(2))])
    assert isinstance(p, Point) and p.a.dtype == ember.float64 and p.b.shape == (2, 2)


def test_shuffle_reproducible_with_generator():
    ds = TensorDataset(ember.arange(20))

    def order(seed):
        g = ember.Generator().manual_seed(seed)
        return [int(v) for b in DataLoader(ds, batch_size=5, shuffle=True, generator=g)
                for v in b[0].tolist()]

    a, b, c = order(1), order(1), order(2)
    assert a == b and a != c and sorted(a) == list(range(20))


def test_workers_match_single_process():
    ds = Squares(23)
    single = [b["y"].tolist() for b in DataLoader(ds, batch_size=4)]
    multi = [b["y"].tolist() for b in DataLoader(ds, batch_size=4, num_workers=2)]
    assert single == multi


class Boom(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise ValueError("bad sample 5")
        return ember.tensor(float(i))


def test_worker_error_propagates():
    with pytest.raises(RuntimeError, match="bad sample 5"):
        list(DataLoader(Boom(), batch_size=2, num_workers=2))


class Stream(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        wid, n = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(wid, 12, n))


def test_iterable_dataset_with_workers():
    got = sorted(v for b in DataLoader(Stream(), batch_size=3, num_workers=2)
                 for v in b.tolist())
    assert got == list(range(12))


def test_subset_concat_split():
    ds = TensorDataset(ember.arange(10))
    assert Subset(ds, [3, 1])[0][0].item() == 3
    cat = ConcatDataset([ds, ds])
    assert len(cat) == 20 and cat[15][0].item() == 5 and cat[-1][0].item() == 9
    parts = random_split(ds, [0.7, 0.3], generator=ember.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [7, 3]
    assert sorted(i for p in parts for i in p.indices) == list(range(10))


def test_bad_arguments():
    ds = TensorDataset(ember.arange(4))
    with pytest.raises(ValueError):
        DataLoader(ds, batch_size=0)
    with pytest.raises(ValueError):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError):
        DataLoader(ds, sampler=[0, 1], shuffle=True)
