"""`ember.testing`: `assert_close` (PyTorch's tolerances and messages) and `make_tensor`.

>>> import ember
>>> ember.testing.assert_close(ember.ones(2), ember.ones(2) + 1e-7)
"""
from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor

__all__ = ["assert_close", "make_tensor"]

# (rtol, atol) by dtype, as torch.testing's defaults; integers and bool compare exactly
_TOLS = {D.float16: (1e-3, 1e-5), D.bfloat16: (1.6e-2, 1e-5), D.float32: (1.3e-6, 1e-5),
         D.float64: (1e-7, 1e-7), D.complex64: (1.3e-6, 1e-5), D.complex128: (1e-7, 1e-7),
         D.float8_e4m3fn: (1.25e-1, 1e-5), D.float8_e5m2: (2.5e-1, 1e-5)}


class _Mismatch(Exception):
    """A failed comparison; the message gets the item path appended on the way out."""

    def __init__(self, msg: str, exc_type=AssertionError):
        super().__init__(msg)
        self.exc_type = exc_type


def assert_close(actual, expected, *, allow_subclasses: bool = True, rtol: float | None = None,
                 atol: float | None = None, equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True, check_stride: bool = False,
                 msg=None) -> None:
    """Assert that actual and expected are close: tensors (and numpy arrays), Python numbers,
    and sequences/mappings of them, with PyTorch's per-dtype default tolerances.

    `msg` replaces the message, or (a callable) maps the generated message to a new one.

    >>> import ember
    >>> ember.testing.assert_close([ember.zeros(3), 1.0], [ember.zeros(3), 1.0])
    """
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got "
                         f"no {'atol' if atol is None else 'rtol'}.")
    opts = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device,
                check_dtype=check_dtype, check_stride=check_stride)
    try:
        _compare(actual, expected, opts, "")
    except _Mismatch as e:
        text = str(e)
        if callable(msg):
            text = msg(text)
        elif msg is not None:
            text = msg
        raise e.exc_type(text) from None


def _is_tensor_like(x) -> bool:
    return isinstance(x, (Tensor, np.ndarray))


def _compare(a, e, opts, path):
    try:
        if _is_tensor_like(a) and _is_tensor_like(e):
            return _compare_tensors(_as_tensor(a), _as_tensor(e), opts)
        if _is_number(a) and _is_number(e):
            return _compare_numbers(a, e, opts)
        if isinstance(a, Mapping) and isinstance(e, Mapping):
            if set(a) != set(e):
                raise _Mismatch(f"The keys of the mappings do not match:\nMissing keys in the "
                                f"actual mapping: {sorted(set(e) - set(a), key=str)}\nAdditional "
                                f"keys in the actual mapping: "
                                f"{sorted(set(a) - set(e), key=str)}")
            for k in e:
                _compare(a[k], e[k], opts, f"{path}[{k!r}]")
            return
        if _is_sequence(a) and _is_sequence(e):
            if len(a) != len(e):
                raise _Mismatch(f"The length of the sequences mismatch: {len(a)} != {len(e)}")
            for i, (x, y) in enumerate(zip(a, e)):
                _compare(x, y, opts, f"{path}[{i}]")
            return
    except _Mismatch as m:
        if path and "\n\nThe failure occurred for item" not in str(m):
            raise _Mismatch(f"{m}\n\nThe failure occurred for item {path}", m.exc_type) from None
        raise
    raise _Mismatch(f"No comparison pair was able to handle inputs of type {_tname(a)} and "
                    f"{_tname(e)}.", TypeError)


def _tname(x) -> str:
    return "<class 'ember.Tensor'>" if isinstance(x, Tensor) else str(type(x))


def _is_number(x) -> bool:
    return isinstance(x, (numbers.Number, np.number, np.bool_)) and not isinstance(x, Tensor)


def _is_sequence(x) -> bool:
    return isinstance(x, Sequence) and not isinstance(x, str)


def _as_tensor(x) -> Tensor:
    if isinstance(x, Tensor):
        return x
    from .._creation_api import from_numpy
    return from_numpy(np.ascontiguousarray(x))


def _tolerances(dtypes, rtol, atol):
    if rtol is not None:
        return rtol, atol
    tols = [_TOLS.get(d, (0.0, 0.0)) for d in dtypes]
    return max(t[0] for t in tols), max(t[1] for t in tols)


def _compare_tensors(a: Tensor, e: Tensor, opts):
    if tuple(a.shape) != tuple(e.shape):
        raise _Mismatch(f"The values for attribute 'shape' do not match: {a.shape} != "
                        f"{e.shape}.")
    if opts["check_device"] and a.device != e.device:
        raise _Mismatch(f"The values for attribute 'device' do not match: {a.device} != "
                        f"{e.device}.")
    if opts["check_dtype"] and a.dtype != e.dtype:
        raise _Mismatch(f"The values for attribute 'dtype' do not match: {a.dtype} != "
                        f"{e.dtype}.")
    if opts["check_stride"] and tuple(a.stride()) != tuple(e.stride()):
        raise _Mismatch(f"The values for attribute 'stride()' do not match: {a.stride()} != "
                        f"{e.stride()}.")
    if a.device.type == "meta" or e.device.type == "meta":
        return  # no values to compare
    rtol, atol = _tolerances((a.dtype, e.dtype), opts["rtol"], opts["atol"])
    x, y = _values(a), _values(e)
    exact = rtol == 0 and atol == 0   # "not equal" (no tolerances shown), as PyTorch
    ok = _isclose(x, y, rtol, atol, opts["equal_nan"])
    if ok.all():
        return
    if a.ndim == 0:
        raise _Mismatch(_scalar_msg(x.item(), y.item(), rtol, atol, exact))
    raise _Mismatch(_tensor_msg(x, y, ok, rtol, atol, exact))


def _inexact(d) -> bool:
    return d.is_floating_point or d.is_complex


def _values(t: Tensor) -> np.ndarray:
    a = np.asarray(t._host())
    if t.dtype in (D.float8_e4m3fn, D.float8_e5m2):
        return a.astype(np.float32)
    if not _inexact(t.dtype):
        return a.astype(np.int64)  # as PyTorch: differences of integers without overflow
    return a


def _isclose(x, y, rtol, atol, equal_nan):
    """`ember.isclose` of two host arrays in one dtype (low-precision floats judged in float32,
    as PyTorch's verdict), as a numpy bool array."""
    from .._api import isclose
    from .._creation_api import from_numpy
    dt = np.float32 if x.dtype in _LOWP_NP or y.dtype in _LOWP_NP else np.result_type(x, y)
    ok = isclose(from_numpy(np.ascontiguousarray(x, dt)), from_numpy(np.ascontiguousarray(y, dt)),
                 rtol, atol, equal_nan)
    return np.asarray(ok._host())


_LOWP_NP = (np.dtype(np.float16), D.bfloat16.np)


def _num(v) -> str:
    if getattr(v, "dtype", None) in _LOWP_NP:
        return repr(float(v))
    return repr(v.item() if hasattr(v, "item") else v)


def _tensor_msg(x, y, ok, rtol, atol, exact) -> str:
    n, bad = ok.size, int((~ok).sum())
    with np.errstate(all="ignore"):
        diff = np.abs(x - y)
        if not np.issubdtype(x.dtype, np.inexact):  # integer division: the default float
            rel = (diff / np.abs(y)).astype(np.float32)   # dtype, as in PyTorch
        else:
            rel = diff / np.abs(y)
    diff = np.where(ok, 0, diff).reshape(-1)
    rel = np.where(ok, 0, rel).reshape(-1)
    ia, ir = _argmax_nan(diff), _argmax_nan(rel)
    kind = "equal" if exact else "close"
    lines = [f"Tensor-likes are not {kind}!", "",
             f"Mismatched elements: {bad} / {n} ({bad / n:.1%})",
             f"Greatest absolute difference: {_num(diff[ia])} at index "
             f"{_index(ia, x.shape)}" + ("" if exact else f" (up to {atol} allowed)")]
    lines.append(f"Greatest relative difference: {_num(rel[ir])} at index "
                 f"{_index(ir, x.shape)}" + ("" if exact else f" (up to {rtol} allowed)"))
    return "\n".join(lines)


def _argmax_nan(v) -> int:
    nan = np.isnan(v) if np.issubdtype(v.dtype, np.inexact) else None
    if nan is not None and nan.any():
        return int(np.argmax(nan))
    return int(np.argmax(v))


def _index(flat: int, shape) -> str:
    return repr(tuple(int(i) for i in np.unravel_index(flat, shape)))


def _scalar_msg(a, e, rtol, atol, exact) -> str:
    diff = abs(a - e)
    rel = diff / abs(e) if e != 0 else (math.inf if diff else 0.0)
    kind = "equal" if exact else "close"
    return "\n".join([f"Scalars are not {kind}!", "", f"Expected {e!r} but got {a!r}.",
                      f"Absolute difference: {diff!r}" + ("" if exact else
                                                          f" (up to {atol} allowed)"),
                      f"Relative difference: {rel!r}" + ("" if exact else
                                                         f" (up to {rtol} allowed)")])


def _py_dtype(v):
    if isinstance(v, (bool, np.bool_)):
        return D.bool
    if isinstance(v, numbers.Integral):
        return D.int64
    if isinstance(v, numbers.Real):
        return D.float64
    return D.complex128


def _compare_numbers(a, e, opts):
    da, de = _py_dtype(a), _py_dtype(e)
    if opts["check_dtype"] and type(a) is not type(e) and not (
            isinstance(a, numbers.Real) and isinstance(e, numbers.Real) and da == de):
        raise _Mismatch(f"The values for attribute 'dtype' do not match: {da} != {de}.")
    rtol, atol = _tolerances((da, de), opts["rtol"], opts["atol"])
    x, y = np.asarray(a), np.asarray(e)
    if _isclose(x, y, rtol, atol, opts["equal_nan"]).all():
        return
    raise _Mismatch(_scalar_msg(a, e, rtol, atol, rtol == 0 and atol == 0))


# ---- make_tensor ---------------------------------------------------------------------------------
_INT_DEFAULTS = {D.bool: (0, 2), D.uint8: (0, 10)}


def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad: bool = False,
                noncontiguous: bool = False, exclude_zero: bool = False,
                memory_format=None) -> Tensor:
    """A tensor of the given shape filled with values uniform in [low, high) (defaults by dtype:
    floats [-9, 9], ints [-9, 10), uint8 [0, 10), bool [0, 2)), drawn from ember's default
    generator.

    >>> import ember
    >>> x = ember.testing.make_tensor(2, 3, dtype=ember.float32, device="cpu", low=0, high=1)
    >>> bool((x >= 0).all() and (x <= 1).all())
    True
    """
    import ember

    from .._ops.creation import to_dtype
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = tuple(shape[0])
    dt = to_dtype(dtype)
    g = ember.default_generator.np
    if dt == D.bool:
        arr = g.integers(0, 2, shape).astype(bool)
    elif not _inexact(dt):
        info = np.iinfo(dt.np)
        lo, hi = _bounds(low, high, *_INT_DEFAULTS.get(dt, (-9, 10)), info.min, info.max)
        arr = g.integers(math.ceil(lo), math.ceil(hi), shape, dtype=np.int64).astype(dt.np)
    else:
        fin = np.finfo(np.float32 if dt in (D.float16, D.bfloat16) else dt.to_real().np)
        lo, hi = _bounds(low, high, -9, 9, float(fin.min), float(fin.max), floating=True)
        part = (lambda: g.uniform(lo, hi, shape)) if lo != hi else (lambda: np.full(shape, lo))
        arr = part() + 1j * part() if dt.is_complex else part()
    t = ember.tensor(np.asarray(arr), dtype=dt)
    if exclude_zero:
        tiny = 1 if not _inexact(dt) else float(np.finfo(
            np.float32 if dt in (D.float16, D.bfloat16) else dt.to_real().np).tiny)
        t = ember.where(t == 0, ember.full((), tiny, dtype=dt), t) if dt != D.bool else \
            ember.ones_like(t)
    if noncontiguous and t.numel() > 1:  # every other element of a tensor twice as wide
        wide = ember.stack([t, t], -1).reshape(tuple(shape[:-1]) + (2 * shape[-1],))
        t = wide[..., ::2]
    if device is not None and str(device) != "cpu":
        t = t.to(device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _bounds(low, high, dlo, dhi, lowest, highest, floating=False):
    lo = dlo if low is None else low
    hi = dhi if high is None else high
    if lo != lo or hi != hi:
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={lo} and high={hi}")
    if floating and lo == hi:
        warnings.warn("Passing `low==high` to `ember.testing.make_tensor` for floating or "
                      "complex types is deprecated. Use `ember.full(...)` instead.",
                      FutureWarning, stacklevel=3)
    elif lo >= hi:
        raise ValueError(f"`low` must be less than `high`, but got {lo} >= {hi}")
    return max(lo, lowest), min(hi, highest)
