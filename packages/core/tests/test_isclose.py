"""ember.isclose / allclose / equal (functions and Tensor methods) against torch 2.13: values,
NaN and infinity rules, integer and bool inputs, broadcasting, errors."""
import math

import numpy as np
import pytest
import torch

import ember

NAN, INF = math.nan, math.inf
PAIRS = [
    ([1.0, 2.0, 3.0], [1.0, 2.0 + 1e-6, 3.1], "float32"),
    ([INF, -INF, NAN, 1.0, NAN], [INF, INF, NAN, NAN, 1.0], "float64"),
    ([0.0, 1e-9, -1e-9], [1e-8, 0.0, 2e-8], "float64"),
    ([1, 2, 3, 100000], [1, 3, 3, 100001], "int64"),
    ([True, False, True], [True, True, True], "bool"),
]


@pytest.mark.parametrize("a,b,dt", PAIRS)
@pytest.mark.parametrize("kw", [{}, {"equal_nan": True}, {"rtol": 0, "atol": 0},
                                {"rtol": 1e-3, "atol": 1e-2}, {"rtol": 0.5}])
def test_isclose_allclose_equal_as_torch(a, b, dt, kw):
    ea, eb = (ember.tensor(a, dtype=getattr(ember, dt)), ember.tensor(b, dtype=getattr(ember, dt)))
    ta, tb = (torch.tensor(a, dtype=getattr(torch, dt)), torch.tensor(b, dtype=getattr(torch, dt)))
    got, want = ember.isclose(ea, eb, **kw), torch.isclose(ta, tb, **kw)
    assert got.dtype == ember.bool
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(ea.isclose(eb, **kw).numpy(), want.numpy())
    assert ember.allclose(ea, eb, **kw) is torch.allclose(ta, tb, **kw)
    assert ea.allclose(eb, **kw) is torch.allclose(ta, tb, **kw)
    assert ember.equal(ea, eb) is torch.equal(ta, tb)
    assert ember.equal(ea, ea) is torch.equal(ta, ta) and ea.equal(eb) is ta.equal(tb)


def test_broadcast_sizes_and_errors():
    a, b = ember.ones(2, 3), ember.ones(3)
    assert ember.isclose(a, b).shape == (2, 3) and ember.allclose(a, b)
    assert ember.equal(a, b) is torch.equal(torch.ones(2, 3), torch.ones(3)) is False
    assert ember.equal(ember.tensor([1.0]), ember.tensor([1])) is True   # promoted, as torch
    with pytest.raises(RuntimeError, match="Float did not match Double"):
        ember.isclose(ember.ones(2), ember.ones(2, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="Long did not match Float"):
        ember.isclose(ember.tensor([1, 2]), ember.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="rtol must be greater than or equal to zero"):
        ember.isclose(ember.ones(2), ember.ones(2), rtol=-1)
    with pytest.raises(RuntimeError, match="atol must be greater than or equal to zero"):
        ember.allclose(ember.ones(2), ember.ones(2), atol=-1)
    with pytest.raises(RuntimeError, match="must match the size"):
        ember.isclose(ember.ones(2), ember.ones(3))
