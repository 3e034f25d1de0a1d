"""Fused optimizer updates for ember.optim (Adam/AdamW, SGD with momentum) on CUDA tensors.

ember.optim asks the parameter's backend for `fused_optim(kind, tensors, hyper)` and takes the
op-by-op path when it answers False: here when the tensors are not all contiguous, of one
float32/float16/bfloat16 dtype, on one device (float64 keeps the exact op-by-op path).
"""
from __future__ import annotations

from ember._ops.registry import Tensor
from ember._ops.registry import dtypes as D

from ..runtime import driver as rt

_OK = (D.float32, D.float16, D.bfloat16)
_BLOCK = 1024


def _same(ts) -> bool:
    p = ts[0]
    d, dev, shape = p.dtype, p.device, p._shape
    if d not in _OK:
        return False
    for i, t in enumerate(ts):
        if (not isinstance(t, Tensor) or t.dtype is not d or t.device != dev
                or t._shape != shape or (i != 1 and not t.is_contiguous())):
            return False
    return True


_mods: list = []


def fused_optim(be, kind, tensors, hyper) -> bool:
    if not _same(tensors):
        return False
    g = tensors[1]
    if not g.is_contiguous():  # linear's weight grad is a transposed view: one copy kernel
        tensors = (tensors[0], be._copy_new(g, g.dtype)) + tuple(tensors[2:])
    if not _mods:  # the kernels import triton: on first use, then a list lookup
        from . import optim_tl
        from .base import _launch
        _mods[:] = [optim_tl, _launch]
    K, _launch = _mods
    n = tensors[0].numel()
    if n == 0:
        return True
    rt.ensure_context(tensors[0].device.index or 0)
    grid = (-(-n // _BLOCK),)
    if kind == "adam":
        lr, beta1, beta2, eps, wd, decoupled, maximize, step = hyper
        bc1 = 1 - beta1 ** step
        bc2_sqrt = (1 - beta2 ** step) ** 0.5
        mode = 0 if wd == 0 else (1 if decoupled else 2)
        _launch(be, K.adam_step, grid,
                [*tensors, n, float(1 - lr * wd), float(beta1), float(beta2), float(eps),
                 float(lr / bc1), float(bc2_sqrt), float(wd)], (),
                {"MAXIMIZE": bool(maximize), "WD": mode, "BLOCK": _BLOCK})
    elif kind == "sgd":
        lr, momentum, dampening, wd, nesterov, maximize = hyper
        _launch(be, K.sgd_step, grid,
                [*tensors, n, float(lr), float(momentum), float(dampening), float(wd)], (),
                {"MAXIMIZE": bool(maximize), "HAS_WD": wd != 0, "NESTEROV": bool(nesterov),
                 "BLOCK": _BLOCK})
    else:
        return False
    for i, t in enumerate(tensors):
        if i != 1:  # the gradient is read, not written
            t._bump()
    return True
