"""A Python range as an index reads like the list of its ints (as in PyTorch), getting and
setting, alone or among other indices; values, shapes and errors against torch."""
import numpy as np
import pytest
from harness import torch

import ember


def _get(t, index):
    return t.arange(12.0).reshape(3, 4)[index(t)]


def _set(t, index, value):
    y = t.arange(12.0).reshape(3, 4)
    y[index(t)] = value(t)
    return y


def _outcome(fn, t):
    try:
        r = fn(t)
    except Exception as e:  # noqa: BLE001 - compared with torch's
        return type(e).__name__, str(e)
    return tuple(r.shape), np.asarray(r.tolist())


def same(fn):
    e, t = _outcome(fn, ember), _outcome(fn, torch)
    assert e[0] == t[0], (e, t)
    if isinstance(t[1], str):
        assert e[1] == t[1]
    else:
        np.testing.assert_array_equal(e[1], t[1])


GETS = {
    "range": lambda t: range(2),
    "empty": lambda t: range(0),
    "negative_step": lambda t: range(-1, -4, -1),
    "with_tensor": lambda t: (range(3), t.tensor([0, 1, 2])),
    "two_ranges": lambda t: (range(3), range(3)),
    "after_slice": lambda t: (slice(None), range(1, 4, 2)),
    "after_ellipsis": lambda t: (..., range(2)),
    "out_of_bounds": lambda t: range(5),
}


@pytest.mark.parametrize("name", sorted(GETS))
def test_range_index_get(name):
    same(lambda t: _get(t, GETS[name]))


SETS = {
    "scatter_rows": (lambda t: (range(3), [1, 2, 3]), lambda t: 5.0),
    "rows": (lambda t: range(2), lambda t: t.tensor(-1.0)),
    "diagonal": (lambda t: (range(3), range(3)), lambda t: t.tensor([7.0, 8.0, 9.0])),
}


@pytest.mark.parametrize("name", sorted(SETS))
def test_range_index_set(name):
    index, value = SETS[name]
    same(lambda t: _set(t, index, value))


def test_range_index_inplace_add_and_grad():
    def f(t):
        w = t.ones(3, 4, requires_grad=True)
        y = w * 2
        y[range(3), range(3)] += 1
        y.sum().backward()
        return w.grad
    same(f)
