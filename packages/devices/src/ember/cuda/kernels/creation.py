"""GPU kernels for the factories: empty/zeros/ones/full (and their *_like forms), arange,
linspace, logspace, eye. The op's meta gives shape and dtype (PyTorch's defaults), then one fill
or one kernel writes the values."""
from __future__ import annotations

import math
import struct

from ember._ops.registry import Generator, Tensor
from ember._ops.registry import dtypes as D

from .base import _ACC, _launch, _lazy, _view, be_dtypes, cuda_kernel
from .pointwise import Unsupported


def _factory_out(be, op, args):
    """(meta, device) of a factory call on cuda, or None (elsewhere: the CPU path)."""
    from ember._ops.registry import device as Device
    d = args[op.device_idx]
    dev = Device(d) if d is not None else None
    if dev is None or dev.type != "cuda":
        return None
    m = _meta_of(op, args)
    if m.dtype not in be_dtypes():
        return None
    return m, dev


@cuda_kernel("eye")
def _eye(be, op, *args):
    r = _factory_out(be, op, args)
    if r is None:
        return NotImplemented
    m, dev = r
    out = be._new(tuple(m.shape), m.dtype, dev)
    if out.numel():
        be.fill_(out, 0)
        n = min(out.shape)
        be.fill_(_view(out, (n,), (out._stride[0] + out._stride[1],), 0), 1)
    if m.requires_grad:
        out.requires_grad_(True)
    return out


def _bits(v: float) -> int:
    return struct.unpack("<q", struct.pack("<d", float(v)))[0]


def _space(log):
    def f(be, op, *args):
        from ember._ops.registry import scalar_value
        start, end, steps = args[0], args[1], args[2]
        if steps < 0:
            raise RuntimeError("linspace(): number of steps must be non-negative")
        base = float(args[3]) if log else 0.0
        if log and not base > 0:
            return NotImplemented  # negative bases: integer powers only (numpy's power)
        if isinstance(start, Tensor) or isinstance(end, Tensor):
            return NotImplemented
        r = _factory_out(be, op, args)
        if r is None:
            return NotImplemented
        m, dev = r
        out = be._new(tuple(m.shape), m.dtype, dev)
        n = out.numel()
        if n:
            s, e = float(scalar_value(start)), float(scalar_value(end))
            if isinstance(s, complex) or isinstance(e, complex):
                return NotImplemented
            step = (e - s) / (n - 1) if n > 1 else 0.0
            K = _lazy("creation_tl")
            _launch(be, K.space_fill, (-(-n // 1024),),
                           [out, n, _bits(s), _bits(e), _bits(step),
                            _bits(math.log(base) if log else 0.0)], (),
                           {"LOG": log, "HALF": m.dtype in (D.float16, D.bfloat16),
                            "BLOCK": 1024})
        if m.requires_grad:
            out.requires_grad_(True)
        return out
    return f


cuda_kernel("linspace")(_space(False))
cuda_kernel("logspace")(_space(True))


# ---- factories: the op's meta gives shape and dtype (PyTorch's defaults), then one fill ----
def _meta_of(op, args, tensor_idx=None):
    from ember._ops.registry import execute
    a = list(args)
    a[op.device_idx] = "meta"
    if tensor_idx is not None:
        x = a[tensor_idx]
        a[tensor_idx] = Tensor._empty(tuple(x.shape), x.dtype, x.device.__class__("meta"))
    return execute(op, tuple(a))


def factory_output(be, op, args, like):
    """(new cuda tensor, requires_grad) for a factory call (like: a *_like op), shaped and typed
    by the op's meta; None when the call is not for cuda. The meta call (shape, dtype, errors)
    runs once per distinct call: factories are frequent (zero grads, new_zeros in backward)."""
    from ember._ops.registry import device as Device
    d = args[op.device_idx]
    if like:
        dev = args[0].device if d is None else Device(d)
    else:
        dev = Device(d) if d is not None else None
    if dev is None or dev.type != "cuda":
        return None
    try:
        key = (op, D.get_default_dtype(), *(
            (a._shape, a.dtype) if isinstance(a, Tensor) else
            tuple(a) if isinstance(a, list) else
            a.__class__ if isinstance(a, Generator) else (a.__class__, a) for a in args))
        m = _FACTORY_META.get(key)
    except TypeError:  # unhashable arguments
        key = m = None
    if m is None:
        r = _meta_of(op, args, 0 if like else None)
        m = (tuple(r.shape), r.dtype, r.requires_grad)
        if key is not None and len(_FACTORY_META) < 4096:
            _FACTORY_META[key] = m
    return be._new(m[0], m[1], dev), m[2]


def _factory(fill, like=False):
    def f(be, op, *args):
        r = factory_output(be, op, args, like)
        if r is None:
            return NotImplemented
        t, rg = r
        value = args[1] if fill == "arg" else fill
        try:
            if value is not None:
                be.fill_(t, value)
        except Unsupported:
            return NotImplemented
        if rg:
            t.requires_grad_(True)
        return t
    return f


_FACTORY_META: dict = {}


@cuda_kernel("arange")
def _arange(be, op, *args):
    """arange with integer start/step on the GPU (one kernel); anything else on the host."""
    from ember._ops.registry import device as Device
    d = args[op.device_idx]
    dev = Device(d) if d is not None else None
    if dev is None or dev.type != "cuda":
        return NotImplemented
    s, e, st = args[0], args[1], args[2]
    if e is None:
        s, e = 0, s
    if not all(v.__class__ is int for v in (s, st)):
        return NotImplemented
    m = _meta_of(op, args)
    if m.dtype not in _ACC or abs(s) >= 2**31 or abs(st) >= 2**31:
        return NotImplemented
    t = be._new(tuple(m.shape), m.dtype, dev)
    n = t.numel()
    if n:
        K = _lazy("creation_tl")
        _launch(be, K.arange_fill, (-(-n // 1024),), [t, n, s, st], (),
                {"HALF": m.dtype in (D.float16, D.bfloat16), "BLOCK": 1024})
    if m.requires_grad:
        t.requires_grad_(True)
    return t


cuda_kernel("empty")(_factory(None))
cuda_kernel("zeros")(_factory(0))
cuda_kernel("ones")(_factory(1))
cuda_kernel("full")(_factory("arg"))
cuda_kernel("empty_like")(_factory(None, True))
cuda_kernel("zeros_like")(_factory(0, True))
cuda_kernel("ones_like")(_factory(1, True))
cuda_kernel("full_like")(_factory("arg", True))
