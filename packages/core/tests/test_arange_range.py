"""arange at the edges of int64 against torch: out-of-range Python ints raise PyTorch's
OverflowError / RuntimeError instead of wrapping; counts follow PyTorch's int64 arithmetic."""
import math

import numpy as np
import pytest
from harness import torch

import ember

CASES = [
    ((0, 2**64, 2**62), None), ((2**64,), None), ((0, 2**64), None), ((2**64, 0, 1), None),
    ((0.0, 2**64), None), ((0, 2**64, 2**62), "float32"),
    ((-2**63 - 1, 0, 2**62), None), ((0, -2**63 - 1, -1), None),
    ((0, 2**63, 1), None), ((2**63, 2**63 + 2), None), ((0, 10, 2**63), None),
    ((0, 2**63, 2**62), "float64"), ((0, 2**63, 2**62), "int32"),
    ((0, 2**63 - 1, 2**62), None), ((0, 2**63 - 1, 2**61), None), ((2**63 - 1, 0, -2**62), None),
    ((-2**63, 0, 2**62), None), ((-2**63, 2**63 - 1, 2**62), None),
    ((0, 2**62, 2**61), None), ((0, 2**62 + 5, 2**61), None), ((0, 10, 2**62), None),
    ((-2**63, -2**63 + 10, 3), None), ((2**63 - 10, 2**63 - 1, 3), None),
    ((0, -2**63, -2**62), None), ((0, 2**63 - 1, 2**63 - 1), None),
    ((0, math.inf), None), ((0, math.nan), None), ((-math.inf, 0.0), None),
    ((5, 0, 1), None), ((0, 5, 0), None), ((0, -5, -2), None), ((0, 1, 0.1), None),
    ((True, 5), None),
]


def _run(t, args, dtype):
    kw = {} if dtype is None else {"dtype": getattr(t, dtype)}
    try:
        r = t.arange(*args, **kw)
    except Exception as e:  # noqa: BLE001 - compared with torch's
        return type(e).__name__, str(e)
    return str(r.dtype).split(".")[-1], np.array(r.tolist())


@pytest.mark.parametrize("args,dtype", CASES, ids=[f"{a}-{d}" for a, d in CASES])
def test_arange_edges_as_torch(args, dtype):
    e, t = _run(ember, args, dtype), _run(torch, args, dtype)
    assert e[0] == t[0], (e, t)
    if isinstance(t[1], str):
        assert e[1] == t[1]
    else:
        np.testing.assert_array_equal(e[1], t[1])


def test_arange_overflow_on_meta():
    with pytest.raises(OverflowError, match="int too big to convert"):
        ember.arange(0, 2**64, 2**62, device="meta")
