"""GPU kernels for reductions: sum/mean/amax/amin/argmax/argmin and the rest (prod, nansum,
var/std, norm, logsumexp, all/any, count_nonzero, max/min along a dim), scans (cumsum, cumprod,
cummax, cummin, logcumsumexp), softmax and log_softmax.

Callers move the reduced dims last as contiguous (R, C) rows (`base._rows`); one program reduces
a row (long rows split over several programs first)."""
from __future__ import annotations

import math
import warnings

from ember._ops.registry import dtypes as D
from ember._ops.registry import reduce_dims, reduced_shape, sum_dtype

from .base import (
    _ACC,
    _RBLOCK,
    _cont,
    _launch,
    _launch_rows,
    _lazy,
    _ok,
    _rblock,
    _rows,
    cuda_kernel,
)


# ---- row reductions ----------------------------------------------------------------------------
def _row_reduce(be, x, dims, shape, out_dtype, kind, divisor=1.0, p=0.0, sqrt=False,
                acc_dtype=None, empty=None):
    """out[shape] = reduction `kind` (see row_reduce2) of x over dims."""
    out = be._new(tuple(shape), out_dtype, x.device)
    if out.numel() == 0:
        return out
    if x.numel() == 0:  # empty reductions: their identity (or NaN)
        if empty is None:
            return NotImplemented
        be.fill_(out, empty)
        return out
    rows, R, C = _rows(be, x, dims)
    acc = _ACC[acc_dtype or x.dtype]
    chunk = math.gcd(C, 16384)
    if kind in _SPLIT and R < 128 and C >= 65536 and chunk >= 2048:
        # few long rows: one program a row would leave the GPU idle (a 16M-element norm took
        # 7 ms); reduce chunks of each row first, then the per-row partials (exact for these
        # kinds: partial norms/LSEs/products/counts combine by the same or a summing kind)
        P = C // chunk
        pdt = out_dtype if out_dtype in (D.bool, D.int64, D.float64) else D.float32
        part = be._new((R * P,), pdt, x.device)
        flat = rows if rows.is_contiguous() else be._copy_new(rows, rows.dtype)
        _launch_rows(be, _lazy("reduction_tl").row_reduce2, flat, part, R * P, chunk,
                     {"KIND": kind, "ACC": acc, "SQRT": sqrt, "BLOCK": _rblock(chunk)},
                     (float(divisor), float(p)))
        rows, C, kind = part, P, _SPLIT[kind]
        acc = _ACC[pdt]
    _launch_rows(be, _lazy("reduction_tl").row_reduce2, rows, out, R, C,
                 {"KIND": kind, "ACC": acc, "SQRT": sqrt, "BLOCK": _rblock(C)},
                 (float(divisor), float(p)))
    return out


# row reductions that split long rows: kind of the first pass -> kind combining its partials
# (prod, nansum, all, any, logsumexp, norms 2/1/inf/-inf, 0 -> a float sum of counts, p).
# count_nonzero is not split: its int64 partials would need an integer sum kind (nansum's
# kernel is float-typed: Triton refuses the int64 accumulator on the GPU)
_SPLIT = {1: 1, 2: 2, 3: 3, 4: 4, 6: 6, 10: 10, 11: 11, 12: 12, 13: 13, 14: 2, 15: 15}


def _dims(dim, ndim):
    from ember._ops.registry import reduce_dims
    return reduce_dims(dim, ndim) if ndim else ()


def _var_any(sqrt):
    def f(be, op, x, dim=None, unbiased=None, keepdim=False, correction=None):
        from ember._ops.registry import var_args
        m = op.meta(x, dim, unbiased, keepdim, correction)    # PyTorch's checks and dtype
        if not _ok(x.dtype, m.dtype):
            return NotImplemented
        dims, c = var_args(x, dim, unbiased, correction)
        n = 1
        for d in dims:
            n *= x.shape[d]
        if n - c <= 0:
            warnings.warn("var(): degrees of freedom is <= 0. Correction should be strictly less "
                          "than the reduction factor (input numel divided by output numel).",
                          UserWarning, stacklevel=4)
        return _row_reduce(be, x, dims if x.ndim else (), m.shape, m.dtype, 0,
                           divisor=float(max(n - c, 0)), sqrt=sqrt, empty=math.nan)
    return f


@cuda_kernel("prod")
def _prod(be, op, x, dim=None, keepdim=False, dtype=None):
    m = op.meta(x, dim, keepdim, dtype)
    if not _ok(x.dtype, m.dtype):
        return NotImplemented
    if x.dtype is not m.dtype:
        x = be._copy_new(x, m.dtype)
    return _row_reduce(be, x, _dims(dim, x.ndim), m.shape, m.dtype, 1, empty=1)


@cuda_kernel("nansum")
def _nansum(be, op, x, dim=None, keepdim=False, dtype=None):
    m = op.meta(x, dim, keepdim, dtype)
    if not _ok(x.dtype, m.dtype):
        return NotImplemented
    if not m.dtype.is_floating_point:  # no NaNs: sum's kernel (nansum's is float-typed)
        from .base import _reduce
        return _reduce(be, op, x, dim, keepdim, 0, m.dtype) if x.numel() else \
            be.fill_(be._new(tuple(m.shape), m.dtype, x.device), 0)
    if x.dtype is not m.dtype:
        x = be._copy_new(x, m.dtype)
    return _row_reduce(be, x, _dims(dim, x.ndim), m.shape, m.dtype, 2, empty=0)


def _bool_red(kind):
    def f(be, op, x, dim=None, keepdim=False):
        m = op.meta(x, dim, keepdim)
        if not _ok(x.dtype, m.dtype):
            return NotImplemented
        return _row_reduce(be, x, _dims(dim, x.ndim), m.shape, m.dtype, kind,
                           empty=1 if kind == 3 else 0, acc_dtype=D.int64)
    return f


@cuda_kernel("count_nonzero")
def _count_nonzero(be, op, x, dim=None):
    m = op.meta(x, dim)
    if not _ok(x.dtype):
        return NotImplemented
    return _row_reduce(be, x, _dims(dim, x.ndim), m.shape, D.int64, 5, empty=0,
                       acc_dtype=D.int64)


@cuda_kernel("logsumexp")
def _logsumexp(be, op, x, dim, keepdim=False):
    m = op.meta(x, dim, keepdim)
    if not _ok(x.dtype, m.dtype):
        return NotImplemented
    if x.dtype is not m.dtype:
        x = be._copy_new(x, m.dtype)
    return _row_reduce(be, x, _dims(dim, x.ndim), m.shape, m.dtype, 6, empty=-math.inf)


@cuda_kernel("norm")
def _norm(be, op, x, p="fro", dim=None, keepdim=False, dtype=None):
    from ember._ops.registry import norm_p
    m = op.meta(x, p, dim, keepdim, dtype)
    if not _ok(x.dtype, m.dtype):
        return NotImplemented
    pv = norm_p(p)
    if dtype is not None and x.dtype is not m.dtype:
        x = be._copy_new(x, m.dtype)
    kind = {2.0: 10, 1.0: 11, math.inf: 12, -math.inf: 13, 0.0: 14}.get(pv, 15)
    return _row_reduce(be, x, _dims(dim, x.ndim), m.shape, m.dtype, kind, p=pv, empty=0,
                       acc_dtype=m.dtype)


def _extreme_dim(is_max):
    def f(be, op, x, dim, keepdim=False):
        from ember._ops.registry import normalize_dim
        mv, mi = op.meta(x, dim, keepdim)
        if not _ok(x.dtype):
            return NotImplemented
        vals = be._new(tuple(mv.shape), x.dtype, x.device)
        idx = be._new(tuple(mi.shape), D.int64, x.device)
        if x.ndim == 0:
            be._copy_into(vals, x)
            be.fill_(idx, 0)
            return vals, idx
        d = normalize_dim(dim, x.ndim)   # (an empty dim: the meta raised PyTorch's IndexError)
        if vals.numel() == 0:
            return vals, idx
        rows, R, C = _rows(be, x, (d,))
        _launch(be, _lazy("reduction_tl").row_extreme, (R,), [rows, vals, idx, C], (),
                {"MAX": is_max, "ACC": _ACC[x.dtype], "BLOCK": _rblock(C)})
        return vals, idx
    return f


# ---- scans -------------------------------------------------------------------------------------
def _scan(be, x, dim, kind, out_dtype):
    """(out, indices or None) of scan `kind` (0 cumsum, 1 cumprod, 2 logcumsumexp, 3 cummax,
    4 cummin) along dim, in out_dtype."""
    from ember._ops.registry import normalize_dim
    if x.dtype is not out_dtype:
        x = be._copy_new(x, out_dtype)
    x = _cont(be, x)
    out = be._new(tuple(x.shape), out_dtype, x.device)
    idx = be._new(tuple(x.shape), D.int64, x.device) if kind >= 3 else None
    if x.numel() == 0:
        return out, idx
    if x.ndim == 0:
        be._copy_into(out, x)
        if idx is not None:
            be.fill_(idx, 0)
        return out, idx
    d = normalize_dim(dim, x.ndim)
    n = x.shape[d]
    inner = 1
    for s in tuple(x.shape)[d + 1:]:
        inner *= s
    outer = x.numel() // (n * inner)
    K, acc = _lazy("reduction_tl"), _ACC[out_dtype]
    ip = idx if idx is not None else out
    if inner == 1:
        B = max(16, min(1024, 1 << (n - 1).bit_length()))
        _launch(be, K.row_scan, (outer,), [x, out, ip, n], (),
                {"KIND": kind, "ACC": acc, "BLOCK": B})
    else:
        B = max(16, min(256, 1 << (inner - 1).bit_length()))
        _launch(be, K.strided_scan, (outer, -(-inner // B)), [x, out, ip, n, inner], (),
                {"KIND": kind, "ACC": acc, "BLOCK": B})
    return out, idx


def _cum(kind):
    def f(be, op, x, dim, dtype=None):
        m = op.meta(x, dim, dtype)
        if not _ok(x.dtype, m.dtype):
            return NotImplemented
        return _scan(be, x, dim, kind, m.dtype)[0]
    return f


@cuda_kernel("logcumsumexp")
def _logcumsumexp(be, op, x, dim):
    m = op.meta(x, dim)
    if not _ok(x.dtype, m.dtype):
        return NotImplemented
    return _scan(be, x, dim, 2, m.dtype)[0]


def _cumext(kind):
    def f(be, op, x, dim):
        op.meta(x, dim)
        if not _ok(x.dtype):
            return NotImplemented
        return _scan(be, x, dim, kind, x.dtype)
    return f


cuda_kernel("var")(_var_any(False))
cuda_kernel("std")(_var_any(True))
cuda_kernel("all")(_bool_red(3))
cuda_kernel("any")(_bool_red(4))
cuda_kernel("max.dim")(_extreme_dim(True))
cuda_kernel("min.dim")(_extreme_dim(False))
cuda_kernel("cumsum")(_cum(0))
cuda_kernel("cumprod")(_cum(1))
cuda_kernel("cummax")(_cumext(3))
cuda_kernel("cummin")(_cumext(4))


def _reduce(be, op, x, dim, keepdim, kind, out_dtype, mean=False):
    dims = tuple(sorted(set(reduce_dims(dim, x.ndim)))) if x.ndim else ()
    shape = reduced_shape(tuple(x.shape), dims, keepdim)
    if x.numel() == 0 or out_dtype not in _ACC or x.dtype not in _ACC:
        return NotImplemented
    if kind in (1, 2, 3, 4) and x.dtype._cat < 2:
        return _int_extreme(be, x, dims, shape, kind)
    if x.dtype is not out_dtype and kind == 0:
        x = be._copy_new(x, out_dtype)
    k = len(dims)
    if kind == 0 and 0 < k < x.ndim and dims == tuple(range(k)) and x.is_contiguous():
        out = be._new(shape, out_dtype, x.device)
        C = 1
        for s in tuple(x.shape)[k:]:
            C *= s
        _col_sum(be, x, out, x.numel() // C, C, mean)
        return out
    rows, R, C = _rows(be, x, dims)
    out = be._new(shape, out_dtype, x.device)
    if R == 0:
        return out
    K = _lazy("reduction_tl")
    acc = _ACC[out_dtype] if kind == 0 else _ACC[x.dtype]
    P = 1
    if kind <= 2 and R < 256 and C >= 16384:  # long rows: split each over P programs first
        P = max(1, min(-(-C // 8192), 1024 // R))
    if P > 1:
        per = -(-C // P)                                  # ceil(C / P), rounded up to BLOCK
        chunk = -(-per // _RBLOCK) * _RBLOCK
        P = -(-C // chunk)
        acc_dt = {"fp32": D.float32, "fp64": D.float64, "int64": D.int64}[str(acc)]
        part = be._new((R, P), acc_dt, x.device)
        _launch_rows(be, K.row_partial, rows, part, R, C,
                     {"KIND": kind, "ACC": acc, "BLOCK": _RBLOCK}, (chunk,), (R, P))
        rows, C2 = part, P
    else:
        C2 = C
    _launch_rows(be, K.row_reduce, rows, out, R, C2,
                 {"KIND": kind, "ACC": acc, "SCALE_MEAN": mean, "BLOCK": _RBLOCK},
                 (float(C),))
    return out


def _int_extreme(be, x, dims, shape, kind):
    """amax/amin (kind 1/2) or argmax/argmin (3/4) of an integer or bool x: row_extreme, which
    starts from each row's first element (row_reduce's +-inf fill has no integer value)."""
    rows, R, C = _rows(be, x, dims)
    vals = be._new(shape, x.dtype, x.device)
    idx = be._new(shape, D.int64, x.device)
    if R:
        _launch(be, _lazy("reduction_tl").row_extreme, (R,), [rows, vals, idx, C], (),
                {"MAX": kind in (1, 3), "ACC": _ACC[x.dtype], "BLOCK": _rblock(C)})
    return vals if kind <= 2 else idx


def _col_sum(be, x, out, R, C, mean, BR=32, BC=128):
    """out[c] = sum (or mean) over r of x[r, c], x contiguous (R, C): one launch when small,
    else per-chunk partials (about four programs per SM) then one launch over them."""
    K = _lazy("reduction_tl")
    ncb = -(-C // BC)
    P = 1 if R * C <= (1 << 20) else max(1, min(-(-R // BR), 528 // ncb))
    per = -(-R // P)
    rper = -(-per // BR) * BR
    P = -(-R // rper)
    acc = _ACC[out.dtype]
    if P == 1:
        _launch(be, K.col_reduce, (ncb, 1), [x, out, R, C, R, float(R)], (),
                {"ACC": acc, "SCALE_MEAN": mean, "BLOCK_R": BR, "BLOCK_C": BC})
        return
    acc_dt = {"fp32": D.float32, "fp64": D.float64, "int64": D.int64}[str(acc)]
    part = be._new((P, C), acc_dt, x.device)
    _launch(be, K.col_reduce, (ncb, P), [x, part, R, C, rper, 1.0], (),
            {"ACC": acc, "SCALE_MEAN": False, "BLOCK_R": BR, "BLOCK_C": BC})
    _launch(be, K.col_reduce, (ncb, 1), [part, out, P, C, P, float(R)], (),
            {"ACC": acc, "SCALE_MEAN": mean, "BLOCK_R": BR, "BLOCK_C": BC})


@cuda_kernel("sum")
def _sum(be, op, x, dim=None, keepdim=False, dtype=None):
    return _reduce(be, op, x, dim, keepdim, 0, sum_dtype(x.dtype, dtype))


@cuda_kernel("mean")
def _mean(be, op, x, dim=None, keepdim=False, dtype=None):
    od = x.dtype if dtype is None else dtype
    if od._cat < 2:
        return NotImplemented  # the CPU kernel raises PyTorch's error
    return _reduce(be, op, x, dim, keepdim, 0, od, mean=True)


@cuda_kernel("amax")
def _amax(be, op, x, dim=(), keepdim=False):
    return _reduce(be, op, x, dim, keepdim, 1, x.dtype)


@cuda_kernel("amin")
def _amin(be, op, x, dim=(), keepdim=False):
    return _reduce(be, op, x, dim, keepdim, 2, x.dtype)


@cuda_kernel("max")
def _max_all(be, op, x):
    op.meta(x)   # empty: PyTorch's error
    return _reduce(be, op, x, None, False, 1, x.dtype)


@cuda_kernel("min")
def _min_all(be, op, x):
    op.meta(x)
    return _reduce(be, op, x, None, False, 2, x.dtype)


@cuda_kernel("argmax")
def _argmax(be, op, x, dim=None, keepdim=False):
    if x.dtype is D.bool:
        return NotImplemented  # the CPU kernel raises PyTorch's error
    if dim is None:
        r = _reduce(be, op, x.reshape(-1), 0, False, 3, D.int64)
        return r if r is NotImplemented or not keepdim else r.reshape((1,) * x.ndim)
    return _reduce(be, op, x, dim, keepdim, 3, D.int64)


@cuda_kernel("argmin")
def _argmin(be, op, x, dim=None, keepdim=False):
    if x.dtype is D.bool:
        return NotImplemented  # the CPU kernel raises PyTorch's error
    if dim is None:
        r = _reduce(be, op, x.reshape(-1), 0, False, 4, D.int64)
        return r if r is NotImplemented or not keepdim else r.reshape((1,) * x.ndim)
    return _reduce(be, op, x, dim, keepdim, 4, D.int64)


def _softmax_any(log):
    def f(be, op, x, dim, dtype=None):
        from ember._ops.registry import normalize_dim
        od = x.dtype if dtype is None else dtype
        if od._cat < 2 or od not in _ACC or x.ndim == 0 or x.numel() == 0:
            return NotImplemented
        d = normalize_dim(dim, x.ndim)
        if x.dtype is not od:
            x = be._copy_new(x, od)
        moved = x.movedim(d, -1) if d != x.ndim - 1 else x
        rows, R, C = _rows(be, moved, (moved.ndim - 1,))
        out = be._new(tuple(rows.shape), od, x.device)
        K = _lazy("reduction_tl")
        block = max(16, 1 << (C - 1).bit_length()) if C <= 4096 else _RBLOCK
        _launch_rows(be, K.row_softmax, rows, out, R, C,
                     {"LOG": log, "BLOCK": block, "ONE": C <= 4096})
        return out.movedim(-1, d) if d != x.ndim - 1 else out
    return f


cuda_kernel("softmax")(_softmax_any(False))
cuda_kernel("log_softmax")(_softmax_any(True))


def _softmax_backward_any(log):
    """_softmax_backward_data / _log_softmax_backward_data: one Triton program per row (float64
    keeps the decomposition: the kernel accumulates in float32)."""
    def f(be, op, g, out, dim, input_dtype):
        from ember._ops.registry import normalize_dim
        op.meta(g, out, dim, input_dtype)   # (PyTorch's errors: sizes, dtypes)
        if g.dtype not in (D.float32, D.float16, D.bfloat16) or g.ndim == 0 or g.numel() == 0:
            return NotImplemented
        d = normalize_dim(dim, g.ndim)
        last = d == g.ndim - 1
        gr, R, C = _rows(be, g if last else g.movedim(d, -1), (g.ndim - 1,))
        yr, _, _ = _rows(be, out if last else out.movedim(d, -1), (g.ndim - 1,))
        res = be._new(tuple(gr.shape), g.dtype, g.device)
        block = max(16, 1 << (C - 1).bit_length()) if C <= 4096 else _RBLOCK
        _launch(be, _lazy("reduction_tl").row_softmax_backward, (R,), [gr, yr, res, C], (),
                {"LOG": log, "BLOCK": block, "ONE": C <= 4096})
        return res if last else res.movedim(-1, d)
    return f


cuda_kernel("_softmax_backward_data")(_softmax_backward_any(False))
cuda_kernel("_log_softmax_backward_data")(_softmax_backward_any(True))
