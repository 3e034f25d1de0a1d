"""Copies and fills: clone, copy_, _to_copy (dtype/device casts), fill_, zero_, detach,
contiguous."""
from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._device import device as Device
from .._device import get_backend
from .._dispatch import TensorMeta
from .._size import broadcast_shapes
from . import _cpu_strided
from ._registry import FUNCTIONS, METHODS, defop


def c_copy(x):
    """A C-contiguous copy of the numpy array x (large ones on all threads)."""
    if x.size >= _cpu_strided.MIN_ELEMS:
        out = np.empty(x.shape, x.dtype)
        if _cpu_strided.copy(out, x):
            return out
    return np.array(x, copy=True, order="C")


def _clone(x, memory_format):
    return x.copy()  # numpy keeps the layout of x for order="K" (PyTorch's preserve_format)


defop("clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
      # C order: CPU tensors are contiguous, and a "K"-order copy of a transposed view would be
      # copied a second time to become one
      kernels={"cpu": lambda x, mf: c_copy(x)},
      meta=lambda x, mf: TensorMeta(x.shape, x.dtype), vjp=lambda g, out, x, mf: (g,))


def _copy_meta_check(dst, src):
    if tuple(broadcast_shapes(dst.shape, src.shape)) != tuple(dst.shape):
        raise RuntimeError(f"The size of tensor a ({dst.shape[-1] if dst.shape else 1}) must "
                           f"match the size of tensor b ({src.shape[-1] if src.shape else 1})")


def _copy_any(dst, src, non_blocking=False):
    """copy_ across devices: the destination's backend (or the source's) moves the bytes."""
    _copy_meta_check(dst, src)
    if dst.device.type == "meta":
        return dst
    if src.device.type == "meta":
        raise NotImplementedError("Cannot copy out of meta tensor; no data!")
    if dst.device.type == "cpu":
        a = src._np if src.device.type == "cpu" else get_backend(src.device.type).to_host(src)
        if dst.dtype in D._FLOAT8 or src.dtype in D._FLOAT8:
            a = D.np_cast(a, dst.dtype)  # PyTorch's float8 conversions
        np.copyto(dst._np, a, casting="unsafe")
    else:
        get_backend(dst.device.type).copy_(dst, src, non_blocking)
    return dst


def _copy_kernel(dst, src, non_blocking):
    return _copy_any(dst, src, non_blocking)


defop("copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
      function=False, differentiable=("self", "src"), decomp=_copy_kernel,
      vjp=lambda g, out, self, src, nb: (g.new_zeros(g.shape), g))


def _to_copy_kernel(x, dtype, layout, device, pin_memory, non_blocking, memory_format):
    dt = x.dtype if dtype is None else dtype
    dev = x.device if device is None else Device(device)
    if dev.type == "meta":
        from .._tensor import Tensor
        return Tensor._empty(x.shape, dt, dev)
    if x.device.type == "meta":
        raise NotImplementedError("Cannot copy out of meta tensor; no data!")
    if x.device.type == "cpu" and dev.type == "cpu":
        from .._tensor import Tensor
        return Tensor._from_np(D.np_cast(x._np, dt), dt)
    if x.device.type == "cpu":
        src = x if x.dtype is dt else _to_copy_kernel(x, dt, None, None, False, False, None)
        return get_backend(dev.type).from_tensor(src, dev, non_blocking)
    if dev.type == "cpu":
        from .._tensor import Tensor
        return Tensor._from_np(D.np_cast(get_backend(x.device.type).to_host(x), dt), dt)
    return get_backend(dev.type).to_copy(x, dt, dev, non_blocking)


defop("_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
      "bool? pin_memory=False, bool non_blocking=False, MemoryFormat? memory_format=None) -> "
      "Tensor", function=False, method=False, decomp=_to_copy_kernel,
      meta=lambda x, dtype, *_: TensorMeta(x.shape, dtype or x.dtype),
      vjp=lambda g, out, x, dtype, layout, device, pin, nb, mf: (g,))  # engine casts back


def _fill(x, value):
    v = value.item() if hasattr(value, "item") else value
    dt = D._BY_NP.get(x.dtype)
    if dt in D._FLOAT8:  # PyTorch's float8 fill: checked beyond one element, else saturated
        if x.size > 1 and D.float8_fill_overflows(v, dt):
            name = "Float8_e4m3fn" if dt is D.float8_e4m3fn else "Float8_e5m2"
            raise RuntimeError(f"value cannot be converted to type c10::{name} without overflow")
        v = D.np_cast(np.asarray(v, np.float64), dt)
    x[...] = v
    return x


defop("fill_(Tensor(a!) self, Scalar value) -> Tensor(a!)", kernels={"cpu": _fill},
      function=False, differentiable=("self",), meta=lambda x, v: TensorMeta(x.shape, x.dtype),
      vjp=lambda g, out, self, value: (g.new_zeros(g.shape),))
defop("zero_(Tensor(a!) self) -> Tensor(a!)", function=False, differentiable=("self",),
      kernels={"cpu": lambda x: _fill(x, 0)}, meta=lambda x: TensorMeta(x.shape, x.dtype),
      vjp=lambda g, out, self: (g.new_zeros(g.shape),))


def _detach_view(x):
    return x._shape, x._stride, x._offset


defop("detach(Tensor self) -> Tensor", view=_detach_view, differentiable=(), tags={"view"})


def _no_view(fn):
    """detach() shares storage but is no view of its input (PyTorch: `_is_view()` is False) and
    needs no grad; autograd does the same when it records the call under grad mode."""
    def detach(*args, **kwargs):
        t = fn(*args, **kwargs)
        t._base = None
        t._requires_grad = False
        return t
    detach.__name__ = detach.__qualname__ = fn.__name__
    detach.__doc__ = fn.__doc__
    return detach


FUNCTIONS["detach"], METHODS["detach"] = _no_view(FUNCTIONS["detach"]), _no_view(METHODS["detach"])
defop("alias(Tensor self) -> Tensor", view=_detach_view, method=False, tags={"view"},
      vjp=lambda g, out, x: (g,))
defop("contiguous(Tensor self, *, MemoryFormat memory_format=contiguous_format) -> Tensor",
      function=False, decomp=lambda x, mf: x if x.is_contiguous() else x.clone())
