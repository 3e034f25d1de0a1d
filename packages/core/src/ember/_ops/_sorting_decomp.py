"""Decompositions of sorting-family ops into other ops (sort, gather, cummax, cumsum, nonzero,
index_select, scatter): mode, quantile/nanquantile, unique, unique(dim), unique_consecutive.

They are the entries' `decomp=`: a device without its own kernel (cuda, any plugin) runs them
through its kernels for the smaller ops; the CPU keeps its numpy kernels, and the op table's
"decomposition vs kernel" test holds the two to the same values. The unique ops read their output
size back once (nonzero), as PyTorch's CUDA ops do; a tensor q of quantile reads one flag back.
"""
from __future__ import annotations

import math

from .. import _dtype as D
from .._size import normalize_dim
from ._registry import FUNCTIONS as F


def mode(x, dim=-1, keepdim=False):
    """The smallest of the most frequent values of each row, at its last position (the CPU
    kernel's rule): runs of the sorted row, their lengths by a running max of the run starts."""
    from .sorting import mode_meta
    vm, im = mode_meta(x, dim, keepdim)                   # PyTorch's errors
    dev = x.device
    if x.ndim == 0:
        return x.clone(), F["zeros"]((), dtype=D.int64, device=dev)
    if x.numel() == 0:
        return (F["empty"](tuple(vm.shape), dtype=x.dtype, device=dev),
                F["empty"](tuple(im.shape), dtype=D.int64, device=dev))
    d = normalize_dim(dim, x.ndim)
    n = x.shape[d]
    rows = x.movedim(d, -1)                               # (..., n)
    srt = rows.sort(-1)[0]                                # NaN last
    pos = F["arange"](n, dtype=D.int64, device=dev)
    head = F["ones"](tuple(srt.shape[:-1]) + (1,), dtype=D.bool, device=dev)
    starts = F["cat"]([head, srt[..., 1:] != srt[..., :-1]], -1)
    zero = F["zeros"]((), dtype=D.int64, device=dev)
    first = F["where"](starts, pos, zero).cummax(-1)[0]   # start of each element's run
    runlen = pos - first + 1
    top = runlen == runlen.max(-1, keepdim=True)[0]
    best = F["where"](top, pos, F["full"]((), n, dtype=D.int64, device=dev)).min(-1, True)[0]
    vals = srt.gather(-1, best)                           # (..., 1)
    minus = F["full"]((), -1, dtype=D.int64, device=dev)
    last = F["where"](rows == vals, pos, minus).max(-1)[0]
    last = F["where"](last < 0, F["full"]((), n - 1, dtype=D.int64, device=dev), last)  # NaN
    vals = vals.squeeze(-1)
    if keepdim:
        vals, last = vals.unsqueeze(d), last.unsqueeze(d)
    return vals, last


def quantile(name, ignore_nan):
    """quantile / nanquantile as sort + gather + a linear blend, positions in float64 (the CPU
    kernel's numpy promotes q * count to float64; q rounded to x's dtype first)."""
    def decomp(x, q, dim=None, keepdim=False, interpolation="linear"):
        from .sorting import _quantile_check
        _quantile_check(name, x, q, interpolation)
        dev = x.device
        is_t = hasattr(q, "shape")
        qt = q if is_t else F["full"]((), q, dtype=x.dtype, device=dev)
        # the values of a tensor q: one flag read back, as PyTorch's (meta tensors hold none)
        if (is_t and qt.numel() and dev.type != "meta"
                and bool((~((qt >= 0) & (qt <= 1))).any().item())):
            raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
        a = x.reshape(-1) if dim is None or x.ndim == 0 else x.movedim(normalize_dim(dim, x.ndim),
                                                                      -1)
        n = a.shape[-1]
        vals = a.sort(-1)[0]                                 # NaN last
        valid = n - a.isnan().sum(-1)                        # (...,) int64
        m = qt.numel()
        qq = qt.to(x.dtype).reshape(-1).double()             # (m,)
        if ignore_nan:
            span = (valid.clamp(min=1) - 1).double().unsqueeze(-1)      # (..., 1)
        else:
            span = F["full"]((), float(n - 1), dtype=D.float64, device=dev)
        rank = (qq * span).expand(tuple(a.shape[:-1]) + (m,))          # (..., m)
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
        r = F["where"](bad.unsqueeze(-1), F["full"]((), math.nan, dtype=x.dtype, device=dev), r)
        r = r.movedim(-1, 0)                                 # (m, ...)
        if keepdim:
            if dim is None:
                r = r.reshape((m,) + (1,) * x.ndim)
            else:
                r = r.unsqueeze(normalize_dim(dim, x.ndim) + 1 if x.ndim else 1)
        return (r if is_t and q.ndim else r[0]).contiguous()
    return decomp


def _runs(change, n, dev):
    """(start positions (k,), inverse (n,), counts (k,)) of the runs that `change` (n - 1 flags:
    element i + 1 starts a new run) cuts n elements into; one read back (nonzero)."""
    starts = F["cat"]([F["ones"]((1,), dtype=D.bool, device=dev), change])
    inv = starts.long().cumsum(0) - 1
    first = starts.nonzero().reshape(-1)
    ends = F["cat"]([first[1:], F["full"]((1,), n, dtype=D.int64, device=dev)])
    return first, inv, ends - first


def _empty(x, inv_shape):
    dev = x.device
    return (F["empty"]((0,), dtype=x.dtype, device=dev),
            F["empty"](inv_shape, dtype=D.int64, device=dev),
            F["empty"]((0,), dtype=D.int64, device=dev))


def _empty_along(x, d):
    """unique along dim d of an empty x, as PyTorch: empty results when the selected dim is the
    empty one, else an error."""
    if x.shape[d] != 0:
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique "
                           "cannot be applied")
    dev = x.device
    return (x.clone(), F["empty"]((0,), dtype=D.int64, device=dev),
            F["empty"]((0,), dtype=D.int64, device=dev))


def unique2(x, sorted=True, return_inverse=False, return_counts=False):  # noqa: A002
    """Sorted unique values (NaNs all distinct, last), inverse and counts."""
    n = x.numel()
    if n == 0:
        return _empty(x, tuple(x.shape))
    srt, order = x.reshape(-1).sort(0, stable=True)
    first, inv_s, counts = _runs(srt[1:] != srt[:-1], n, x.device)
    inv = F["empty"]((n,), dtype=D.int64, device=x.device).scatter(0, order, inv_s)
    return srt.index_select(0, first), inv.reshape(tuple(x.shape)), counts


def unique_dim(x, dim, sorted=True, return_inverse=False, return_counts=False):  # noqa: A002
    """Unique slices along dim in lexicographic order: stable sorts by each column from the last
    to the first (one sort a column), then runs of equal slices."""
    d = normalize_dim(dim, x.ndim)
    if x.numel() == 0:
        return _empty_along(x, d)
    n = x.shape[d]
    rows = x.movedim(d, 0).reshape(n, -1)                # (n, k)
    perm = F["arange"](n, dtype=D.int64, device=x.device)
    for j in range(rows.shape[1] - 1, -1, -1):
        col = rows[:, j].index_select(0, perm)
        perm = perm.index_select(0, col.sort(0, stable=True)[1])
    srt = rows.index_select(0, perm)
    first, inv_s, counts = _runs((srt[1:] != srt[:-1]).any(1), n, x.device)
    inv = F["empty"]((n,), dtype=D.int64, device=x.device).scatter(0, perm, inv_s)
    return x.index_select(d, perm.index_select(0, first)), inv, counts


def unique_consecutive(x, return_inverse=False, return_counts=False, dim=None):
    """Runs of equal consecutive elements (or slices along dim): values, inverse, counts."""
    if dim is None:
        n = x.numel()
        if n == 0:
            return _empty(x, tuple(x.shape))
        a = x.reshape(-1)
        first, inv, counts = _runs(a[1:] != a[:-1], n, x.device)
        return a.index_select(0, first), inv.reshape(tuple(x.shape)), counts
    d = normalize_dim(dim, x.ndim)
    if x.numel() == 0:
        return _empty_along(x, d)
    n = x.shape[d]
    a = x.movedim(d, 0)
    change = (a[1:] != a[:-1]).reshape(n - 1, x.numel() // n).any(1)
    first, inv, counts = _runs(change, n, x.device)
    return x.index_select(d, first), inv, counts
