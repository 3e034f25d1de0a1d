"""Reference testing against PyTorch: run the same lambda on ember and on torch, compare.

    check(lambda t, x: t.sigmoid(x), shapes=[(45, 65)])

`t` is the module (ember or torch); inputs are made from one numpy RNG so both see the same
values. Compares values, shapes, dtypes and (optionally) strides; with grad=True also the
gradients of a weighted sum of the outputs w.r.t. every floating input (needs ember-autograd).
"""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

FLOATS = ("float32", "float64")
LOWP = ("float16", "bfloat16")
INTS = ("int32", "int64")
ALL = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
       "float64")

TOL = {"float16": (1e-3, 1e-2), "bfloat16": (1e-2, 5e-2), "float32": (1.3e-6, 1e-5),
       "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7)}


def make_array(shape, dtype: str, rng, low=None, high=None):
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype in ("uint8", "int8", "int16", "int32", "int64"):
        lo = 0 if dtype == "uint8" else -9
        return rng.integers(lo if low is None else low, 10 if high is None else high,
                            size=shape).astype(dtype)
    lo, hi = (-3.0 if low is None else low), (3.0 if high is None else high)
    a = rng.uniform(lo, hi, size=shape)
    return a.astype("float32" if dtype in ("float16", "bfloat16") else dtype)


def to_torch(a, dtype):
    t = torch.from_numpy(np.array(a, order="C"))  # ascontiguousarray would make 0-d 1-d
    return t.to(getattr(torch, dtype))


def to_ember(a, dtype):
    return ember.tensor(np.array(a, order="C")).to(getattr(ember, dtype))


def as_numpy(x):
    """ember or torch tensor (or scalar) -> numpy, upcasting low-precision floats."""
    if hasattr(x, "detach"):
        x = x.detach()
        if hasattr(x, "resolve_conj"):  # torch's lazy conj (fft.ihfft, conj views)
            x = x.resolve_conj()
        if str(x.dtype).endswith(("bfloat16", "float16")):
            x = x.float()
        return np.asarray(x.cpu().numpy())
    return np.asarray(x)


def same_dtype(e, t) -> bool:
    return str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]


def compare(e, t, dtype="float32", rtol=None, atol=None, check_stride=False, path="out"):
    """Compare an ember result with torch's (tensors, tuples, scalars) recursively."""
    if isinstance(t, (tuple, list)):
        assert isinstance(e, (tuple, list)), f"{path}: expected a sequence, got {type(e)}"
        assert len(e) == len(t), f"{path}: length {len(e)} != {len(t)}"
        for i, (a, b) in enumerate(zip(e, t)):
            compare(a, b, dtype, rtol, atol, check_stride, f"{path}[{i}]")
        return
    if isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), f"{path}: expected Tensor, got {type(e)}"
        assert tuple(e.shape) == tuple(t.shape), f"{path}: shape {tuple(e.shape)} != " \
                                                 f"{tuple(t.shape)}"
        assert same_dtype(e, t), f"{path}: dtype {e.dtype} != {t.dtype}"
        if check_stride:
            assert tuple(e.stride()) == tuple(t.stride()), \
                f"{path}: stride {e.stride()} != {t.stride()}"
        dt = str(t.dtype).split(".")[-1]
        r, a = TOL.get(dt, (0, 0))
        np.testing.assert_allclose(as_numpy(e), as_numpy(t), rtol=rtol if rtol is not None else r,
                                   atol=atol if atol is not None else a, equal_nan=True,
                                   err_msg=path)
        return
    if isinstance(t, (bool, int, float, complex)):
        if isinstance(e, ember.Tensor):
            e = e.item()
        np.testing.assert_allclose(e, t, rtol=1e-6, err_msg=path)
        return
    assert e == t, f"{path}: {e!r} != {t!r}"


def check(fn, shapes=((3, 4),), dtypes=FLOATS, low=None, high=None, grad=False, rtol=None,
          atol=None, check_stride=False, seed=0, args=None):
    """Run fn(module, *inputs) on ember and torch for each dtype and compare (and gradients)."""
    for dtype in dtypes:
        rng = np.random.default_rng(seed)
        arrays = args if args is not None else [make_array(s, dtype, rng, low, high)
                                                for s in shapes]
        ein = [to_ember(a, dtype) if isinstance(a, np.ndarray) else a for a in arrays]
        tin = [to_torch(a, dtype) if isinstance(a, np.ndarray) else a for a in arrays]
        want_grad = grad and dtype in ("float32", "float64")
        if want_grad:
            for x in ein + tin:
                if hasattr(x, "requires_grad_") and x.dtype.is_floating_point:
                    x.requires_grad_(True)
        eo = fn(ember, *ein)
        to = fn(torch, *tin)
        compare(eo, to, dtype, rtol, atol, check_stride)
        if want_grad:
            _compare_grads(eo, to, ein, tin, dtype, rtol, atol, seed)


def _outputs(o):
    return [x for x in (o if isinstance(o, (tuple, list)) else [o])
            if hasattr(x, "requires_grad") and x.requires_grad]


def _compare_grads(eo, to, ein, tin, dtype, rtol, atol, seed):
    rng = np.random.default_rng(seed + 1)
    eouts, touts = _outputs(eo), _outputs(to)
    assert len(eouts) == len(touts), "different number of differentiable outputs"
    if not touts:
        return
    weights = [rng.uniform(-1, 1, size=tuple(t.shape)).astype(dtype) for t in touts]
    el = sum((o * ember.tensor(w)).sum() for o, w in zip(eouts, weights))
    tl = sum((o * torch.from_numpy(w)).sum() for o, w in zip(touts, weights))
    eins = [x for x in ein if getattr(x, "requires_grad", False)]
    tins = [x for x in tin if getattr(x, "requires_grad", False)]
    eg = ember.autograd.grad(el, eins, allow_unused=True)
    tg = torch.autograd.grad(tl, tins, allow_unused=True)
    for i, (a, b) in enumerate(zip(eg, tg)):
        if b is None:
            assert a is None or not as_numpy(a).any(), f"grad[{i}]: torch None, ember {a}"
            continue
        assert a is not None, f"grad[{i}]: ember returned None"
        compare(a, b, dtype, rtol, atol, path=f"grad[{i}]")


def check_error(fn, exc_types=None, match=None):
    """Both ember and torch raise for fn(module); ember's exception is of torch's type."""
    with pytest.raises(Exception) as te:
        fn(torch)
    with pytest.raises(Exception) as ee:
        fn(ember)
    expected = exc_types or type(te.value)
    assert isinstance(ee.value, expected), (
        f"torch raised {type(te.value).__name__}: {te.value}; ember raised "
        f"{type(ee.value).__name__}: {ee.value}")
    if match:
        import re
        assert re.search(match, str(ee.value)), str(ee.value)
