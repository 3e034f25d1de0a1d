"""Tensors from Python data: `ember.tensor`, `as_tensor`, `from_numpy`, legacy constructors."""
from __future__ import annotations

import numbers

import numpy as np

from . import _dtype as D
from ._device import _default_factory_device
from ._device import device as Device
from ._tensor import Tensor

__all__ = ["tensor", "as_tensor", "from_numpy", "asarray", "legacy_new"]


def _infer_dtype(data):
    """PyTorch's inference: bool < int64 < default float < complex over nested sequences."""
    best = None
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, Tensor):
            d = x.dtype
        elif isinstance(x, np.ndarray):
            d = D.from_numpy_dtype(x.dtype)
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
            continue
        elif isinstance(x, (bool, np.bool_)):
            d = D.bool
        elif isinstance(x, numbers.Integral):
            d = D.int64
        elif isinstance(x, numbers.Real):
            d = D.get_default_dtype()
        elif isinstance(x, numbers.Complex):
            d = D.get_default_dtype().to_complex()
        else:
            raise TypeError(f"Could not infer dtype of {type(x).__name__}")
        if best is None or d._cat > best._cat or (d._cat == best._cat and d.itemsize >
                                                   best.itemsize and d._cat == 3):
            best = d
    return best or D.get_default_dtype()


def _to_numpy(data, dtype):
    if isinstance(data, Tensor):
        return D.np_cast(data.detach().cpu()._np, dtype)
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in data):
        data = [_to_numpy(x, dtype) for x in data]
    try:
        if dtype in D._FLOAT8:  # PyTorch's float8 conversions (saturating e4m3fn)
            return D.np_cast(np.array(data), dtype)
        return np.array(data, dtype=dtype.np)
    except OverflowError:
        raise RuntimeError(f"value cannot be converted to type {dtype.name} without "
                           "overflow") from None
    except ValueError as e:
        raise ValueError(f"expected sequence of equal-length lists: {e}") from None


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False) -> Tensor:
    """A new tensor copying `data` (nested lists, numbers, numpy arrays, tensors).

    >>> import ember
    >>> ember.tensor([[1, 2], [3, 4]]).dtype
    ember.int64
    """
    from ._ops.creation import to_dtype
    if isinstance(data, np.ndarray) and dtype is None:
        dt = D.from_numpy_dtype(data.dtype)
    else:
        dt = to_dtype(dtype) if dtype is not None else _infer_dtype(data)
    t = Tensor._from_np(np.array(_to_numpy(data, dt), copy=True), dt)
    if device is None:
        device = _default_factory_device()
    if device is not None and Device(device).type != "cpu":
        t = t.to(device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like `tensor`, but shares memory with a numpy array or tensor when it can."""
    from ._ops.creation import to_dtype
    if device is None:
        device = _default_factory_device()
    if isinstance(data, Tensor):
        out = data
        if dtype is not None:
            out = out.to(to_dtype(dtype))
        return out.to(device) if device is not None else out
    if isinstance(data, np.ndarray) and (dtype is None or to_dtype(dtype).np == data.dtype) and (
            device is None or Device(device).type == "cpu"):
        return from_numpy(data)
    return tensor(data, dtype=dtype, device=device)


asarray = as_tensor


def from_numpy(arr: np.ndarray) -> Tensor:
    """A CPU tensor sharing `arr`'s memory (writes through both ways)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    dt = D.from_numpy_dtype(arr.dtype)
    if any(s < 0 for s in arr.strides):
        raise ValueError("At least one stride in the given numpy array is negative, and tensors "
                         "with negative strides are not currently supported. (You can probably "
                         "work around this by making a copy of your array  with array.copy().) ")
    isz = arr.itemsize
    if arr.size == 0:
        return Tensor._from_np(arr.copy(), dt)
    # the storage is a byte view of the memory block arr spans (positive strides only)
    span = sum((n - 1) * s for n, s in zip(arr.shape, arr.strides)) + isz
    flat = np.lib.stride_tricks.as_strided(arr, shape=(span // isz,), strides=(isz,))
    flat = flat.view(np.uint8)
    from ._tensor import Storage
    st = Storage(flat, Device("cpu"), span)
    return Tensor._make(st, arr.shape, tuple(s // isz for s in arr.strides), 0, dt,
                        Device("cpu"), arr)


def legacy_new(cls, args, kwargs, default):
    """`ember.Tensor(2, 3)` (uninitialized), `ember.Tensor([1, 2])`, `ember.FloatTensor(...)`."""
    dtype = kwargs.pop("dtype", default)
    device = kwargs.pop("device", None)
    if kwargs:
        raise TypeError(f"new() received an invalid combination of arguments: {list(kwargs)}")
    if not args:
        t = Tensor._from_np(np.empty((0,), dtype.np), dtype)
    elif all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
        t = Tensor._from_np(np.zeros(tuple(int(a) for a in args), dtype.np), dtype)
    elif len(args) == 1:
        t = tensor(args[0], dtype=dtype)
    else:
        raise TypeError("new() received an invalid combination of arguments")
    return t.to(device) if device is not None else t
