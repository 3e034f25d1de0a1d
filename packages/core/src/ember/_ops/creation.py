"""Factory ops: empty/zeros/ones/full(+_like), arange, linspace, logspace, eye.

CPU kernels build numpy arrays; on other devices the dispatcher builds on the CPU and copies
(`factory` tag) unless the backend registers its own kernel; on meta only the meta runs.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from .. import _dtype as D
from .._dispatch import TensorMeta
from ._registry import defop

__all__ = ["to_dtype"]

_FACTORY_KW = ("ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
               "bool? pin_memory=False, bool requires_grad=False")
_PY_TYPES = {builtins.float: D.float64, builtins.int: D.int64, builtins.bool: D.bool,
             builtins.complex: D.complex128}


def to_dtype(d, default=None):
    """Normalize a dtype argument: ember dtype, Python type, numpy dtype, or None (default)."""
    if d is None:
        return default if default is not None else D.get_default_dtype()
    if isinstance(d, D.dtype):
        return d
    if d in _PY_TYPES:
        return _PY_TYPES[d]
    if isinstance(d, str) and d in D._BY_NAME:
        return D._BY_NAME[d]
    try:
        return D.from_numpy_dtype(d)
    except TypeError:
        raise TypeError(f"dtype must be ember.dtype, not {type(d).__name__}") from None


def _shape(size, op):
    out = tuple(size)
    for s in out:
        if isinstance(s, int) and s < 0:
            raise RuntimeError(f"{op}(): Trying to create tensor with negative dimension {s}: "
                               f"{list(out)}")
    return out


def _meta_fill(size, *rest, dtype=None):
    return TensorMeta(_shape(size, "empty"), to_dtype(dtype))


def _fill_factory(name, fill):
    def kernel(size, dtype, layout, device, pin_memory, requires_grad):
        return fill(_shape(size, name), to_dtype(dtype).np)

    def meta(size, dtype, layout, device, pin_memory, requires_grad):
        return TensorMeta(_shape(size, name), to_dtype(dtype))
    defop(f"{name}(SymInt[] size, *, {_FACTORY_KW}) -> Tensor", method=False,
          kernels={"cpu": kernel}, meta=meta, tags={"factory"})


_fill_factory("empty", np.empty)
_fill_factory("zeros", np.zeros)
_fill_factory("ones", np.ones)


def _full_dtype(fill_value, dtype):
    if dtype is not None:
        return to_dtype(dtype)
    if hasattr(fill_value, "dtype") and isinstance(fill_value.dtype, D.dtype):
        return fill_value.dtype
    return D.scalar_dtype(fill_value)


defop(f"full(SymInt[] size, Scalar fill_value, *, {_FACTORY_KW}) -> Tensor", method=False,
      tags={"factory"},
      kernels={"cpu": lambda size, v, dtype, *_: _full(_shape(size, "full"), v,
                                                       _full_dtype(v, dtype))},
      meta=lambda size, v, dtype, *_: TensorMeta(_shape(size, "full"), _full_dtype(v, dtype)))


def _full(shape, v, dt):
    if dt in D._FLOAT8:  # PyTorch's float8 fill (saturated, or an overflow error)
        from .memory import _fill
        return _fill(np.empty(shape, dt.np), v)
    return np.full(shape, _scalar(v), dt.np)


def _scalar(v):
    return v.item() if hasattr(v, "item") else v


def _like(name, fill):
    def kernel(x, dtype, layout, device, pin_memory, requires_grad, memory_format):
        return fill(x.shape, to_dtype(dtype, D.from_numpy_dtype(x.dtype)).np)
    defop(f"{name}_like(Tensor self, *, {_FACTORY_KW}, MemoryFormat? memory_format=None) -> "
          "Tensor", method=False, kernels={"cpu": kernel}, differentiable=(),
          meta=lambda x, dtype, *_: TensorMeta(x.shape, to_dtype(dtype, x.dtype)))


_like("empty", np.empty)
_like("zeros", np.zeros)
_like("ones", np.ones)
defop(f"full_like(Tensor self, Scalar fill_value, *, {_FACTORY_KW}, "
      "MemoryFormat? memory_format=None) -> Tensor", method=False, differentiable=(),
      kernels={"cpu": lambda x, v, dtype, *_: np.full(
          x.shape, _scalar(v), to_dtype(dtype, D.from_numpy_dtype(x.dtype)).np)},
      meta=lambda x, v, dtype, *_: TensorMeta(x.shape, to_dtype(dtype, x.dtype)))


def _arange_args(start, end, step):
    if end is None:
        start, end = 0, start
    start, end, step = _scalar(start), _scalar(end), _scalar(step)
    for v in (start, end, step):  # what PyTorch's argument parser refuses
        if isinstance(v, int) and v >= 2**64:
            raise OverflowError("int too big to convert")
        if isinstance(v, int) and v < -2**63:
            raise OverflowError("can't convert negative int to unsigned")
    return start, end, step


def _no_float8(dt, kernel):
    if dt in D._FLOAT8:  # (PyTorch's CPU kernels have no float8 ranges)
        from .._dispatch import torch_name
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{torch_name(dt)}'")
    return dt


def _arange_dtype(start, end, step, dtype):
    if dtype is not None:
        return _no_float8(to_dtype(dtype), "arange_cpu")
    vals = (start, end, step)
    if any(isinstance(v, float) or (hasattr(v, "dtype") and v.dtype.is_floating_point)
           for v in vals):
        return D.get_default_dtype()
    return D.int64


def _wrap64(v: int) -> int:
    return (v + 2**63) % 2**64 - 2**63


def _arange_len(start, end, step, dtype):
    if step == 0:
        raise RuntimeError("step must be nonzero")
    # PyTorch's range checks, on concrete numbers (symbolic sizes skip them)
    plain = all(isinstance(v, (int, float, np.integer, np.floating)) for v in (start, end, step))
    if plain and dtype is D.int64 and any(isinstance(v, (int, np.integer)) and v >= 2**63
                                          for v in (start, end, step)):
        raise RuntimeError("value cannot be converted to type int64_t without overflow")
    if plain and not (math.isfinite(start) and math.isfinite(end)):
        raise RuntimeError(f"unsupported range: {start:g} -> {end:g}")
    if (end - start) / step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if not plain:
        return max(0, math.ceil((end - start) / step))
    if dtype is D.int64:
        # PyTorch counts int64 ranges in int64 arithmetic: ceil((end - start + step - sign) /
        # step), wrapping on overflow, and refuses a count that comes out negative
        a, b, c = int(start), int(end), int(step)
        num = _wrap64(_wrap64(_wrap64(b - a) + c) - (1 if c > 0 else -1))
        n = abs(num) // abs(c) * (1 if (num < 0) == (c < 0) else -1)  # C's division
    else:
        n = math.ceil((end - start) / step)
    if n < 0 or n > 2**63 - 1:
        raise RuntimeError("invalid size, possible overflow?")
    return n


def _arange_kernel(start, end, step, dtype, *_):
    start, end, step = _arange_args(start, end, step)
    dt = _arange_dtype(start, end, step, dtype)
    n = _arange_len(start, end, step, dt)
    if dt.is_floating_point:
        return (start + np.arange(n, dtype=np.float64) * step).astype(dt.np)
    return (np.arange(n, dtype=np.int64) * int(step) + int(start)).astype(dt.np)


def _arange_meta(start, end, step, dtype, *_):
    start, end, step = _arange_args(start, end, step)
    dt = _arange_dtype(start, end, step, dtype)
    return TensorMeta((_arange_len(start, end, step, dt),), dt)


defop(f"arange(Scalar start, Scalar? end=None, Scalar step=1, *, {_FACTORY_KW}) -> Tensor",
      method=False, tags={"factory"}, kernels={"cpu": _arange_kernel}, meta=_arange_meta)


def _linspace_kernel(start, end, steps, dtype, *_):
    if steps < 0:
        raise RuntimeError("linspace(): number of steps must be non-negative")
    dt = _no_float8(to_dtype(dtype), "linspace_cpu")
    return np.linspace(_scalar(start), _scalar(end), steps, dtype=np.float64).astype(dt.np)


defop(f"linspace(Scalar start, Scalar end, int steps, *, {_FACTORY_KW}) -> Tensor",
      method=False, tags={"factory"}, kernels={"cpu": _linspace_kernel},
      meta=lambda s, e, n, dtype, *_: TensorMeta((n,), _no_float8(to_dtype(dtype),
                                                                 "linspace_cpu")))


def _logspace_kernel(start, end, steps, base, dtype, *_):
    dt = to_dtype(dtype)
    e = np.linspace(_scalar(start), _scalar(end), steps, dtype=np.float64)
    return np.power(float(base), e).astype(dt.np)


defop(f"logspace(Scalar start, Scalar end, int steps, float base=10.0, *, {_FACTORY_KW}) -> "
      "Tensor", method=False, tags={"factory"}, kernels={"cpu": _logspace_kernel},
      meta=lambda s, e, n, b, dtype, *_: TensorMeta((n,), to_dtype(dtype)))


def _eye_kernel(n, m, dtype, *_):
    return np.eye(n, n if m is None else m, dtype=to_dtype(dtype).np)


defop(f"eye(SymInt n, SymInt? m=None, *, {_FACTORY_KW}) -> Tensor", method=False,
      tags={"factory"}, kernels={"cpu": _eye_kernel},
      meta=lambda n, m, dtype, *_: TensorMeta((n, n if m is None else m), to_dtype(dtype)))
