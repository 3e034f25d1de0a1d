"""gather / scatter / scatter_add / scatter_reduce / index_add / index_copy refuse negative
indices along dim (PyTorch's error type and message); index_fill and take_along_dim keep
PyTorch's wrapping."""
import numpy as np
import pytest
from harness import torch

import ember


def _outcome(fn, t):
    try:
        r = fn(t)
    except Exception as e:  # noqa: BLE001 - compared below
        return type(e).__name__, str(e).splitlines()[0]
    return "ok", np.asarray(r.tolist())


def same(fn):
    e, t = _outcome(fn, ember), _outcome(fn, torch)
    assert e[0] == t[0], (e, t)
    if t[0] == "ok":
        np.testing.assert_array_equal(e[1], t[1])
    else:
        assert e[1] == t[1], (e, t)
    return t[0]


def ix(t, v):
    return t.tensor(v, dtype=t.int64)


REFUSED = {
    "gather": lambda t: t.gather(t.arange(3.0), 0, ix(t, [-1])),
    "gather_2d": lambda t: t.gather(t.zeros(2, 3), 1, ix(t, [[0, -2]])),
    "gather_dim0": lambda t: t.gather(t.zeros(2, 3), 0, ix(t, [[0, -2]])),
    "gather_0d": lambda t: t.gather(t.zeros(()), 0, ix(t, -1)),
    "scatter": lambda t: t.zeros(3).scatter(0, ix(t, [-1]), t.ones(1)),
    "scatter_value": lambda t: t.zeros(3).scatter(0, ix(t, [-1]), 2.0),
    "scatter_reduce_arg": lambda t: t.zeros(3).scatter(0, ix(t, [-1]), t.ones(1), reduce="add"),
    "scatter_0d": lambda t: t.zeros(()).scatter(0, ix(t, -1), t.ones(())),
    "scatter_2d": lambda t: t.zeros(2, 3).scatter(1, ix(t, [[0, -2]]), t.ones(1, 2)),
    "scatter_add": lambda t: t.zeros(3).scatter_add(0, ix(t, [-1]), t.ones(1)),
    "scatter_add_2d": lambda t: t.zeros(2, 3).scatter_add(0, ix(t, [[-1, 0, 0]]), t.ones(1, 3)),
    "scatter_add_": lambda t: t.zeros(3).scatter_add_(0, ix(t, [-3]), t.ones(1)),
    "scatter_reduce_sum": lambda t: t.zeros(3).scatter_reduce(0, ix(t, [-1]), t.ones(1), "sum"),
    "scatter_reduce_amax": lambda t: t.zeros(3).scatter_reduce(0, ix(t, [-1]), t.ones(1),
                                                               "amax"),
    "index_add": lambda t: t.zeros(3).index_add(0, ix(t, [-1]), t.ones(1)),
    "index_add_": lambda t: t.zeros(3).index_add_(0, ix(t, [-1]), t.ones(1)),
    "index_add_too_big": lambda t: t.zeros(3).index_add(0, ix(t, [3]), t.ones(1)),
    "index_add_alpha": lambda t: t.zeros(3).index_add(0, ix(t, [-1]), t.ones(1), alpha=2),
    "index_add_0d": lambda t: t.zeros(()).index_add(0, ix(t, [-1]), t.ones(())),
    "index_add_int": lambda t: t.zeros(3, dtype=t.int64).index_add(0, ix(t, [-1]),
                                                                  t.ones(1, dtype=t.int64)),
    # >1-d: scatter_add's error for an int64 index, alpha 1, dim first or last; else IndexError
    "index_add_2d_last": lambda t: t.zeros(2, 3).index_add(1, ix(t, [0, -1, 7]), t.ones(2, 3)),
    "index_add_2d_first": lambda t: t.zeros(2, 3).index_add(0, ix(t, [-1]), t.ones(1, 3)),
    "index_add_2d_big": lambda t: t.zeros(2, 3).index_add(0, ix(t, [2]), t.ones(1, 3)),
    "index_add_2d_alpha": lambda t: t.zeros(2, 3).index_add(1, ix(t, [-1]), t.ones(2, 1),
                                                            alpha=2),
    "index_add_2d_int32": lambda t: t.zeros(2, 3).index_add(1, t.tensor([-1], dtype=t.int32),
                                                            t.ones(2, 1)),
    "index_add_3d_middle": lambda t: t.zeros(2, 3, 4).index_add(1, ix(t, [-1]),
                                                                t.ones(2, 1, 4)),
    "index_add_3d_last": lambda t: t.zeros(2, 3, 4).index_add(2, ix(t, [0, 9]),
                                                              t.ones(2, 3, 2)),
    "index_copy": lambda t: t.zeros(3).index_copy(0, ix(t, [-1]), t.ones(1)),
    "index_copy_3d": lambda t: t.zeros(2, 3, 4).index_copy(1, ix(t, [-1]), t.ones(2, 1, 4)),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_negative_index_refused_as_torch(name):
    assert same(REFUSED[name]) != "ok"


KEPT = {
    "gather": lambda t: t.gather(t.arange(6.0).reshape(2, 3), 1, ix(t, [[2, 0], [1, 1]])),
    "scatter_add": lambda t: t.zeros(2, 3).scatter_add(1, ix(t, [[2, 0], [1, 1]]),
                                                        t.ones(2, 2)),
    "index_add": lambda t: t.zeros(2, 3).index_add(1, ix(t, [2, 0]), t.ones(2, 2)),
    "index_add_1d": lambda t: t.zeros(3).index_add(0, ix(t, [2, 0, 2]), t.ones(3)),
    "index_copy": lambda t: t.zeros(3).index_copy(0, ix(t, [2, 0]), t.ones(2)),
    # these two wrap negative indices in PyTorch too
    "index_fill": lambda t: t.zeros(3).index_fill(0, ix(t, [-1]), 1.0),
    "take_along_dim": lambda t: t.take_along_dim(t.arange(3.0), ix(t, [-1]), 0),
}


@pytest.mark.parametrize("name", sorted(KEPT))
def test_in_range_and_wrapping_ops_unchanged(name):
    assert same(KEPT[name]) == "ok"


@pytest.mark.parametrize("v", [-1, -3, -4, -7, 3, 5])
def test_take_along_dim_reads_indices_modulo_the_size(v):
    assert same(lambda t: t.take_along_dim(t.arange(6.0).reshape(2, 3), ix(t, [[v]]), 1)) == "ok"


def test_take_along_dim_without_dim_refuses_negatives():
    assert same(lambda t: t.take_along_dim(t.arange(6.0).reshape(2, 3), ix(t, [-1]))) != "ok"
