"""GPU kernels for sorting and selection: sort, topk, kthvalue, median/nanmedian, bincount and
histc.

`cuda_kernel` fills the op entries' cuda slots with kernels `f(backend, op, *args)`
(NotImplemented declines a call). HOST lists the ops of this family that still run their CPU
kernel on host copies, with the reason (test_cuda_opdb.py holds the backend to it).

Layout: the reduced (or sorted) dims are moved last and made contiguous by base._rows, so every
kernel in sorting_tl sees (R, C) rows, one program a row (looping over blocks for long rows).

Sorting (sort, argsort, topk and, through sort, kthvalue/median/nanmedian):
- values of <= 32 bits, rows up to SORT_BLOCK_MAX (4096): one tl.sort of a padded power-of-two
  block of int64 keys (order-preserving 32-bit key << 32 | index: stable, with indices).
- topk (k <= 1024) of longer rows of such values: the top k of each 4096 chunk by the same
  kernel, then the top k of those candidates (repeated while more than 4096).
- 64-bit values, or rows up to RANK_MAX (32768): a rank sort (each element counts the elements
  ordered before it; O(C^2) compares a row, spread over C / 64 programs: slow, 2 ms for a
  1024 x 1024 float64 sort on an H100 against PyTorch's 0.09 ms).
- longer rows: host copies (NotImplemented), the documented fallback.

mode, quantile/nanquantile and unique/unique(dim)/unique_consecutive have no kernel here: their
entries' decompositions (core's `_ops/_sorting_decomp.py`) run through the sorts above and the
other families' kernels, with the sorts' limits (a flat unique of more than RANK_MAX elements
sorts on host copies).
"""
from __future__ import annotations

import math

import numpy as np

from ember._ops.registry import Tensor
from ember._ops.registry import dtypes as D

from .base import _ACC, _cont, _launch, _lazy, _ok, _rblock, _rows, be_dtypes, cuda_kernel
from .indexing import _BLOCK, _INTS, _index_kernel, _minmax, _ok_dtype, _raise

SORT_BLOCK_MAX = 4096
RANK_MAX = 32768
_SMALL32 = None      # dtypes whose values fit the packed 32-bit sort key (filled lazily)



def _small32():
    global _SMALL32
    if _SMALL32 is None:
        _SMALL32 = {D.float32, D.float16, D.bfloat16, D.int32, D.int16, D.int8, D.uint8, D.bool}
    return _SMALL32


# ---- sorting and selection ---------------------------------------------------------------------
def _sort_rows(be, rows, R, C, desc, outn):
    """(values, indices) (R, outn): the first outn of each row of the contiguous (R, C) rows
    sorted stably; None when the row is too long for the GPU paths."""
    vals = be._new((R, outn), rows.dtype, rows.device)
    idx = be._new((R, outn), D.int64, rows.device)
    if R == 0 or outn == 0:
        return vals, idx
    K = _lazy("sorting_tl")
    packed = rows.dtype in _small32()
    if packed and C <= SORT_BLOCK_MAX:
        _packed(be, rows, vals, idx, R, C, desc, outn, C, 1)
    elif packed and outn <= SORT_BLOCK_MAX // 4:
        # topk of long rows: the first outn of each SORT_BLOCK_MAX chunk (one launch), then of
        # the candidates (chunk order keeps ties in index order), repeated while they are many
        cand = None
        while C > SORT_BLOCK_MAX:
            nch = -(-C // SORT_BLOCK_MAX)
            cv = be._new((R, nch * outn), rows.dtype, rows.device)
            ci = be._new((R, nch * outn), D.int64, rows.device)
            if 0 < C % SORT_BLOCK_MAX < outn:  # a short last chunk: pad with the last in order
                be.fill_(cv, _worst(rows.dtype, desc))
            _packed(be, rows, cv, ci, R, C, desc, outn, SORT_BLOCK_MAX, nch, cand)
            rows, cand, C = cv, ci, nch * outn
        _packed(be, rows, vals, idx, R, C, desc, outn, C, 1, cand)
    elif C <= RANK_MAX:
        BI = 64
        _launch(be, K.row_sort_rank, (R, -(-C // BI)), [rows, vals, idx, C, outn], (),
                {"DESC": bool(desc), "ACC": _ACC[rows.dtype], "BI": BI, "BJ": 64})
    else:
        return None
    return vals, idx


def _worst(dt, desc):
    if dt.is_floating_point:
        return -math.inf if desc else math.nan
    if dt is D.bool:
        return not desc
    info = {D.int32: 31, D.int16: 15, D.int8: 7}
    if dt is D.uint8:
        return 0 if desc else 255
    return -(1 << info[dt]) if desc else (1 << info[dt]) - 1


def _packed(be, rows, vals, idx, R, C, desc, outn, ch, nch, in_idx=None):
    _launch(be, _lazy("sorting_tl").row_sort_packed, (R, nch),
            [rows, vals, idx, C, outn, ch, in_idx if in_idx is not None else idx], (),
            {"DESC": bool(desc), "FLOAT": rows.dtype.is_floating_point,
             "HAS_IDX": in_idx is not None, "BLOCK": max(16, 1 << (ch - 1).bit_length())})


def _back(be, t, shape, d, nd):
    """(R, k) rows -> the op's layout: the sorted dim back at d (contiguous)."""
    t = t.reshape(shape[:d] + shape[d + 1:] + (shape[d],))
    if d != nd - 1:
        t = be._copy_new(t.movedim(-1, d), t.dtype)
    return t


def _sort_along(be, x, d, desc, outn):
    """(values, indices) of x sorted along d, first outn kept, in x's layout; or None."""
    moved = x.movedim(d, -1) if d != x.ndim - 1 else x
    rows, R, C = _rows(be, moved, (moved.ndim - 1,))
    r = _sort_rows(be, rows, R, C, desc, outn)
    if r is None:
        return None
    shape = tuple(x.shape[:d]) + (outn,) + tuple(x.shape[d + 1:])
    return _back(be, r[0], shape, d, x.ndim), _back(be, r[1], shape, d, x.ndim)


@cuda_kernel("sort")
def _sort(be, op, x, dim=-1, descending=False, stable=False):
    from ember._ops.registry import normalize_dim
    op.meta(x, dim, descending, stable)
    if not _ok(x.dtype):
        return NotImplemented
    if x.ndim == 0:
        vals = be._copy_new(x, x.dtype)
        idx = be._new((), D.int64, x.device)
        be.fill_(idx, 0)
        return vals, idx
    d = normalize_dim(dim, x.ndim)
    r = _sort_along(be, x, d, descending, x.shape[d])
    return NotImplemented if r is None else r


@cuda_kernel("topk")
def _topk(be, op, x, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    from ember._ops.registry import normalize_dim
    op.meta(x, k, dim, largest, sorted)   # PyTorch's k check
    if not _ok(x.dtype) or x.ndim == 0:
        return NotImplemented
    d = normalize_dim(dim, x.ndim)
    r = _sort_along(be, x, d, largest, k)
    return NotImplemented if r is None else r


def _select(be, x, dim, keepdim, mode, pos=0):
    """(values, indices) at a sorted position along dim: pos (mode 0), median (1), nanmedian
    (2)."""
    from ember._ops.registry import normalize_dim
    d = normalize_dim(dim, x.ndim)
    C = x.shape[d]
    moved = x.movedim(d, -1) if d != x.ndim - 1 else x
    rows, R, _ = _rows(be, moved, (moved.ndim - 1,))
    r = _sort_rows(be, rows, R, C, False, C)
    if r is None:
        return None
    shape = tuple(1 if i == d else s for i, s in enumerate(x.shape)) if keepdim else \
        tuple(s for i, s in enumerate(x.shape) if i != d)
    vals = be._new(shape, x.dtype, x.device)
    idx = be._new(shape, D.int64, x.device)
    if R:
        _launch(be, _lazy("sorting_tl").row_pick, (R,), [r[0], r[1], vals, idx, C, pos], (),
                {"MODE": mode, "ACC": _ACC[x.dtype], "BLOCK": _rblock(C)})
    return vals, idx


@cuda_kernel("kthvalue")
def _kthvalue(be, op, x, k, dim=-1, keepdim=False):
    op.meta(x, k, dim, keepdim)
    if not _ok(x.dtype) or x.ndim == 0:
        return NotImplemented
    r = _select(be, x, dim, keepdim, 0, k - 1)
    return NotImplemented if r is None else r


def _median_dim(mode):
    def f(be, op, x, dim, keepdim=False):
        op.meta(x, dim, keepdim)
        if not _ok(x.dtype) or x.ndim == 0:   # (an empty dim: the meta raised)
            return NotImplemented  # 0-d: a copy
        r = _select(be, x, dim, keepdim, mode)
        return NotImplemented if r is None else r
    return f


def _median_all(mode):
    def f(be, op, x):
        if not _ok(x.dtype) or x.numel() == 0:
            return NotImplemented
        r = _select(be, x.reshape(-1), 0, False, mode)
        return NotImplemented if r is None else r[0]
    return f


cuda_kernel("median.dim")(_median_dim(1))
cuda_kernel("nanmedian.dim")(_median_dim(2))
cuda_kernel("median")(_median_all(1))
cuda_kernel("nanmedian")(_median_all(2))

HOST: dict[str, str] = {}


# ---- bincount / histc --------------------------------------------------------------------------
@_index_kernel("bincount")
def _bincount(be, op, x, weights=None, minlength=0):
    args = (x, weights, minlength)
    if (minlength < 0 or x.ndim != 1 or x.dtype not in _INTS
            or (weights is not None and (weights.ndim != 1 or weights.shape[0] != x.shape[0]))):
        return _raise(be, op, args)
    if weights is not None and not _ok_dtype(weights):
        return NotImplemented
    n = x.numel()
    (mm,) = _minmax(be, [x]) if n else [(0, -1)]   # the one sync: the output's size
    if n and mm[0] < 0:
        return _raise(be, op, args)
    size = max(minlength, mm[1] + 1)
    acc_dt = D.int64 if weights is None else D.float64
    out = be._new((size,), acc_dt, x.device)
    be.fill_(out, 0)
    if n:
        xc = _cont(be, x)
        w = xc if weights is None else be._copy_new(weights, D.float64)
        _launch(be, _lazy("indexing_tl").bincount, (-(-n // _BLOCK),), [xc, w, out, n, size], (),
                {"HAS_W": weights is not None, "BLOCK": _BLOCK})
    if weights is not None and weights.dtype is D.float32:
        return be._copy_new(out, D.float32)
    return out


@_index_kernel("histc")
def _histc(be, op, x, bins=100, min=0, max=0):  # noqa: A002
    if x.dtype not in be_dtypes():
        return NotImplemented
    acc_dt = D.float64 if x.dtype is D.float64 else D.float32
    anp = acc_dt.np
    lo, hi = anp.type(min), anp.type(max)
    xc = _cont(be, x).reshape(-1)
    n = xc.numel()
    if lo == hi and n:   # the data's range: one read, as PyTorch's
        r = be._new((2,), acc_dt, x.device)
        be._copy_into(r[0], xc.amin())
        be._copy_into(r[1], xc.amax())
        lo, hi = be.to_host(r)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)):  # the data's range (the meta checked min/max)
        raise RuntimeError(f"torch.histc: range of [{lo}, {hi}] is not finite")
    lohi = be.from_tensor(Tensor._from_np(np.array([lo, hi], anp), acc_dt), x.device)
    cnt = be._new((bins,), D.int64, x.device)
    be.fill_(cnt, 0)
    if n:
        _launch(be, _lazy("indexing_tl").histc, (-(-n // _BLOCK),), [xc, lohi, cnt, n, bins], (),
                {"BLOCK": _BLOCK})
    # through float32: the int -> bfloat16 copy is wrong on the fake device (the interpreter)
    return be._copy_new(be._copy_new(cnt, D.float32), x.dtype)
