"""Conversions to and from float8_e4m3fn / float8_e5m2 as PyTorch 2.13 does them: e4m3fn
saturates out-of-range values and infinities to +-448, e5m2 overflows to inf; every float16 and
bfloat16 value, float32/float64 edge values, integers, fill_/full's overflow check."""
import numpy as np
import pytest
import torch

import ember

F8 = ["float8_e4m3fn", "float8_e5m2"]
EDGE = [0.0, -0.0, 1.0, 447.9, 448.0, 449.0, 464.0, 464.1, 480.0, 500.0, 1e4, 57343.0, 57344.0,
        57345.0, 61439.0, 61440.0, 61441.0, 65504.0, 1e5, 1e30, 3e38, float("inf"),
        float("-inf"), float("nan"), -500.0, -1e5, 1e-10, 2.0 ** -10, 2.0 ** -9, 2.0 ** -17,
        2.0 ** -16, 3e-3, 0.1]


def _bits(t, x):
    """Raw bytes of a float8 tensor (nan payloads compared too)."""
    return x.view(t.uint8).numpy()


@pytest.mark.parametrize("dst", F8)
@pytest.mark.parametrize("src", ["float32", "float64"])
def test_float_edges_to_float8(src, dst):
    e = ember.tensor(EDGE, dtype=getattr(ember, src)).to(getattr(ember, dst))
    t = torch.tensor(EDGE, dtype=getattr(torch, src)).to(getattr(torch, dst))
    np.testing.assert_array_equal(_bits(ember, e), _bits(torch, t))


@pytest.mark.parametrize("dst", F8)
@pytest.mark.parametrize("src", ["float16", "bfloat16"])
def test_every_half_value_to_float8(src, dst):
    # all 65536 bit patterns of the 16-bit source
    raw = np.arange(65536, dtype=np.uint16).view(np.int16)
    e = ember.tensor(raw).view(getattr(ember, src)).to(getattr(ember, dst))
    t = torch.tensor(raw).view(getattr(torch, src)).to(getattr(torch, dst))
    np.testing.assert_array_equal(_bits(ember, e), _bits(torch, t))


@pytest.mark.parametrize("src", F8)
@pytest.mark.parametrize("dst", ["float32", "float16", "bfloat16", "int64", "int32", "int8",
                                 "uint8", "bool", "float8_e4m3fn", "float8_e5m2"])
def test_every_float8_value_out(src, dst):
    raw = np.arange(256, dtype=np.uint8)
    e = ember.tensor(raw).view(getattr(ember, src)).to(getattr(ember, dst))
    t = torch.tensor(raw).view(getattr(torch, src)).to(getattr(torch, dst))
    np.testing.assert_array_equal(_plain(ember, e), _plain(torch, t))


def _plain(t, x):
    if x.dtype in (t.float8_e4m3fn, t.float8_e5m2):
        return _bits(t, x)
    return x.float().numpy() if x.dtype == t.bfloat16 else x.numpy()


@pytest.mark.parametrize("dst", F8)
def test_integers_and_entry_points(dst):
    vals = [1, 300, 448, 500, 1000, 60000, 70000, -1000]
    out = []
    for t in (ember, torch):
        d = getattr(t, dst)
        x = t.zeros(3, dtype=d)
        x.copy_(t.tensor([1000.0, -1e9, float("inf")]))
        y = t.zeros(3, dtype=d)
        y[1] = 1000.0
        out.append([t.tensor(vals).to(d), t.tensor([1000.0, -1e9, float("inf")], dtype=d), x, y,
                    t.tensor(vals, dtype=t.int32).to(d)])
    for a, b in zip(*out):
        np.testing.assert_array_equal(_bits(ember, a), _bits(torch, b))


@pytest.mark.parametrize("dst", F8)
@pytest.mark.parametrize("value", [448.0, 449.0, -448.5, 1000.0, 57344.0, 57345.0, 61440.0,
                                   1e5, float("inf"), float("-inf"), float("nan")])
@pytest.mark.parametrize("n", [1, 3])
def test_fill_and_full(dst, value, n):
    # PyTorch checks the scalar for overflow when filling more than one element; one element
    # takes the saturating conversion
    res = []
    for t in (ember, torch):
        d = getattr(t, dst)
        r = []
        for kind in ("fill_", "full"):
            try:
                x = t.zeros(n, dtype=d).fill_(value) if kind == "fill_" else t.full(
                    (n,), value, dtype=d)
                r.append(_bits(t, x).tolist())
            except RuntimeError as e:
                r.append(str(e))
        res.append(r)
    assert res[0] == res[1]
