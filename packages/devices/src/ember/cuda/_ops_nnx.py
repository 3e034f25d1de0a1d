"""GPU kernels: pooling, resampling, normalization, convolution variants and other nn ops.

`cuda_kernel` fills the op entries' cuda slots with kernels `f(backend, op, *args)`
(NotImplemented declines a call). HOST lists the ops of this family that still run their CPU
kernel on host copies, with the reason (test_cuda_opdb.py holds the backend to it). A kernel
for an op with a decomposition in core runs instead of the composition.

The kernels (_kernels_nnx) take contiguous inputs: batch norm is one program per channel (two
passes for the statistics, one for the output), or, for few channels of many values, P programs
per channel (per-chunk mean and squared deviations combined by Chan's formula; the backward's
sums as per-chunk partials, summed in a fixed order: deterministic); group norm is one program
per (sample, group); pools are one output per lane over a (planes, D, H, W) view, so 1-D, 2-D and
3-D share them; backward passes of pools and resampling scatter with float32 (float64) atomics;
resampling runs one separable pass per spatial dim.
"""
from __future__ import annotations

import math

from ember import _dtype as D

from ._ops import cuda_kernel

_FLOAT = (D.float32, D.float16, D.bfloat16, D.float64)


def _conv():
    from ._ops import _lazy
    return _lazy("_conv")


def _k():
    from ._ops import _lazy
    return _lazy("_kernels_nnx")


def _launch(be, kern, grid, args, constexprs):
    from ._ops import _launch as launch
    launch(be, kern, grid, args, (), constexprs)


def _acc_tl(dt):
    from ._ops import _ACC
    return _ACC[dt]


def _acc_dt(dt):
    return D.float64 if dt is D.float64 else D.float32


def _cont(be, x):
    return x if x.is_contiguous() else be._copy_new(x, x.dtype)


def _block(n, lo=128, hi=1024):
    return max(lo, min(hi, 1 << max(0, (n - 1).bit_length())))


# ---- batch norm ---------------------------------------------------------------------------------
_BN_MIN_CHUNK = 2048   # values a program handles at least when a channel is split
_BN_PROGRAMS = 528     # programs to aim for (about four per SM of an H100/H200)


def _bn_split(C, M):
    """(P, chunk): each channel's M values over P programs of chunk values (P == 1: one program
    per channel, the plain kernels). Few channels with many values each are split, as core's
    reductions split long rows."""
    P = min(-(-_BN_PROGRAMS // C), -(-M // _BN_MIN_CHUNK), 256)
    if P <= 1:
        return 1, M
    chunk = -(-M // P)
    chunk = -(-chunk // 1024) * 1024    # whole blocks
    return -(-M // chunk), chunk


@cuda_kernel("_native_batch_norm_legit_functional")
def _bn(be, op, x, w, b, rm, rv, training, momentum, eps):
    if x.dtype not in _FLOAT or x.ndim < 2 or x.numel() == 0:
        return NotImplemented
    C = x.shape[1]
    for t in (w, b, rm, rv):
        if t is not None and (t.numel() != C or t.dtype not in _FLOAT):
            return NotImplemented  # the CPU kernel raises numpy's error
    if not training and (rm is None or rv is None):
        return NotImplemented
    N = x.shape[0]
    S = x.numel() // (N * C)
    if training and N * S <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                         f"[{', '.join(str(s) for s in x.shape)}]")
    x = _cont(be, x.detach())
    sdt = D.float32 if x.dtype in (D.float16, D.bfloat16) else x.dtype
    y = be._new(tuple(x.shape), x.dtype, x.device)
    sm = be._new((C,), sdt, x.device)
    si = be._new((C,), sdt, x.device)
    nrm = be._new((C,), rm.dtype, x.device) if training and rm is not None else None
    nrv = be._new((C,), rv.dtype, x.device) if training and rv is not None else None
    dummy = x
    args = [x, w if w is not None else dummy, b if b is not None else dummy,
            _cont(be, rm) if rm is not None else dummy, _cont(be, rv) if rv is not None else dummy,
            y, sm, si, nrm if nrm is not None else dummy, nrv if nrv is not None else dummy,
            N, C, S, float(momentum), float(eps)]
    args[1] = _cont(be, args[1].detach())
    args[2] = _cont(be, args[2].detach())
    P, chunk = _bn_split(C, N * S)
    if P > 1:
        K = _k()
        acc = _acc_tl(x.dtype)
        p1 = p2 = x
        if training:
            p1 = be._new((C, P), _acc_dt(x.dtype), x.device)
            p2 = be._new((C, P), _acc_dt(x.dtype), x.device)
            _launch(be, K.bn_partial, (C, P), [x, x, x, p1, p2, N, C, S, chunk, P],
                    {"BWD": False, "ACC": acc, "BLOCK": 1024})
        _launch(be, K.bn_fwd_split, (C, P), args[:10] + [p1, p2, N, C, S, chunk, P] + args[13:],
                {"TRAIN": bool(training), "HAS_W": w is not None, "HAS_B": b is not None,
                 "HAS_RM": rm is not None, "HAS_RV": rv is not None, "ACC": acc,
                 "BLOCK": 1024, "BLOCK_P": _block(P, 16, 256)})
        return y, sm, si, nrm, nrv
    _launch(be, _k().bn_fwd, (C,), args,
            {"TRAIN": bool(training), "HAS_W": w is not None, "HAS_B": b is not None,
             "HAS_RM": rm is not None, "HAS_RV": rv is not None, "ACC": _acc_tl(x.dtype),
             "BLOCK": _block(N * S)})
    return y, sm, si, nrm, nrv


@cuda_kernel("native_batch_norm_backward")
def _bn_backward(be, op, g, x, w, rm, rv, save_mean, save_invstd, train, eps, mask):
    if (x.dtype not in _FLOAT or g.dtype is not x.dtype or x.ndim < 2 or x.numel() == 0
            or save_mean is None or save_invstd is None or tuple(g.shape) != tuple(x.shape)):
        return NotImplemented
    C = x.shape[1]
    N = x.shape[0]
    S = x.numel() // (N * C)
    x, g = _cont(be, x.detach()), _cont(be, g.detach())
    need_dx, need_dw, need_db = bool(mask[0]), bool(mask[1]) and w is not None, bool(mask[2])
    dx = be._new(tuple(x.shape), x.dtype, x.device) if need_dx else None
    dw = be._new((C,), w.dtype, x.device) if need_dw else None
    db = be._new((C,), x.dtype if w is None else w.dtype, x.device) if need_db else None
    d = x
    P, chunk = _bn_split(C, N * S)
    if P > 1:
        K = _k()
        acc = _acc_tl(x.dtype)
        sm, si = _cont(be, save_mean), _cont(be, save_invstd)
        p1 = be._new((C, P), _acc_dt(x.dtype), x.device)
        p2 = be._new((C, P), _acc_dt(x.dtype), x.device)
        _launch(be, K.bn_partial, (C, P), [x, g, sm, p1, p2, N, C, S, chunk, P],
                {"BWD": True, "ACC": acc, "BLOCK": 1024})
        _launch(be, K.bn_bwd_split, (C, P),
                [g, x, _cont(be, w.detach()) if w is not None else d, sm, si,
                 dx if need_dx else d, dw if need_dw else d, db if need_db else d, p1, p2,
                 N, C, S, chunk, P],
                {"TRAIN": bool(train), "HAS_W": w is not None, "NEED_DX": need_dx,
                 "NEED_DW": need_dw, "NEED_DB": need_db, "ACC": acc, "BLOCK": 1024,
                 "BLOCK_P": _block(P, 16, 256)})
        return dx, dw, db
    _launch(be, _k().bn_bwd, (C,),
            [g, x, _cont(be, w.detach()) if w is not None else d, _cont(be, save_mean),
             _cont(be, save_invstd), dx if need_dx else d, dw if need_dw else d,
             db if need_db else d, N, C, S],
            {"TRAIN": bool(train), "HAS_W": w is not None, "NEED_DX": need_dx,
             "NEED_DW": need_dw, "NEED_DB": need_db, "ACC": _acc_tl(x.dtype),
             "BLOCK": _block(N * S)})
    return dx, dw, db


# ---- group norm ---------------------------------------------------------------------------------
@cuda_kernel("native_group_norm")
def _gn(be, op, x, w, b, N, C, HxW, group, eps):
    if (x.dtype not in _FLOAT or x.numel() == 0 or group <= 0 or C % group
            or x.numel() != N * C * HxW or x.ndim < 2):
        return NotImplemented
    x = _cont(be, x.detach())
    y = be._new(tuple(x.shape), x.dtype, x.device)
    mean = be._new((N, group), x.dtype, x.device)
    rstd = be._new((N, group), x.dtype, x.device)
    Cg = C // group
    _launch(be, _k().gn_fwd, (N * group,),
            [x, _cont(be, w.detach()) if w is not None else x,
             _cont(be, b.detach()) if b is not None else x, y, mean, rstd, C, HxW, Cg, group,
             float(eps)],
            {"HAS_W": w is not None, "HAS_B": b is not None, "ACC": _acc_tl(x.dtype),
             "BLOCK": _block(Cg * HxW)})
    return y, mean, rstd


@cuda_kernel("native_group_norm_backward")
def _gn_backward(be, op, g, x, mean, rstd, w, N, C, HxW, group, mask):
    if (x.dtype not in _FLOAT or g.dtype is not x.dtype or x.numel() == 0 or group <= 0
            or C % group or x.numel() != N * C * HxW or tuple(g.shape) != tuple(x.shape)):
        return NotImplemented
    x, g = _cont(be, x.detach()), _cont(be, g.detach())
    mean, rstd = _cont(be, mean.detach()), _cont(be, rstd.detach())
    Cg = C // group
    K = _k()
    acc = _acc_tl(x.dtype)
    gi = gw = gb = None
    if mask[0]:
        gi = be._new(tuple(x.shape), x.dtype, x.device)
        _launch(be, K.gn_bwd_dx, (N * group,),
                [g, x, _cont(be, w.detach()) if w is not None else x, mean, rstd, gi, C, HxW,
                 Cg, group], {"HAS_W": w is not None, "ACC": acc, "BLOCK": _block(Cg * HxW)})
    if mask[1] or mask[2]:
        gw = be._new((C,), g.dtype, x.device) if mask[1] else None
        gb = be._new((C,), g.dtype, x.device) if mask[2] else None
        _launch(be, K.gn_bwd_dwb, (C,),
                [g, x, mean, rstd, gw if gw is not None else x, gb if gb is not None else x,
                 N, C, HxW, Cg, group],
                {"NEED_DW": bool(mask[1]), "NEED_DB": bool(mask[2]), "ACC": acc,
                 "BLOCK": _block(N * HxW)})
    return gi, gw, gb


# ---- pooling ------------------------------------------------------------------------------------
def _dhw(shape, n):
    """(planes, (D, H, W)) of the last n dims of shape, padded with leading 1s to three."""
    sp = (1,) * (3 - n) + tuple(shape[len(shape) - n:])
    return math.prod(shape[:len(shape) - n]), sp


def _pad3(v, n, fill):
    return (fill,) * (3 - n) + tuple(v)


def _max_pool(n):
    def f(be, op, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        from ember._ops.pool import _norm_args
        if x.dtype not in _FLOAT:
            return NotImplemented
        y_meta, _ = op.meta(x, kernel_size, stride, padding, dilation, ceil_mode)  # checks
        k, s, p, d = _norm_args(n, kernel_size, stride, padding, dilation)
        x = _cont(be, x.detach())
        y = be._new(tuple(y_meta.shape), x.dtype, x.device)
        idx = be._new(tuple(y_meta.shape), D.int64, x.device)
        total = y.numel()
        if total:
            _, (Di, Hi, Wi) = _dhw(tuple(x.shape), n)
            _, (Do, Ho, Wo) = _dhw(tuple(y.shape), n)
            kd, kh, kw = _pad3(k, n, 1)
            s3, p3, d3 = _pad3(s, n, 1), _pad3(p, n, 0), _pad3(d, n, 1)
            _launch(be, _k().pool_fwd, (-(-total // 256),),
                    [x, y, idx, Di, Hi, Wi, Do, Ho, Wo, total, *s3, *p3, *d3, 1.0],
                    {"KD": kd, "KH": kh, "KW": kw, "MAX": True, "COUNT_PAD": False,
                     "HAS_DIV": False, "ACC": _acc_tl(x.dtype), "BLOCK": 256})
        return y, idx
    return f


def _avg_pool(n):
    def f(be, op, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
          divisor_override=None):
        from ember._ops.pool import _avg_args
        if x.dtype not in _FLOAT:
            return NotImplemented
        args = (x, kernel_size, stride, padding, ceil_mode, count_include_pad)
        if n > 1:
            args += (divisor_override,)
        y_meta = op.meta(*args)  # checks
        if divisor_override is not None and divisor_override == 0:
            raise RuntimeError("divisor must be not zero")
        k, s, p = _avg_args(n, kernel_size, stride, padding)
        x = _cont(be, x.detach())
        y = be._new(tuple(y_meta.shape), x.dtype, x.device)
        total = y.numel()
        if total:
            _, (Di, Hi, Wi) = _dhw(tuple(x.shape), n)
            _, (Do, Ho, Wo) = _dhw(tuple(y.shape), n)
            kd, kh, kw = _pad3(k, n, 1)
            _launch(be, _k().pool_fwd, (-(-total // 256),),
                    [x, y, x, Di, Hi, Wi, Do, Ho, Wo, total, *_pad3(s, n, 1), *_pad3(p, n, 0),
                     1, 1, 1, float(divisor_override or 1)],
                    {"KD": kd, "KH": kh, "KW": kw, "MAX": False,
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
        _launch(be, _k().avg_pool_bwd, (-(-total // 256),),
                [g, acc, Di, Hi, Wi, Do, Ho, Wo, total, *_pad3(s, n, 1), *_pad3(p, n, 0),
                 float(divisor_override or 1)],
                {"KD": kd, "KH": kh, "KW": kw, "COUNT_PAD": bool(count_include_pad),
                 "HAS_DIV": bool(divisor_override), "ACC": _acc_tl(g.dtype), "BLOCK": 256})
    return acc if acc.dtype is g.dtype else be._copy_new(acc, g.dtype)


def _kmax(size, out):
    return -(-size // out) + 1 if out else 1


def _adaptive(kind):
    def f(be, op, x, output_size):
        from ember._ops.pool import _check_adaptive
        n = len(output_size)
        if x.dtype not in _FLOAT or not 1 <= n <= 3:
            return NotImplemented
        name = "adaptive_max_pool" if kind else "adaptive_avg_pool"
        _check_adaptive(x, n, f"{name}{n}d")
        shape = tuple(x.shape[:x.ndim - n]) + tuple(output_size)
        x = _cont(be, x.detach())
        y = be._new(shape, x.dtype, x.device)
        idx = be._new(shape, D.int64, x.device) if kind else None
        total = y.numel()
        if total:
            _, sp = _dhw(tuple(x.shape), n)
            _, osp = _dhw(shape, n)
            _launch(be, _k().adaptive_fwd, (-(-total // 256),),
                    [x, y, idx if kind else x, *sp, *osp, total,
                     *(_kmax(a, o) for a, o in zip(sp, osp))],
                    {"MAX": bool(kind), "ACC": _acc_tl(x.dtype), "BLOCK": 256})
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
        _launch(be, _k().adaptive_avg_bwd, (-(-total // 256),),
                [g, acc, *sp, *osp, total, *(_kmax(a, o) for a, o in zip(sp, osp))],
                {"ACC": _acc_tl(g.dtype), "BLOCK": 256})
    return acc if acc.dtype is g.dtype else be._copy_new(acc, g.dtype)


# ---- resampling ---------------------------------------------------------------------------------
_MODES = {"nearest": 0, "nearest-exact": 1, "linear": 2, "cubic": 3}


def _scale(size_in, size_out, mode, align_corners, scale):
    import numpy as np

    from ember._ops.sample import _src_scale
    if mode <= 1:
        return float(np.float32(_src_scale(size_in, size_out, False, scale))), 0.0
    s = _src_scale(size_in, size_out, align_corners, scale)
    hi = float(np.float32(s))
    return hi, float(np.float32(s - hi))


def _dims_plan(shape, n, sizes_to):
    """Per spatial dim i: (A, In, Out, B) of the pass that resizes dim i to sizes_to[i]."""
    cur = list(shape)
    lead = len(shape) - n
    plan = []
    for i in range(n):
        ax = lead + i
        A = math.prod(cur[:ax])
        B = math.prod(cur[ax + 1:])
        plan.append((A, cur[ax], sizes_to[i], B))
        cur[ax] = sizes_to[i]
    return plan


@cuda_kernel("_upsample")
def _upsample(be, op, x, output_size, mode, align_corners, scales):
    from ember._ops.sample import upsample_checks
    upsample_checks(x, output_size)
    n = len(output_size)
    if x.dtype not in _FLOAT or mode not in _MODES or not 1 <= n <= x.ndim:
        return NotImplemented
    if scales is not None and len(scales) != n:
        return NotImplemented
    m = _MODES[mode]
    shape = tuple(x.shape[:x.ndim - n]) + tuple(output_size)
    cur = _cont(be, x.detach())
    if math.prod(shape) == 0 or cur.numel() == 0:
        return NotImplemented if math.prod(shape) else be._new(shape, x.dtype, x.device)
    acc = _acc_dt(x.dtype)
    K = _k()
    for i, (A, In, Out, B) in enumerate(_dims_plan(tuple(x.shape), n, tuple(output_size))):
        sc = scales[i] if scales else None
        hi, lo = _scale(In, Out, m, align_corners, sc)
        last = i == n - 1
        nshape = tuple(cur.shape[:x.ndim - n + i]) + (Out,) + tuple(cur.shape[x.ndim - n + i + 1:])
        out = be._new(nshape, x.dtype if last else acc, x.device)
        total = A * Out * B
        _launch(be, K.resample_fwd, (-(-total // 256),), [cur, out, In, Out, B, total, hi, lo],
                {"MODE": m, "ALIGN": bool(align_corners), "ACC": _acc_tl(x.dtype),
                 "BLOCK": 256})
        cur = out
    return cur


@cuda_kernel("_upsample_backward")
def _upsample_backward(be, op, g, input_size, mode, align_corners, scales):
    n = len(input_size)
    if g.dtype not in _FLOAT or mode not in _MODES or not 1 <= n <= g.ndim:
        return NotImplemented
    if scales is not None and len(scales) != n:
        return NotImplemented
    m = _MODES[mode]
    shape = tuple(g.shape[:g.ndim - n]) + tuple(input_size)
    if math.prod(shape) == 0 or g.numel() == 0:
        return NotImplemented if math.prod(shape) else be._new(shape, g.dtype, g.device)
    acc = _acc_dt(g.dtype)
    K = _k()
    cur = _cont(be, g.detach())
    # the forward resized dims 0..n-1 in order: the transpose undoes them last to first
    plan = _dims_plan(shape, n, tuple(g.shape[g.ndim - n:]))
    for i in reversed(range(n)):
        A, In, Out, B = plan[i]
        sc = scales[i] if scales else None
        hi, lo = _scale(In, Out, m, align_corners, sc)
        lead = g.ndim - n
        nshape = tuple(cur.shape[:lead + i]) + (In,) + tuple(cur.shape[lead + i + 1:])
        out = be._new(nshape, acc, g.device)
        be.fill_(out, 0)
        total = A * Out * B
        _launch(be, K.resample_bwd, (-(-total // 256),), [cur, out, In, Out, B, total, hi, lo],
                {"MODE": m, "ALIGN": bool(align_corners), "ACC": _acc_tl(g.dtype),
                 "BLOCK": 256})
        cur = out
    return cur if cur.dtype is g.dtype else be._copy_new(cur, g.dtype)


# ---- constant_pad_nd: a fill and one strided copy ------------------------------------------------
@cuda_kernel("constant_pad_nd")
def _constant_pad(be, op, x, pad, value=0):
    from ember._ops.nn import _pad_pairs

    from ._pointwise import Unsupported
    m = op.meta(x, pad, value)  # checks and the output shape
    out = be._new(tuple(m.shape), x.dtype, x.device)
    try:
        if out.numel():
            be.fill_(out, value)
    except Unsupported:
        return NotImplemented
    src_shape, src_off, dst_off = list(x.shape), 0, 0
    for d, lo, hi in _pad_pairs(pad, x.ndim, "constant_pad_nd"):
        src_off += max(-lo, 0) * x.stride(d)
        dst_off += max(lo, 0) * out.stride(d)
        src_shape[d] = max(0, x.shape[d] - max(-lo, 0) - max(-hi, 0))
    if math.prod(src_shape) and out.numel():
        src = x.detach()._alias(tuple(src_shape), x.stride(), x._offset + src_off)
        dst = out._alias(tuple(src_shape), out.stride(), dst_off)
        be._copy_into(dst, src)
    return out


# ---- cdist ---------------------------------------------------------------------------------------
@cuda_kernel("cdist")
def _cdist(be, op, x1, x2, p=2.0, compute_mode=None):
    from ._blas import matmul
    from .runtime.driver import FAKE
    m = op.meta(x1, x2, p, compute_mode)  # PyTorch's checks, the output shape
    if x1.dtype not in _FLOAT or x2.dtype is not x1.dtype:
        return NotImplemented
    shape = tuple(m.shape)
    out = be._new(shape, x1.dtype, x1.device)
    R, Q, M = shape[-2], shape[-1], x1.shape[-1]
    if out.numel() == 0:
        return out
    if M == 0:
        return be.fill_(out, 0)
    B = out.numel() // (R * Q)
    cdt = _acc_dt(x1.dtype)  # fp16/bf16 computed in float32, as core's CPU kernel

    def rows(t, n):
        t = t.detach().expand(shape[:-2] + (n, M))
        if not (t.is_contiguous() and t.dtype is cdt):
            t = be._copy_new(t, cdt)
        return t.reshape(B, n, M)

    a, b = rows(x1, R), rows(x2, Q)
    K = _k()
    acc = _acc_tl(cdt)
    grid = (B, -(-R // 32), -(-Q // 32))
    use_mm = p == 2 and (compute_mode == 1 or (compute_mode in (None, 0) and (R > 25 or Q > 25)))
    if use_mm:  # |a|^2 + |b|^2 - 2 a.b, the product through cuBLAS (PyTorch's and core's way)
        ab = matmul(a, b.transpose(1, 2))
        if ab is None:
            return NotImplemented
        na = be._new((B * R,), cdt, a.device)
        nb = be._new((B * Q,), cdt, a.device)
        _launch(be, K.sqnorm_rows, (-(-(B * R) // 128),), [a, na, B * R, M],
                {"ACC": acc, "BLOCK": 128})
        _launch(be, K.sqnorm_rows, (-(-(B * Q) // 128),), [b, nb, B * Q, M],
                {"ACC": acc, "BLOCK": 128})
        _launch(be, K.cdist_mm_fin, grid, [ab, na, nb, out, R, Q],
                {"ACC": acc, "BLOCK_R": 32, "BLOCK_C": 32})
        return out
    p = float(p)
    mode = 0 if p == 0 else 1 if p == 1 else 2 if p == 2 else 3 if p == math.inf else 4
    import numpy as np
    hi = float(np.float32(p)) if mode == 4 else 1.0
    lo = float(np.float32(p - hi)) if mode == 4 else 0.0
    _launch(be, K.cdist_direct, grid, [a, b, out, R, Q, M, hi, lo],
            {"MODE": mode, "ACC": acc, "LIBDEVICE": not FAKE, "BLOCK_R": 32, "BLOCK_C": 32})
    return out


# ---- grid_sampler (2-D) -------------------------------------------------------------------------
def _grid_check(x, grid, mode, pm):
    """core's grid_sampler checks (sample._grid_setup / _grid_kernel), in its order."""
    if mode == 2:
        raise NotImplementedError("grid_sample(mode='bicubic') is not supported by ember yet")
    from ember._ops.sample import grid_checks
    grid_checks(x, grid, pm)


def _grid_args(be, x, grid, mode, pm, ac):
    x, grid = _cont(be, x.detach()), _cont(be, grid.detach())
    N, C, H, W = x.shape
    P = grid.shape[1] * grid.shape[2]
    consts = {"NEAREST": mode == 1, "ALIGN": bool(ac), "BORDER": pm == 1,
              "ACC": _acc_tl(x.dtype), "BLOCK": 128}
    return x, grid, N, C, H, W, P, consts


@cuda_kernel("grid_sampler")
def _grid_sampler(be, op, x, grid, mode, pm, ac):
    if x.dtype not in _FLOAT or grid.dtype not in _FLOAT or mode not in (0, 1, 2) or \
            pm not in (0, 1, 2):
        return NotImplemented
    _grid_check(x, grid, mode, pm)
    x, grid, N, C, H, W, P, consts = _grid_args(be, x, grid, mode, pm, ac)
    y = be._new((N, C) + tuple(grid.shape[1:3]), x.dtype, x.device)
    if y.numel():
        if H * W == 0:
            return be.fill_(y, 0)
        _launch(be, _k().grid_fwd, (-(-(N * P) // 128),), [x, grid, y, C, H, W, P, N * P],
                consts)
    return y


@cuda_kernel("grid_sampler_2d_backward")
def _grid_sampler_backward(be, op, g, x, grid, mode, pm, ac, mask):
    if (x.dtype not in _FLOAT or grid.dtype not in _FLOAT or g.dtype not in _FLOAT
            or mode not in (0, 1) or pm not in (0, 1, 2)):
        return NotImplemented
    _grid_check(x, grid, 0, pm)
    if tuple(g.shape) != tuple(x.shape[:2]) + tuple(grid.shape[1:3]):
        return NotImplemented  # the CPU kernel raises numpy's error
    x, grid, N, C, H, W, P, consts = _grid_args(be, x, grid, mode, pm, ac)
    g = _cont(be, g.detach())
    need_gi, need_gg = bool(mask[0]), bool(mask[1])
    gi = gg = None
    if need_gi:
        gi = be._new(tuple(x.shape), _acc_dt(x.dtype), x.device)
        be.fill_(gi, 0)
    if need_gg:
        gg = be._new(tuple(grid.shape), grid.dtype, x.device)
        if N * P and (C == 0 or H * W == 0):
            be.fill_(gg, 0)
    if N * P and C and H * W and (need_gi or need_gg):
        _launch(be, _k().grid_bwd, (-(-(N * P) // 128),),
                [g, x, grid, gi if need_gi else x, gg if need_gg else x, C, H, W, P, N * P],
                dict(consts, NEED_GI=need_gi, NEED_GG=need_gg))
    if gi is not None and gi.dtype is not x.dtype:
        gi = be._copy_new(gi, x.dtype)
    return gi, gg


cuda_kernel("max_pool1d_with_indices")(_max_pool(1))
cuda_kernel("max_pool3d_with_indices")(_max_pool(3))
cuda_kernel("avg_pool1d")(_avg_pool(1))
cuda_kernel("avg_pool2d")(_avg_pool(2))
cuda_kernel("avg_pool3d")(_avg_pool(3))
cuda_kernel("_adaptive_avg_pool")(_adaptive(False))
cuda_kernel("_adaptive_max_pool")(_adaptive(True))
cuda_kernel("im2col")(lambda be, op, *a: _conv().im2col(be, op, *a))
cuda_kernel("col2im")(lambda be, op, *a: _conv().col2im(be, op, *a))

HOST: dict[str, str] = {
    "_ctc_loss": "no GPU kernel yet (a per-sample alpha recursion over time: a Triton kernel "
                 "with a time loop is the plan)",
    "_ctc_loss_backward_ember": "no GPU kernel yet (beta recursion, as _ctc_loss)",
}
