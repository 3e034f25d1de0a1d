"""GPU kernels: sorting, selection, scans and the reductions beyond sum/mean/amax/amin/argmax.

`cuda_kernel` fills the op entries' cuda slots with kernels `f(backend, op, *args)`
(NotImplemented declines a call). HOST lists the ops of this family that still run their CPU
kernel on host copies, with the reason (test_cuda_opdb.py holds the backend to it).

Layout: the reduced (or sorted) dims are moved last and made contiguous by _ops._rows, so every
kernel in _kernels_sort sees (R, C) rows, one program a row (looping over blocks for long rows).
Scans along a non-last dim walk the dim with coalesced loads across the trailing dims instead.

Sorting (sort, argsort, topk and, through sort, kthvalue/median/nanmedian):
- values of <= 32 bits, rows up to SORT_BLOCK_MAX (4096): one tl.sort of a padded power-of-two
  block of int64 keys (order-preserving 32-bit key << 32 | index: stable, with indices).
- topk (k <= 1024) of longer rows of such values: the top k of each 4096 chunk by the same
  kernel, then the top k of those candidates (repeated while more than 4096).
- 64-bit values, or rows up to RANK_MAX (32768): a rank sort (each element counts the elements
  ordered before it; O(C^2) compares a row, spread over C / 64 programs: slow, 2 ms for a
  1024 x 1024 float64 sort on an H100 against PyTorch's 0.09 ms).
- longer rows: host copies (NotImplemented), the documented fallback.

mode, quantile/nanquantile and unique/unique(dim)/unique_consecutive are compositions of the GPU
ops above and of other families (gather, cumsum, nonzero, index_select, scatter), no kernels of
their own: their sorts have the limits above (a flat unique of more than RANK_MAX elements sorts on
host copies), unique(dim) sorts once per column of the slices (stable, last column first), and
unique* read their output size back once (nonzero), as PyTorch does.
"""
from __future__ import annotations

import math
import warnings

from ember import _dtype as D

from ._ops import _ACC, _cont, _launch, _launch_rows, _lazy, _rows, cuda_kernel

SORT_BLOCK_MAX = 4096
RANK_MAX = 32768
_RB = 1024           # block of the row loops
_SMALL32 = None      # dtypes whose values fit the packed 32-bit sort key (filled lazily)


def _k():
    return _lazy("_kernels_sort")


def _small32():
    global _SMALL32
    if _SMALL32 is None:
        _SMALL32 = {D.float32, D.float16, D.bfloat16, D.int32, D.int16, D.int8, D.uint8, D.bool}
    return _SMALL32


def _ok(*dts):
    return all(d in _ACC for d in dts)


def _rblock(C):
    return max(16, min(_RB, 1 << max(C - 1, 0).bit_length()))


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
        _launch_rows(be, _k().row_reduce2, flat, part, R * P, chunk,
                     {"KIND": kind, "ACC": acc, "SQRT": sqrt, "BLOCK": _rblock(chunk)},
                     (float(divisor), float(p)))
        rows, C, kind = part, P, _SPLIT[kind]
        acc = _ACC[pdt]
    _launch_rows(be, _k().row_reduce2, rows, out, R, C,
                 {"KIND": kind, "ACC": acc, "SQRT": sqrt, "BLOCK": _rblock(C)},
                 (float(divisor), float(p)))
    return out


# row reductions that split long rows: kind of the first pass -> kind combining its partials
# (prod, nansum, all, any, logsumexp, norms 2/1/inf/-inf, 0 -> a float sum of counts, p).
# count_nonzero is not split: its int64 partials would need an integer sum kind (nansum's
# kernel is float-typed: Triton refuses the int64 accumulator on the GPU)
_SPLIT = {1: 1, 2: 2, 3: 3, 4: 4, 6: 6, 10: 10, 11: 11, 12: 12, 13: 13, 14: 2, 15: 15}


def _dims(dim, ndim):
    from ember._ops.reduction import reduce_dims
    return reduce_dims(dim, ndim) if ndim else ()


def _var_any(sqrt):
    def f(be, op, x, dim=None, unbiased=None, keepdim=False, correction=None):
        from ember._ops.reduction import _var_args
        m = op.meta(x, dim, unbiased, keepdim, correction)    # PyTorch's checks and dtype
        if not _ok(x.dtype, m.dtype):
            return NotImplemented
        dims, c = _var_args(x, dim, unbiased, correction)
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
        from ._ops import _reduce
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
    from ember._ops.reduction import _norm_p
    m = op.meta(x, p, dim, keepdim, dtype)
    if not _ok(x.dtype, m.dtype):
        return NotImplemented
    pv = _norm_p(p)
    if dtype is not None and x.dtype is not m.dtype:
        x = be._copy_new(x, m.dtype)
    kind = {2.0: 10, 1.0: 11, math.inf: 12, -math.inf: 13, 0.0: 14}.get(pv, 15)
    if x.numel() == 0 and kind in (12, 13):
        return NotImplemented  # the CPU kernel raises PyTorch's IndexError
    return _row_reduce(be, x, _dims(dim, x.ndim), m.shape, m.dtype, kind, p=pv, empty=0,
                       acc_dtype=m.dtype)


@cuda_kernel("trace")
def _trace(be, op, x):
    m = op.meta(x)
    if not _ok(x.dtype, m.dtype):
        return NotImplemented
    out = be._new((), m.dtype, x.device)
    n = min(x.shape)
    if n == 0:
        be.fill_(out, 0)
        return out
    x = _cont(be, x)
    _launch(be, _k().diag_sum, (1,), [x, out, n, x.shape[1]], (),
            {"ACC": _ACC[m.dtype], "BLOCK": _rblock(n)})
    return out


def _extreme_dim(is_max):
    def f(be, op, x, dim, keepdim=False):
        from ember._size import normalize_dim
        mv, mi = op.meta(x, dim, keepdim)
        if not _ok(x.dtype):
            return NotImplemented
        vals = be._new(tuple(mv.shape), x.dtype, x.device)
        idx = be._new(tuple(mi.shape), D.int64, x.device)
        if x.ndim == 0:
            be._copy_into(vals, x)
            be.fill_(idx, 0)
            return vals, idx
        d = normalize_dim(dim, x.ndim)
        if x.shape[d] == 0:
            return NotImplemented  # the CPU kernel raises PyTorch's IndexError
        if vals.numel() == 0:
            return vals, idx
        rows, R, C = _rows(be, x, (d,))
        _launch(be, _k().row_extreme, (R,), [rows, vals, idx, C], (),
                {"MAX": is_max, "ACC": _ACC[x.dtype], "BLOCK": _rblock(C)})
        return vals, idx
    return f


# ---- scans -------------------------------------------------------------------------------------
def _scan(be, x, dim, kind, out_dtype):
    """(out, indices or None) of scan `kind` (0 cumsum, 1 cumprod, 2 logcumsumexp, 3 cummax,
    4 cummin) along dim, in out_dtype."""
    from ember._size import normalize_dim
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
    K, acc = _k(), _ACC[out_dtype]
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


# ---- sorting and selection ---------------------------------------------------------------------
def _sort_rows(be, rows, R, C, desc, outn):
    """(values, indices) (R, outn): the first outn of each row of the contiguous (R, C) rows
    sorted stably; None when the row is too long for the GPU paths."""
    vals = be._new((R, outn), rows.dtype, rows.device)
    idx = be._new((R, outn), D.int64, rows.device)
    if R == 0 or outn == 0:
        return vals, idx
    K = _k()
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
    _launch(be, _k().row_sort_packed, (R, nch),
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
    from ember._size import normalize_dim
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
    from ember._size import normalize_dim
    op.meta(x, k, dim, largest, sorted)   # PyTorch's k check
    if not _ok(x.dtype) or x.ndim == 0:
        return NotImplemented
    d = normalize_dim(dim, x.ndim)
    r = _sort_along(be, x, d, largest, k)
    return NotImplemented if r is None else r


def _select(be, x, dim, keepdim, mode, pos=0):
    """(values, indices) at a sorted position along dim: pos (mode 0), median (1), nanmedian
    (2)."""
    from ember._size import normalize_dim
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
        _launch(be, _k().row_pick, (R,), [r[0], r[1], vals, idx, C, pos], (),
                {"MODE": mode, "ACC": _ACC[x.dtype], "BLOCK": _rblock(C)})
    return vals, idx


@cuda_kernel("kthvalue")
def _kthvalue(be, op, x, k, dim=-1, keepdim=False):
    from ember._size import normalize_dim
    op.meta(x, k, dim, keepdim)
    if not _ok(x.dtype) or x.ndim == 0:
        return NotImplemented
    if not 1 <= k <= x.shape[normalize_dim(dim, x.ndim)]:
        return NotImplemented  # the CPU kernel raises PyTorch's error
    r = _select(be, x, dim, keepdim, 0, k - 1)
    return NotImplemented if r is None else r


def _median_dim(mode):
    def f(be, op, x, dim, keepdim=False):
        from ember._size import normalize_dim
        op.meta(x, dim, keepdim)
        if not _ok(x.dtype) or x.ndim == 0 or x.shape[normalize_dim(dim, x.ndim)] == 0:
            return NotImplemented  # 0-d: a copy; empty dim: the CPU kernel raises
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


# ---- compositions of GPU ops: mode, quantile, unique ------------------------------------------
# These call ember ops (sort, cummax, gather, cumsum, nonzero, ...) on the cuda tensors: each runs
# its own GPU kernel, no new Triton code. unique* read their output size back once (nonzero), as
# PyTorch does.
def _em():
    import ember
    return ember


@cuda_kernel("mode")
def _mode(be, op, x, dim=-1, keepdim=False):
    """The smallest of the most frequent values of each row, at its last position (core's CPU
    kernel): runs of the sorted row, their lengths by a running max of run starts."""
    from ember._size import normalize_dim
    E = _em()
    vm, im = op.meta(x, dim, keepdim)
    if not _ok(x.dtype):
        return NotImplemented
    if x.ndim == 0:
        return be._copy_new(x, x.dtype), be.fill_(be._new((), D.int64, x.device), 0)
    d = normalize_dim(dim, x.ndim)
    n = x.shape[d]
    if n == 0:
        return NotImplemented  # the CPU kernel raises PyTorch's IndexError
    if x.numel() == 0:
        return be._new(tuple(vm.shape), x.dtype, x.device), \
            be._new(tuple(im.shape), D.int64, x.device)
    rows = x.movedim(d, -1)
    srt = rows.sort(-1)[0]
    pos = E.arange(n, dtype=D.int64, device=x.device)
    starts = E.cat([E.ones(tuple(srt.shape[:-1]) + (1,), dtype=D.bool, device=x.device),
                    srt[..., 1:] != srt[..., :-1]], -1)
    first = E.where(starts, pos, E.zeros((), dtype=D.int64, device=x.device)).cummax(-1)[0]
    runlen = pos - first + 1
    top = runlen == runlen.max(-1, keepdim=True)[0]    # (amax: floats only)
    best = E.where(top, pos, E.full((), n, dtype=D.int64, device=x.device)).min(-1, True)[0]
    vals = srt.gather(-1, best)                          # (..., 1)
    last = E.where(rows == vals, pos, E.full((), -1, dtype=D.int64, device=x.device)).max(-1)[0]
    last = E.where(last < 0, E.full((), n - 1, dtype=D.int64, device=x.device), last)  # all NaN
    vals = vals.squeeze(-1)
    if keepdim:
        vals, last = vals.unsqueeze(d), last.unsqueeze(d)
    return be._copy_new(vals, x.dtype), be._copy_new(last, D.int64)


def _quantile(ignore_nan):
    name = "nanquantile" if ignore_nan else "quantile"

    def f(be, op, x, q, dim=None, keepdim=False, interpolation="linear"):
        from ember._size import normalize_dim
        E = _em()
        op.meta(x, q, dim, keepdim, interpolation)     # PyTorch's checks
        qt = q if isinstance(q, E.Tensor) else E.full((), q, dtype=x.dtype, device=x.device)
        if qt.device != x.device:
            return NotImplemented
        if isinstance(q, E.Tensor) and qt.numel():
            # the value check reads one flag back, as PyTorch's (a float q: checked by the meta)
            if bool((~((qt >= 0) & (qt <= 1))).any().item()):
                raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
        a = x.reshape(-1) if dim is None or x.ndim == 0 else x.movedim(normalize_dim(dim, x.ndim),
                                                                      -1)
        n = a.shape[-1]
        vals = a.sort(-1)[0]                                 # NaN last
        nan = a.isnan()
        valid = n - nan.sum(-1)                              # (...,) int64
        m = qt.numel()
        # positions in float64 (core's numpy promotes q * count to float64), q rounded to x's
        # dtype first
        qq = qt.reshape(-1).double()                         # (m,)
        if ignore_nan:
            span = (valid.clamp(min=1) - 1).double().unsqueeze(-1)      # (..., 1)
        else:
            span = E.full((), float(n - 1), dtype=D.float64, device=x.device)
        rank = qq * span                                     # (..., m) or (m,)
        rank = rank.expand(tuple(a.shape[:-1]) + (m,))
        lo, hi = rank.floor(), rank.ceil()
        if interpolation == "lower":
            hi, w = lo, rank * 0
        elif interpolation == "higher":
            lo, w = hi, rank * 0 + 1
        elif interpolation == "nearest":
            lo = hi = rank.round()                           # half to even
            w = rank * 0
        else:
            w = rank * 0 + 0.5 if interpolation == "midpoint" else rank - lo
        w = w.to(x.dtype)
        v_lo = vals.gather(-1, lo.long().contiguous())
        v_hi = vals.gather(-1, hi.long().contiguous())
        r = v_lo + (v_hi - v_lo) * w                         # (..., m)
        bad = (valid == 0) if ignore_nan else (valid < n)
        r = E.where(bad.unsqueeze(-1), E.full((), math.nan, dtype=x.dtype, device=x.device), r)
        r = r.movedim(-1, 0)                                 # (m, ...)
        if keepdim:
            if dim is None:
                r = r.reshape((m,) + (1,) * x.ndim)
            else:
                r = r.unsqueeze(normalize_dim(dim, x.ndim) + 1 if x.ndim else 1)
        if not isinstance(q, E.Tensor) or q.ndim == 0:
            r = r[0]
        return be._copy_new(r, x.dtype)
    return f


def _runs(E, change, n, dev):
    """(start positions (k,), inverse (n,), counts (k,)) of the runs that `change` (n - 1 flags:
    element i + 1 starts a new run) cuts n elements into; one read back (nonzero)."""
    starts = E.cat([E.ones((1,), dtype=D.bool, device=dev), change])
    inv = starts.long().cumsum(0) - 1
    first = starts.nonzero().reshape(-1)
    ends = E.cat([first[1:], E.full((1,), n, dtype=D.int64, device=dev)])
    return first, inv, ends - first


def _empty_unique(be, x, inv_shape, u_shape):
    return (be._new(u_shape, x.dtype, x.device), be._new(inv_shape, D.int64, x.device),
            be._new((0,), D.int64, x.device))


@cuda_kernel("_unique2")
def _unique2(be, op, x, sorted=True, return_inverse=False, return_counts=False):  # noqa: A002
    """Sorted unique values (NaNs all distinct, last), inverse and counts (core's CPU kernel
    returns all three)."""
    E = _em()
    if not _ok(x.dtype):
        return NotImplemented
    n = x.numel()
    if n == 0:
        return _empty_unique(be, x, tuple(x.shape), (0,))
    srt, order = x.reshape(-1).sort(0, stable=True)
    first, inv_s, counts = _runs(E, srt[1:] != srt[:-1], n, x.device)
    inv = E.empty((n,), dtype=D.int64, device=x.device).scatter(0, order, inv_s)
    return (be._copy_new(srt.index_select(0, first), x.dtype), inv.reshape(tuple(x.shape)),
            be._copy_new(counts, D.int64))


@cuda_kernel("unique_dim")
def _unique_dim(be, op, x, dim, sorted=True, return_inverse=False,  # noqa: A002
                return_counts=False):
    """Unique slices along dim in lexicographic order (core's numpy.unique(axis=)): stable sorts
    by each column from the last to the first (one sort a column), then runs of equal slices."""
    from ember._size import normalize_dim
    E = _em()
    d = normalize_dim(dim, x.ndim)
    if not _ok(x.dtype) or x.numel() == 0:
        return NotImplemented  # empty: numpy's own rules, on host copies
    n = x.shape[d]
    rows = x.movedim(d, 0).reshape(n, -1)                # (n, k)
    k = rows.shape[1]
    perm = E.arange(n, dtype=D.int64, device=x.device)
    for j in range(k - 1, -1, -1):
        col = rows[:, j].index_select(0, perm)
        perm = perm.index_select(0, col.sort(0, stable=True)[1])
    srt = rows.index_select(0, perm)
    change = (srt[1:] != srt[:-1]).any(1)
    first, inv_s, counts = _runs(E, change, n, x.device)
    inv = E.empty((n,), dtype=D.int64, device=x.device).scatter(0, perm, inv_s)
    u = x.index_select(d, perm.index_select(0, first))
    return be._copy_new(u, x.dtype), inv, be._copy_new(counts, D.int64)


@cuda_kernel("unique_consecutive")
def _unique_consecutive(be, op, x, return_inverse=False, return_counts=False, dim=None):
    """Runs of equal consecutive elements (or slices along dim): values, inverse, counts."""
    from ember._size import normalize_dim
    E = _em()
    if dim is not None:
        d = normalize_dim(dim, x.ndim)
    if not _ok(x.dtype):
        return NotImplemented
    if dim is None:
        n = x.numel()
        if n == 0:
            return _empty_unique(be, x, tuple(x.shape), (0,))
        a = x.reshape(-1)
        first, inv, counts = _runs(E, a[1:] != a[:-1], n, x.device)
        return (be._copy_new(a.index_select(0, first), x.dtype), inv.reshape(tuple(x.shape)),
                be._copy_new(counts, D.int64))
    n = x.shape[d]
    if x.numel() == 0:
        return NotImplemented  # core's numpy rules for empty slices, on host copies
    a = x.movedim(d, 0)
    rest = x.numel() // n
    change = (a[1:] != a[:-1]).reshape(n - 1, rest).any(1)
    first, inv, counts = _runs(E, change, n, x.device)
    return be._copy_new(x.index_select(d, first), x.dtype), inv, be._copy_new(counts, D.int64)


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
cuda_kernel("median.dim")(_median_dim(1))
cuda_kernel("nanmedian.dim")(_median_dim(2))
cuda_kernel("median")(_median_all(1))
cuda_kernel("nanmedian")(_median_all(2))
cuda_kernel("quantile")(_quantile(False))
cuda_kernel("nanquantile")(_quantile(True))

HOST: dict[str, str] = {}
