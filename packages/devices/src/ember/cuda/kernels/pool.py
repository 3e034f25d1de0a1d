"""GPU kernels for pooling: max, average and adaptive pools (1-D, 2-D, 3-D; forward and
backward), the pool index gather/scatter and max_unpool.

`cuda_kernel` fills the op entries' cuda slots with kernels `f(backend, op, *args)`
(NotImplemented declines a call). HOST lists the ops of this family that still run their CPU
kernel on host copies, with the reason (test_cuda_opdb.py holds the backend to it). A kernel
for an op with a decomposition in core runs instead of the composition.

The kernels (pool_tl) take contiguous inputs: pools are one output per lane over a
(planes, D, H, W) view, so 1-D, 2-D and 3-D share them; backward passes scatter with float32
(float64) atomics.
"""
from __future__ import annotations

import math

from ember._ops.registry import dtypes as D

from .base import _ACC, _FLOAT, _acc_dt, _acc_tl, _cont, _launch, _lazy, cuda_kernel
from .indexing import _INTS, _gather, _in_range, _index_kernel, _minmax, _ok_dtype, _raise, _scatter


# ---- pooling ------------------------------------------------------------------------------------
def _dhw(shape, n):
    """(planes, (D, H, W)) of the last n dims of shape, padded with leading 1s to three."""
    sp = (1,) * (3 - n) + tuple(shape[len(shape) - n:])
    return math.prod(shape[:len(shape) - n]), sp


def _pad3(v, n, fill):
    return (fill,) * (3 - n) + tuple(v)


def _max_pool(n):
    def f(be, op, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        from ember._ops.registry import pool_args
        if x.dtype not in _FLOAT:
            return NotImplemented
        y_meta, _ = op.meta(x, kernel_size, stride, padding, dilation, ceil_mode)  # checks
        k, s, p, d = pool_args(n, kernel_size, stride, padding, dilation)
        x = _cont(be, x.detach())
        y = be._new(tuple(y_meta.shape), x.dtype, x.device)
        idx = be._new(tuple(y_meta.shape), D.int64, x.device)
        total = y.numel()
        if total:
            _, (Di, Hi, Wi) = _dhw(tuple(x.shape), n)
            _, (Do, Ho, Wo) = _dhw(tuple(y.shape), n)
            kd, kh, kw = _pad3(k, n, 1)
            s3, p3, d3 = _pad3(s, n, 1), _pad3(p, n, 0), _pad3(d, n, 1)
            _launch(be, _lazy("pool_tl").pool_fwd, (-(-total // 256),),
                    [x, y, idx, Di, Hi, Wi, Do, Ho, Wo, total, *s3, *p3, *d3, 1.0],
                    (), {"KD": kd, "KH": kh, "KW": kw, "MAX": True, "COUNT_PAD": False,
                     "HAS_DIV": False, "ACC": _acc_tl(x.dtype), "BLOCK": 256})
        return y, idx
    return f


def _avg_pool(n):
    def f(be, op, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
          divisor_override=None):
        from ember._ops.registry import avg_pool_args
        if x.dtype not in _FLOAT:
            return NotImplemented
        args = (x, kernel_size, stride, padding, ceil_mode, count_include_pad)
        if n > 1:
            args += (divisor_override,)
        y_meta = op.meta(*args)  # checks
        if divisor_override is not None and divisor_override == 0:
            raise RuntimeError("divisor must be not zero")
        k, s, p = avg_pool_args(n, kernel_size, stride, padding)
        x = _cont(be, x.detach())
        y = be._new(tuple(y_meta.shape), x.dtype, x.device)
        total = y.numel()
        if total:
            _, (Di, Hi, Wi) = _dhw(tuple(x.shape), n)
            _, (Do, Ho, Wo) = _dhw(tuple(y.shape), n)
            kd, kh, kw = _pad3(k, n, 1)
            _launch(be, _lazy("pool_tl").pool_fwd, (-(-total // 256),),
                    [x, y, x, Di, Hi, Wi, Do, Ho, Wo, total, *_pad3(s, n, 1), *_pad3(p, n, 0),
                     1, 1, 1, float(divisor_override or 1)],
                    (), {"KD": kd, "KH": kh, "KW": kw, "MAX": False,
                     "COUNT_PAD": bool(count_include_pad), "HAS_DIV": bool(divisor_override),
                     "ACC": _acc_tl(x.dtype), "BLOCK": 256})
        return y
    return f


@cuda_kernel("_avg_pool_backward")
def _avg_pool_backward(be, op, g, x, k, s, p, ceil_mode, count_include_pad, divisor_override):
    n = len(k)
    if (g.dtype not in _FLOAT or not 1 <= n <= 3 or len(s) != n or len(p) != n
            or g.ndim != x.ndim or tuple(g.shape[:g.ndim - n]) != tuple(x.shape[:x.ndim - n])):
        return NotImplemented
    g = _cont(be, g.detach())
    acc = be._new(tuple(x.shape), _acc_dt(g.dtype), g.device)
    be.fill_(acc, 0)
    total = g.numel()
    if total:
        _, (Di, Hi, Wi) = _dhw(tuple(x.shape), n)
        _, (Do, Ho, Wo) = _dhw(tuple(g.shape), n)
        kd, kh, kw = _pad3(k, n, 1)
        _launch(be, _lazy("pool_tl").avg_pool_bwd, (-(-total // 256),),
                [g, acc, Di, Hi, Wi, Do, Ho, Wo, total, *_pad3(s, n, 1), *_pad3(p, n, 0),
                 float(divisor_override or 1)],
                (), {"KD": kd, "KH": kh, "KW": kw, "COUNT_PAD": bool(count_include_pad),
                 "HAS_DIV": bool(divisor_override), "ACC": _acc_tl(g.dtype), "BLOCK": 256})
    return acc if acc.dtype is g.dtype else be._copy_new(acc, g.dtype)


def _kmax(size, out):
    return -(-size // out) + 1 if out else 1


def _adaptive(kind):
    def f(be, op, x, output_size):
        from ember._ops.registry import check_adaptive
        n = len(output_size)
        if x.dtype not in _FLOAT or not 1 <= n <= 3:
            return NotImplemented
        name = "adaptive_max_pool" if kind else "adaptive_avg_pool"
        check_adaptive(x, n, f"{name}{n}d")
        shape = tuple(x.shape[:x.ndim - n]) + tuple(output_size)
        x = _cont(be, x.detach())
        y = be._new(shape, x.dtype, x.device)
        idx = be._new(shape, D.int64, x.device) if kind else None
        total = y.numel()
        if total:
            _, sp = _dhw(tuple(x.shape), n)
            _, osp = _dhw(shape, n)
            _launch(be, _lazy("pool_tl").adaptive_fwd, (-(-total // 256),),
                    [x, y, idx if kind else x, *sp, *osp, total,
                     *(_kmax(a, o) for a, o in zip(sp, osp))],
                    (), {"MAX": bool(kind), "ACC": _acc_tl(x.dtype), "BLOCK": 256})
        return (y, idx) if kind else y
    return f


@cuda_kernel("_adaptive_avg_pool_backward")
def _adaptive_avg_backward(be, op, g, input_size):
    n = len(input_size)
    if g.dtype not in _FLOAT or not 1 <= n <= 3 or g.ndim < n:
        return NotImplemented
    shape = tuple(g.shape[:g.ndim - n]) + tuple(input_size)
    g = _cont(be, g.detach())
    acc = be._new(shape, _acc_dt(g.dtype), g.device)
    be.fill_(acc, 0)
    total = g.numel()
    if total and acc.numel():
        _, sp = _dhw(shape, n)
        _, osp = _dhw(tuple(g.shape), n)
        _launch(be, _lazy("pool_tl").adaptive_avg_bwd, (-(-total // 256),),
                [g, acc, *sp, *osp, total, *(_kmax(a, o) for a, o in zip(sp, osp))],
                (), {"ACC": _acc_tl(g.dtype), "BLOCK": 256})
    return acc if acc.dtype is g.dtype else be._copy_new(acc, g.dtype)


cuda_kernel("max_pool1d_with_indices")(_max_pool(1))
cuda_kernel("max_pool3d_with_indices")(_max_pool(3))
cuda_kernel("avg_pool1d")(_avg_pool(1))
cuda_kernel("avg_pool2d")(_avg_pool(2))
cuda_kernel("avg_pool3d")(_avg_pool(3))
cuda_kernel("_adaptive_avg_pool")(_adaptive(False))
cuda_kernel("_adaptive_max_pool")(_adaptive(True))

HOST: dict[str, str] = {}


# ---- pooling: _pool_gather, _max_unpool_ember --------------------------------------------------
def _planes(x, n):
    m = 1
    for s in tuple(x.shape)[:x.ndim - n]:
        m *= s
    per = 1
    for s in tuple(x.shape)[x.ndim - n:]:
        per *= s
    return m, per


@_index_kernel("_pool_gather")
def _pool_gather(be, op, x, idx, n):
    args = (x, idx, n)
    if idx.dtype not in _INTS or idx.ndim != x.ndim:
        return _raise(be, op, args)
    if not _ok_dtype(x) or tuple(idx.shape[:idx.ndim - n]) != tuple(x.shape[:x.ndim - n]):
        return NotImplemented
    m, per = _planes(x, n)
    _, k = _planes(idx, n)
    (mm,) = _minmax(be, [idx])
    if not _in_range(mm, -per, per):   # negatives wrap, as the CPU kernel's
        return _raise(be, op, args)
    xc, ic = _cont(be, x).reshape(m, per), _cont(be, idx).reshape(m, k)
    out = be._new((m, k), x.dtype, x.device)
    if not _gather(be, out, xc, ic, (m, k), [per, 0], [k, 1], 1, per):
        return NotImplemented
    return out.reshape(tuple(idx.shape))


@_index_kernel("_max_unpool_ember")
def _max_unpool(be, op, x, idx, output_size, n):
    args = (x, idx, output_size, n)
    if not _ok_dtype(x) or idx.dtype not in _INTS or tuple(idx.shape) != tuple(x.shape):
        return NotImplemented
    m, k = _planes(x, n)
    per = 1
    for s in output_size:
        per *= s
    (mm,) = _minmax(be, [idx])
    if not _in_range(mm, 0, per):
        return _raise(be, op, args)
    out = be._new(tuple(x.shape[:x.ndim - n]) + tuple(output_size), x.dtype, x.device)
    be.fill_(out, 0)
    xc, ic = _cont(be, x).reshape(m, k), _cont(be, idx).reshape(m, k)
    if not _scatter(be, out.reshape(m, per), xc, ic, (m, k), [per, 0], [k, 1], [k, 1], 1, per,
                    False, wrap=False):
        return NotImplemented
    return out


@cuda_kernel("max_pool2d_with_indices")
def _max_pool2d(be, op, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    from ember._ops.registry import pool_args
    if x.dtype not in _ACC or x.dtype._cat < 2:
        return NotImplemented
    y_meta, i_meta = op.meta(x, kernel_size, stride, padding, dilation, ceil_mode)  # checks
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = pool_args(2, kernel_size, stride, padding,
                                                        dilation)
    K = _lazy("pool_tl")
    x = _cont(be, x)
    H, W = x.shape[-2], x.shape[-1]
    Ho, Wo = y_meta.shape[-2], y_meta.shape[-1]
    y = be._new(tuple(y_meta.shape), x.dtype, x.device)
    idx = be._new(tuple(i_meta.shape), D.int64, x.device)
    total = y.numel()
    if total:
        _launch(be, K.max_pool2d_fwd, (-(-total // 256),),
                [x, y, idx, H, W, Ho, Wo, total, sh, sw, ph, pw, dh, dw], (),
                {"KH": kh, "KW": kw, "BLOCK": 256})
    return y, idx


@cuda_kernel("_pool_scatter")
def _pool_scatter(be, op, g, x, idx, n):
    if g.dtype not in _ACC or g.dtype._cat < 2 or tuple(g.shape) != tuple(idx.shape):
        return NotImplemented
    K = _lazy("pool_tl")
    per = 1
    for s in tuple(x.shape)[x.ndim - n:]:
        per *= s
    outs = 1
    for s in tuple(idx.shape)[idx.ndim - n:]:
        outs *= s
    # No bounds read back (a sync per step, impossible under graph capture): this private op
    # only receives the indices max-pool's own forward produced; the kernel skips any index
    # outside its plane all the same, so nothing outside the output is written.
    acc = be._new(tuple(x.shape), D.float32, x.device)
    be.fill_(acc, 0)
    total = g.numel()
    if total:
        _launch(be, K.pool_scatter, (-(-total // 1024),),
                [_cont(be, g), _cont(be, idx), acc, outs, per, total], (), {"BLOCK": 1024})
    return acc if g.dtype is D.float32 else be._copy_new(acc, g.dtype)
