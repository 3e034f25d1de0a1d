"""Plain pickling of tensors (`pickle.dumps(t)`, multiprocessing): bytes + metadata."""
from __future__ import annotations

import numpy as np

from . import _dtype as D

__all__ = ["reduce_tensor", "rebuild_tensor"]


def reduce_tensor(t):
    if t.device.type == "meta":
        return (_rebuild_meta, (tuple(t.shape), t.dtype.name))
    data = np.ascontiguousarray(t.detach()._host())
    return (rebuild_tensor, (data.tobytes(), tuple(t.shape), t.dtype.name, t.requires_grad,
                             str(t.device)))


def rebuild_tensor(raw: bytes, shape, dtype_name: str, requires_grad: bool, device="cpu"):
    from ._tensor import Tensor
    dt = D._BY_NAME[dtype_name]
    arr = np.frombuffer(bytearray(raw), dt.np).reshape(shape)
    t = Tensor._from_np(arr, dt)
    if device != "cpu":
        t = t.to(device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_meta(shape, dtype_name):
    from ._device import device
    from ._tensor import Tensor
    return Tensor._empty(shape, D._BY_NAME[dtype_name], device("meta"))
