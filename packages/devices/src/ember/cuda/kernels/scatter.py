"""GPU kernels for the scatter family: gather, index_select, scatter/scatter_add/scatter_reduce,
index_add/index_copy/index_fill. Each is one strided kernel of `indexing_tl` plus one bounds
check of the user's indices (see `indexing`)."""
from __future__ import annotations

from ember._ops.registry import Tensor, normalize_dim
from ember._ops.registry import dtypes as D

from .base import _launch, _lazy, be_dtypes
from .indexing import (
    _BLOCK,
    _acc_target,
    _along,
    _gather,
    _in_range,
    _index_kernel,
    _layout,
    _minmax,
    _ok_dtype,
    _raise,
    _same_device,
    _scalar,
    _scatter,
    _span,
    _wide,
    _zeroed,
)


# ---- gather / index_select / take --------------------------------------------------------------
@_index_kernel("gather")
def _gather_op(be, op, x, dim, index, sparse_grad=False):
    if not _ok_dtype(x):
        return NotImplemented
    d = normalize_dim(dim, x.ndim)
    if index.numel() == 0:
        return be._new(tuple(index.shape), x.dtype, x.device)
    xs = tuple(x.shape) if x.ndim else (1,)
    ish = tuple(index.shape) if index.ndim else (1,)
    xv, iv = x.reshape(xs), index.reshape(ish)
    (mm,) = _minmax(be, [iv])
    if not _in_range(mm, 0, xs[d]):   # negatives refused, as PyTorch (the CPU kernel raises)
        return _raise(be, op, (x, dim, index, sparse_grad))
    out = be._new(ish, x.dtype, x.device)
    if not _gather(be, out, xv, iv, ish, _zeroed(xv.stride(), d), iv.stride(), xv.stride()[d],
                   xs[d]):
        return NotImplemented
    return out.reshape(tuple(index.shape))


@_index_kernel("index_select")
def _index_select(be, op, x, dim, index):
    args = (x, dim, index)
    if not _ok_dtype(x) or x.ndim == 0:
        return NotImplemented
    d = normalize_dim(dim, x.ndim)
    n = x.shape[d]
    (mm,) = _minmax(be, [index])
    if not _in_range(mm, 0, n):
        return _raise(be, op, args)
    shape = tuple(x.shape[:d]) + (index.numel(),) + tuple(x.shape[d + 1:])
    out = be._new(shape, x.dtype, x.device)
    ist = index.stride()[0] if index.ndim else 0
    if not _gather(be, out, x, index, shape, _zeroed(x.stride(), d), _along(x.ndim, d, ist),
                   x.stride()[d], n, wrap=False):
        return NotImplemented
    return out


# ---- scatter / scatter_add / index_add / index_copy / index_fill / put -------------------------
def _scatter_any(be, op, args, x, d, index, src, accum):
    """out = copy of x; out[index along d] = (+=) src over index's shape (scatter, scatter_add);
    src None: args' value."""
    out = be._copy_new(x, x.dtype)
    tgt = _acc_target(be, out, accum)
    xs = tuple(x.shape) if x.ndim else (1,)
    ish = tuple(index.shape) if index.ndim else (1,)
    iv, tv = index.reshape(ish), tgt.reshape(xs)
    sst = list(src.stride()[:len(ish)]) if src.ndim else [0] * len(ish)
    if not _scatter(be, tv, src, iv, ish, _zeroed(tv.stride(), d), iv.stride(), sst,
                    tv.stride()[d], xs[d], accum):
        return NotImplemented
    if tgt is not out:
        be._copy_into(out, tgt)
    return out


def _scatter_checks(be, op, args, x, dim, index, src):
    """None when the fast path applies, else the op's result (its error) or NotImplemented."""
    if not _ok_dtype(x):
        return NotImplemented
    d = normalize_dim(dim, x.ndim)
    if index.numel() == 0:
        return None
    xs = tuple(x.shape) if x.ndim else (1,)
    (mm,) = _minmax(be, [index])
    if not _in_range(mm, 0, xs[d]):   # negatives refused, as PyTorch (the CPU kernel raises)
        return _raise(be, op, args)
    return None


@_index_kernel("scatter")
def _scatter_op(be, op, x, dim, index, src=None, value=None, reduce=None):
    args = (x, dim, index, src, value, reduce)
    if reduce not in (None, "add"):
        return NotImplemented  # multiply: no atomic multiply (the CPU kernel raises for others)
    if src is not None and not isinstance(src, Tensor):   # x.scatter(d, i, 2.5)
        src, value = None, src
    r = _scatter_checks(be, op, args, x, dim, index, src)
    if r is not None:
        return r
    if index.numel() == 0:
        return be._copy_new(x, x.dtype)
    if src is None:
        src = _scalar(be, value, x.dtype, x.device)
    return _scatter_any(be, op, args, x, normalize_dim(dim, x.ndim), index, src,
                        reduce == "add")


@_index_kernel("scatter_add")
def _scatter_add(be, op, x, dim, index, src):
    args = (x, dim, index, src)
    r = _scatter_checks(be, op, args, x, dim, index, src)
    if r is not None:
        return r
    if index.numel() == 0:
        return be._copy_new(x, x.dtype)
    return _scatter_any(be, op, args, x, normalize_dim(dim, x.ndim), index, src, True)


def _index_dim(be, op, args, x, dim, index, source, accum, ndim_err=IndexError):
    """index_add / index_copy / index_fill: out = copy of x with out[..., index[k], ...] =
    (+=) source[..., k, ...] along dim (source None: args[-1] is the fill value)."""
    if not _ok_dtype(x) or x.ndim == 0:
        return NotImplemented
    d = normalize_dim(dim, x.ndim)
    k = index.numel()
    if source is not None:
        if source.ndim != x.ndim:
            return NotImplemented
        if any(source.shape[i] != x.shape[i] for i in range(x.ndim) if i != d):
            return NotImplemented
    n = x.shape[d]
    (mm,) = _minmax(be, [index])
    # index_fill wraps negative indices; index_add / index_copy refuse them (as PyTorch)
    if not _in_range(mm, -n if source is None else 0, n):
        return _raise(be, op, args)
    out = be._copy_new(x, x.dtype)
    shape = tuple(x.shape[:d]) + (k,) + tuple(x.shape[d + 1:])
    if source is None:
        source = _scalar(be, args[-1], x.dtype, x.device)
        sst = [0] * x.ndim
    else:
        sst = source.stride()
    tgt = _acc_target(be, out, accum)
    ist = index.stride()[0] if index.ndim else 0
    if not _scatter(be, tgt, source, index, shape, _zeroed(tgt.stride(), d),
                    _along(x.ndim, d, ist), sst, tgt.stride()[d], n, accum):
        return NotImplemented
    if tgt is not out:
        be._copy_into(out, tgt)
    return out


@_index_kernel("index_add")
def _index_add(be, op, x, dim, index, source, alpha=1):
    args = (x, dim, index, source, alpha)
    if alpha != 1 and source.dtype is x.dtype and x.dtype in be_dtypes():
        if isinstance(alpha, float) and not x.dtype.is_floating_point:
            return NotImplemented
        source = source * alpha
    return _index_dim(be, op, args, x, dim, index, source, True)


@_index_kernel("index_copy")
def _index_copy(be, op, x, dim, index, source):
    return _index_dim(be, op, (x, dim, index, source), x, dim, index, source, False)


@_index_kernel("index_fill.int_Scalar")
def _index_fill(be, op, x, dim, index, value):
    if isinstance(value, complex):
        return NotImplemented
    return _index_dim(be, op, (x, dim, index, value), x, dim, index, None, False)


# ---- scatter_reduce ----------------------------------------------------------------------------
_REDUCE_OP = {"sum": 0, "mean": 0, "amax": 1, "amin": 2, "prod": 3}
_RED_NATIVE = (D.float32, D.float64, D.int32, D.int64)   # atomics (and CAS) in place


def _scatter_red(be, dst, src, idx, shape, a, b, c, scale, nsize, red):
    """dst[c . a + idx[c . b] * scale] (red)= src[c . c]: 1 max, 2 min, 3 prod (CAS loop)."""
    _same_device(dst, src, idx)
    lay = _layout(shape, a, b, c)
    if lay is None:
        return False
    n, sizes, (A, B, C), nd = lay
    import triton.language as tl
    it = tl.int64 if dst.dtype.itemsize == 8 else tl.int32
    if n:
        _launch(be, _lazy("indexing_tl").scatter_reduce_nd, (-(-n // _BLOCK),),
                [dst, src, idx, n, *sizes, *A, *B, *C, scale, nsize, _span(dst)], (),
                {"OP": red, "IT": it, "NDIM": nd, "I64": _wide(n, dst, src, idx),
                 "BLOCK": _BLOCK})
    return True


@_index_kernel("scatter_reduce.two")
def _scatter_reduce(be, op, x, dim, index, src, reduce, include_self=True):
    args = (x, dim, index, src, reduce, include_self)
    r = _scatter_checks(be, op, args, x, dim, index, src)
    if r is not None:
        return r
    if x.dtype is D.bool:
        return NotImplemented
    out = be._copy_new(x, x.dtype)
    if index.numel() == 0:
        return out
    d = normalize_dim(dim, x.ndim)
    # float16/bfloat16 reduce in float32 (as the CPU kernel), small ints in int64
    work = out if x.dtype in _RED_NATIVE else be._copy_new(
        out, D.float32 if x.dtype.is_floating_point else D.int64)
    xs = tuple(x.shape) if x.ndim else (1,)
    ish = tuple(index.shape) if index.ndim else (1,)
    iv, wv = index.reshape(ish), work.reshape(xs)
    sst = list(src.stride()[:len(ish)]) if src.ndim else [0] * len(ish)
    a, b, scale = _zeroed(wv.stride(), d), iv.stride(), wv.stride()[d]
    if not include_self:
        # sum/mean/prod: the scattered slots start from the identity; amax/amin: from one of
        # the values scattered there (a plain scatter: whichever lands), which the max / min
        # over all of them then includes anyway (no -inf or integer extremes to fill)
        if reduce in ("sum", "mean", "prod"):
            seed, sst0 = _scalar(be, 1 if reduce == "prod" else 0, work.dtype, x.device), \
                [0] * len(ish)
        else:
            seed, sst0 = src, sst
        if not _scatter(be, wv, seed, iv, ish, a, b, sst0, scale, xs[d], False):
            return NotImplemented
    red = _REDUCE_OP[reduce]
    ok = (_scatter(be, wv, src, iv, ish, a, b, sst, scale, xs[d], True) if red == 0 else
          _scatter_red(be, wv, src, iv, ish, a, b, sst, scale, xs[d], red))
    if not ok:
        return NotImplemented
    if reduce == "mean":   # divided by the number of values reduced into each slot
        cnt = be._new(xs, D.int64, x.device)
        be.fill_(cnt, 1 if include_self else 0)
        one = _scalar(be, 1, D.int64, x.device)
        _scatter(be, cnt, one, iv, ish, _zeroed(cnt.stride(), d), b, [0] * len(ish),
                 cnt.stride()[d], xs[d], True)
        cnt = cnt.clamp(min=1).reshape(tuple(work.shape))
        work = work / cnt if work.dtype.is_floating_point else work // cnt
    if work is not out:
        be._copy_into(out, work)
    return out
