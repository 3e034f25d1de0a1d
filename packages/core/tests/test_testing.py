"""ember.testing against torch.testing: assert_close's verdicts, exception types and messages
(same text with "torch." read as "ember."), and make_tensor's shapes, dtypes, ranges, layout."""
import math

import numpy as np
import pytest

import ember
from ember.testing import assert_close, make_tensor

torch = pytest.importorskip("torch")


def outcome(t, fn):
    """(exception type name, message) of fn(t), or None when it passes."""
    try:
        fn(t)
    except Exception as e:  # noqa: BLE001 - we compare whatever both raise
        return type(e).__name__, str(e).replace("torch.", "ember.")
    return None


CASES = [
    lambda t: t.testing.assert_close(t.tensor([1., 2, 3, 4]), t.tensor([1., 2.5, 3, 4])),
    lambda t: t.testing.assert_close(t.tensor([1, 2, 3]), t.tensor([1, 3, 3])),
    lambda t: t.testing.assert_close(t.tensor([True, False]), t.tensor([True, True])),
    lambda t: t.testing.assert_close(1.0, 1.5),
    lambda t: t.testing.assert_close(1, 2),
    lambda t: t.testing.assert_close(t.tensor(1.), t.tensor(2.)),
    lambda t: t.testing.assert_close(t.ones(2), t.ones(3)),
    lambda t: t.testing.assert_close(t.ones(2), t.ones(2, dtype=t.float64)),
    lambda t: t.testing.assert_close(t.ones(1), t.ones(1, dtype=t.float64), check_dtype=False),
    lambda t: t.testing.assert_close(t.ones(1), t.ones(1, device="meta")),
    lambda t: t.testing.assert_close(t.ones(2), t.ones(2), rtol=1),
    lambda t: t.testing.assert_close(t.ones(2), t.ones(2), atol=1),
    lambda t: t.testing.assert_close(t.tensor([float("nan")]), t.tensor([float("nan")])),
    lambda t: t.testing.assert_close(t.tensor([float("nan")]), t.tensor([float("nan")]),
                                     equal_nan=True),
    lambda t: t.testing.assert_close(t.tensor([1., math.inf]), t.tensor([1., math.inf])),
    lambda t: t.testing.assert_close(t.tensor([1., 2]), t.tensor([1., 3]), msg="boom"),
    lambda t: t.testing.assert_close(t.tensor([1., 2]), t.tensor([1., 3]),
                                     msg=lambda m: "X" + m),
    lambda t: t.testing.assert_close(t.ones(2), [1., 1.]),
    lambda t: t.testing.assert_close(t.tensor(1.), 1.0),
    lambda t: t.testing.assert_close([t.ones(2), t.zeros(1)], [t.ones(2), t.ones(1)]),
    lambda t: t.testing.assert_close({"a": t.ones(1)}, {"a": t.zeros(1)}),
    lambda t: t.testing.assert_close([1, 2], [1, 3]),
    lambda t: t.testing.assert_close([1.], [1., 2.]),
    lambda t: t.testing.assert_close((1.,), [1.]),
    lambda t: t.testing.assert_close(t.ones(2, 2), t.ones(2, 2).t()),
    lambda t: t.testing.assert_close(t.tensor([0.]), t.tensor([1e-6])),
    lambda t: t.testing.assert_close(t.ones(2, 3) * 1.0, t.ones(2, 3) * 1.1),
    lambda t: t.testing.assert_close(t.tensor([1., 2.], dtype=t.float16),
                                     t.tensor([1., 2.001], dtype=t.float16)),
    lambda t: t.testing.assert_close(t.tensor([1., 2.], dtype=t.bfloat16),
                                     t.tensor([1., 2.1], dtype=t.bfloat16)),
    lambda t: t.testing.assert_close(t.tensor([1., 2.], dtype=t.float64),
                                     t.tensor([1., 2 + 1e-9], dtype=t.float64)),
    lambda t: t.testing.assert_close(t.tensor([1., 2.]), t.tensor([1., 2.1]), rtol=0.1,
                                     atol=0.0),
    lambda t: t.testing.assert_close(t.tensor([[1., 5], [3, 4]]), t.tensor([[1., 2], [0, 4]])),
    lambda t: t.testing.assert_close(np.ones(2), np.ones(2)),
    lambda t: t.testing.assert_close(np.ones(2), np.zeros(2)),
    # the verdict is ember.isclose's: an infinite difference is never close, and integers
    # take the tolerances given
    lambda t: t.testing.assert_close(t.tensor([1., 2.]), t.tensor([1., math.inf])),
    lambda t: t.testing.assert_close(t.tensor([1, 2]), t.tensor([2, 2]), rtol=0, atol=1),
    lambda t: t.testing.assert_close(t.tensor([10, 2]), t.tensor([12, 2]), rtol=0.1, atol=0),
    lambda t: t.testing.assert_close(t.tensor([1., 2.], dtype=t.float16), t.tensor([1., 2.]),
                                     check_dtype=False, rtol=0, atol=0),
    lambda t: t.testing.assert_close(t.tensor([1., 2.]), t.tensor([1., 2.5]), rtol=0, atol=0),
    lambda t: t.testing.assert_close(1.0, 1.5, rtol=0, atol=0),
    lambda t: t.testing.assert_close(1, 3, rtol=0, atol=1),
]


@pytest.mark.parametrize("fn", CASES)
def test_assert_close_matches_torch(fn):
    assert outcome(ember, fn) == outcome(torch, fn)


def test_assert_close_error_message_example():
    with pytest.raises(AssertionError) as e:
        assert_close(ember.tensor([1., 2, 3, 4]), ember.tensor([1., 2.5, 3, 4]))
    assert str(e.value).startswith("Tensor-likes are not close!\n\nMismatched elements: 1 / 4 "
                                   "(25.0%)\nGreatest absolute difference: 0.5 at index (1,)")


def test_check_stride():
    a = ember.ones(2, 2)
    assert_close(a, a.t())
    with pytest.raises(AssertionError, match="stride"):
        assert_close(a, a.t().contiguous().t(), check_stride=True)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int32", "int64", "float16",
                                   "bfloat16", "float32", "float64", "complex64"])
def test_make_tensor(dtype):
    dt = getattr(ember, dtype)
    x = make_tensor(3, 4, dtype=dt, device="cpu")
    assert tuple(x.shape) == (3, 4) and x.dtype == dt and x.is_contiguous()
    assert tuple(make_tensor((2, 5), dtype=dt, device="cpu").shape) == (2, 5)
    a = x.numpy() if dtype not in ("bfloat16",) else x.float().numpy()
    if dtype == "bool":
        return
    lo, hi = (0, 10) if dtype == "uint8" else (-9, 10 if "int" in dtype else 9)
    re = a.real if np.iscomplexobj(a) else a
    assert re.min() >= lo and re.max() <= hi
    n = make_tensor(3, 4, dtype=dt, device="cpu", noncontiguous=True)
    assert tuple(n.shape) == (3, 4) and not n.is_contiguous()
    z = make_tensor(50, dtype=dt, device="cpu", low=0, high=2, exclude_zero=True)
    assert (z != 0).all()


def test_make_tensor_options():
    x = make_tensor(4, dtype=ember.float32, device="cpu", low=2, high=3, requires_grad=True)
    a = x.detach().numpy()
    assert x.requires_grad and x.is_leaf and a.min() >= 2 and a.max() <= 3
    i = make_tensor(100, dtype=ember.int8, device="cpu", low=-1000)   # clamped to the dtype
    assert int(i.min()) >= -128
    assert tuple(make_tensor(dtype=ember.float32, device="cpu").shape) == ()
    m = make_tensor(2, dtype=ember.float32, device="meta")
    assert m.is_meta


@pytest.mark.parametrize("kw", [dict(low=2, high=1), dict(low=float("nan")),
                                dict(low=0, high=0, dtype="int64")])
def test_make_tensor_errors(kw):
    kw = dict(kw)
    dtype = kw.pop("dtype", "float32")
    with pytest.raises(ValueError) as te:
        torch.testing.make_tensor(2, dtype=getattr(torch, dtype), device="cpu", **kw)
    with pytest.raises(ValueError) as ee:
        make_tensor(2, dtype=getattr(ember, dtype), device="cpu", **kw)
    assert str(ee.value) == str(te.value)


def test_make_tensor_reproducible():
    ember.manual_seed(0)
    a = make_tensor(5, dtype=ember.float32, device="cpu")
    ember.manual_seed(0)
    assert_close(make_tensor(5, dtype=ember.float32, device="cpu"), a, rtol=0, atol=0)
