"""Sorting and order statistics: sort/argsort/msort, topk, kthvalue, median/nanmedian, mode,
quantile/nanquantile; and counting: unique, unique_consecutive, bincount, histc.

NaN sorts as the largest value (last ascending, first descending), as in PyTorch. vjps send the
values' gradient back through the indices (reduction.scatter_dim).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._dispatch import TensorMeta, torch_name
from .._size import normalize_dim
from . import _sorting_decomp as _decomp
from ._registry import FUNCTIONS, METHODS, OPS, bind_overloads, defop
from .reduction import (
    check_nonempty,
    edtype,
    even_vjp,
    opmath_np,
    reduced_shape,
    scatter_dim,
    select_vjp,
)


def argsort_np(a: np.ndarray, d: int, descending: bool) -> np.ndarray:
    """Stable argsort along d; NaN largest. Descending keeps ties in index order too."""
    a = opmath_np(a)
    if not descending:
        return np.argsort(a, axis=d, kind="stable")
    # sort the reversed array ascending, then reverse: ties stay in increasing index order
    idx = np.argsort(np.flip(a, d), axis=d, kind="stable")
    return np.flip(a.shape[d] - 1 - idx, d)


def _axis(x, dim):
    return normalize_dim(dim, x.ndim) if x.ndim else None


# ---- sort / argsort / msort / topk ---------------------------------------------------------------
def _sort_kernel(x, dim, descending, stable):
    d = _axis(x, dim)
    if d is None:
        return x.copy(), np.zeros((), np.int64)
    idx = argsort_np(x, d, descending)
    return np.take_along_axis(x, idx, d), idx.astype(np.int64)


def _same_shape_meta(x, dim, *_):
    _axis(x, dim)
    return TensorMeta(x.shape, x.dtype), TensorMeta(x.shape, D.int64)


def _perm_vjp(g, out, x, dim, *_):
    d = _axis(x, dim)
    return (g[0] if d is None else scatter_dim(g[0], out[1], d, x.shape[d]),)


defop("sort(Tensor self, int dim=-1, bool descending=False, *, bool? stable=False) -> "
      "(Tensor values, Tensor indices)", kernels={"cpu": _sort_kernel}, meta=_same_shape_meta,
      vjp=_perm_vjp, differentiable=("self",))
defop("argsort(Tensor self, int dim=-1, bool descending=False, *, bool stable=False) -> Tensor",
      decomp=lambda x, dim, descending, stable: OPS["sort"](x, dim, descending, stable=stable)[1])
defop("msort(Tensor self) -> Tensor", decomp=lambda x: OPS["sort"](x, 0)[0])


def _topk_check(x, k, d):
    n = x.shape[d] if d is not None else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")


def _topk_kernel(x, k, dim, largest, sorted):
    d = _axis(x, dim)
    _topk_check(x, k, d)
    if d is None:
        return x.copy(), np.zeros((), np.int64)
    idx = np.take(argsort_np(x, d, largest), np.arange(k), axis=d)
    return np.take_along_axis(x, idx, d), idx.astype(np.int64)


def _topk_meta(x, k, dim, largest, sorted):
    d = _axis(x, dim)
    _topk_check(x, k, d)
    shape = x.shape if d is None else tuple(k if i == d else s for i, s in enumerate(x.shape))
    return TensorMeta(shape, x.dtype), TensorMeta(shape, D.int64)


defop("topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> "
      "(Tensor values, Tensor indices)", kernels={"cpu": _topk_kernel}, meta=_topk_meta,
      vjp=lambda g, out, x, k, dim, *_: _perm_vjp(g, out, x, dim), differentiable=("self",))


# ---- kthvalue / median / nanmedian / mode --------------------------------------------------------
def _pick(x, d, keepdim, pos):
    """(values, indices) at sorted position pos (an array over the other dims) along d."""
    idx = argsort_np(x, d, False)
    at = np.take_along_axis(idx, np.expand_dims(pos, d), d)
    vals = np.take_along_axis(x, at, d)
    if not keepdim:
        vals, at = vals.squeeze(d), at.squeeze(d)
    return vals, at.astype(np.int64)


def _select_meta(x, dim, keepdim, *_):
    d = (normalize_dim(dim, x.ndim),) if x.ndim else ()
    shape = reduced_shape(x.shape, d, keepdim)
    return TensorMeta(shape, x.dtype), TensorMeta(shape, D.int64)


def _kthvalue_meta(x, k, dim, keepdim):
    d = normalize_dim(dim, x.ndim) if x.ndim else None
    if not 1 <= k <= (x.shape[d] if d is not None else 1):
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension "
                           f"{d or 0}")
    return _select_meta(x, dim, keepdim)


def _kthvalue_kernel(x, k, dim, keepdim):
    d = _axis(x, dim)
    n = x.shape[d] if d is not None else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension "
                           f"{d or 0}")
    if d is None:
        return x.copy(), np.zeros((), np.int64)
    return _pick(x, d, keepdim, np.full(reduced_shape(x.shape, (d,), False), k - 1))


defop("kthvalue(Tensor self, int k, int dim=-1, bool keepdim=False) -> "
      "(Tensor values, Tensor indices)", kernels={"cpu": _kthvalue_kernel},
      meta=lambda x, k, dim, keepdim: _kthvalue_meta(x, k, dim, keepdim),
      vjp=lambda g, out, x, k, dim, keepdim: (select_vjp(g[0], out[1], x, dim, keepdim),),
      differentiable=("self",))


def _median_pos(x, d, ignore_nan):
    """Sorted position of the (lower) median along d; with NaN present, the first NaN's."""
    n = x.shape[d]
    valid = (~np.isnan(x) if x.dtype.kind == "f" or x.dtype == D.bfloat16.np
             else np.ones(x.shape, bool)).sum(d)
    if ignore_nan:
        return np.maximum((valid - 1) // 2, 0)
    return np.where(valid < n, valid, (n - 1) // 2)


def _median(name, ignore_nan):
    def full(x):
        if x.size == 0:
            return np.full((), np.nan, x.dtype)
        return _pick(x.reshape(-1), 0, False, _median_pos(x.reshape(-1), 0, ignore_nan))[0]

    def by_dim(x, dim, keepdim):
        d = _axis(x, dim)
        if d is None:
            return x.copy(), np.zeros((), np.int64)
        check_nonempty(name, x, (d,), False)
        return _pick(x, d, keepdim, _median_pos(x, d, ignore_nan))

    defop(f"{name}(Tensor self) -> Tensor", function=False, method=False,
          kernels={"cpu": full}, meta=lambda x: TensorMeta((), x.dtype), vjp=even_vjp)
    defop(f"{name}.dim(Tensor self, int dim, bool keepdim=False) -> "
          "(Tensor values, Tensor indices)", function=False, method=False,
          kernels={"cpu": by_dim}, differentiable=("self",),
          meta=lambda x, dim, keepdim: _nonempty_meta(name, x, dim, keepdim),
          vjp=lambda g, out, x, dim, keepdim: (select_vjp(g[0], out[1], x, dim, keepdim),))
    bind_overloads(name, lambda *a, **kw: f"{name}.dim" if len(a) > 1 or "dim" in kw else name)


_median("median", False)
_median("nanmedian", True)


def _mode_kernel(x, dim, keepdim):
    d = _axis(x, dim)
    if d is None:
        return x.copy(), np.zeros((), np.int64)
    check_nonempty("mode", x, (d,), False)
    a = np.moveaxis(opmath_np(x), d, -1)
    rows = a.reshape(-1, a.shape[-1])                   # (r, n)
    n = rows.shape[1]
    # the most frequent value, the smallest among equally frequent ones, at its last position:
    # in each sorted row, runlen[i] counts equal values up to i; the first i reaching the row's
    # longest run ends the smallest such value's run
    srt = np.sort(rows, axis=-1)
    starts = np.ones(srt.shape, bool)
    starts[:, 1:] = srt[:, 1:] != srt[:, :-1]
    pos = np.arange(n)
    runlen = pos - np.maximum.accumulate(np.where(starts, pos, 0), axis=-1) + 1
    best = np.argmax(runlen == runlen.max(-1, keepdims=True), axis=-1)
    vals = srt[np.arange(len(srt)), best]
    idx = n - 1 - np.argmax((rows == vals[:, None])[:, ::-1], axis=-1)
    out_shape = a.shape[:-1]
    vals, idx = vals.reshape(out_shape).astype(x.dtype), idx.reshape(out_shape)
    if keepdim:
        vals, idx = np.expand_dims(vals, d), np.expand_dims(idx, d)
    return vals, idx


def _nonempty_meta(name, x, dim, keepdim):
    """The metas of a selection along dim that an empty dim makes an IndexError."""
    if x.ndim:
        check_nonempty(name, x, (normalize_dim(dim, x.ndim),), False)
    return _select_meta(x, dim, keepdim)


def mode_meta(x, dim, keepdim):
    """mode's checks (an empty reduced dim raises IndexError) and output metas."""
    return _nonempty_meta("mode", x, dim, keepdim)


defop("mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)",
      kernels={"cpu": _mode_kernel}, meta=mode_meta, decomp=_decomp.mode,
      differentiable=("self",),
      vjp=lambda g, out, x, dim, keepdim: (select_vjp(g[0], out[1], x, dim, keepdim),))


# ---- quantile / nanquantile ---------------------------------------------------------------------
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_check(name, x, q, interpolation):
    if x.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if x.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    if hasattr(q, "dtype"):
        if q.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q.dtype != x.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
    elif not 0 <= q <= 1:
        raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest, but got {interpolation}")


def _quantile_positions(x, q, dim, ignore_nan, interpolation):
    """Where each quantile reads: (a, lo, hi, w, bad). a is x with the reduced dim last (or
    flat); lo/hi (m, ...) are original indices along that last axis; out = a[lo]*(1-w) + a[hi]*w
    except where bad (NaN rows)."""
    qa = np.asarray(q, x.dtype)
    a = x.reshape(-1) if dim is None or x.ndim == 0 else np.moveaxis(x, _axis(x, dim), -1)
    order = np.argsort(a, axis=-1, kind="stable")      # NaN last
    n = a.shape[-1]
    valid = (~np.isnan(a)).sum(-1)
    neff = valid if ignore_nan else np.full(valid.shape, n)
    qq = qa.reshape((-1,) + (1,) * valid.ndim)
    rank = qq * (np.maximum(neff, 1) - 1)               # (m, ...)
    lo, hi = np.floor(rank), np.ceil(rank)
    if interpolation == "lower":
        hi, w = lo, np.zeros_like(rank)
    elif interpolation == "higher":
        lo, w = hi, np.ones_like(rank)
    elif interpolation == "nearest":
        lo = hi = np.round(rank)                         # half to even, as torch.round
        w = np.zeros_like(rank)
    else:
        w = np.full_like(rank, 0.5) if interpolation == "midpoint" else rank - lo
    ob = np.broadcast_to(order, qq.shape[:1] + order.shape)
    pos = [np.take_along_axis(ob, p.astype(np.int64)[..., None], -1)[..., 0] for p in (lo, hi)]
    bad = np.broadcast_to((valid == 0) if ignore_nan else (valid < n), rank.shape)
    return a, pos[0], pos[1], w.astype(x.dtype), bad


def _quantile_shape(r, x, q, dim, keepdim):
    """(m, rest...) results -> torch's layout: q's dim first, then the reduced input shape."""
    if keepdim:
        r = r.reshape(r.shape[:1] + (1,) * x.ndim) if dim is None else np.expand_dims(
            r, _axis(x, dim) + 1 if x.ndim else 1)
    return r if np.ndim(q) else r[0]


def _quantile(name, ignore_nan):
    def kernel(x, q, dim, keepdim, interpolation):
        _quantile_check(name, _Meta(x), _Meta(q) if isinstance(q, np.ndarray) else q,
                        interpolation)
        qa = np.asarray(q, x.dtype)
        if qa.size and not ((qa >= 0) & (qa <= 1)).all():
            raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
        a, lo, hi, w, bad = _quantile_positions(x, qa, dim, ignore_nan, interpolation)
        ab = np.broadcast_to(a, lo.shape + a.shape[-1:])
        v_lo = np.take_along_axis(ab, lo[..., None], -1)[..., 0]
        v_hi = np.take_along_axis(ab, hi[..., None], -1)[..., 0]
        r = np.where(bad, np.nan, v_lo + (v_hi - v_lo) * w)
        return _quantile_shape(r, x, qa, dim, keepdim).astype(x.dtype)

    def vjp(g, out, x, q, dim, keepdim, interpolation):
        # the result reads one or two elements per row (found by sorting, in ember ops so the
        # vjp traces): send g there with weights 1-w and w
        a = x.reshape(-1) if dim is None or x.ndim == 0 else x.movedim(_axis(x, dim), -1)
        vals, order = a.sort(-1, stable=True)                   # NaN last, as the kernel
        n = a.shape[-1]
        qt = q if hasattr(q, "shape") else x.new_full((), q)
        qq = qt.to(x.dtype).reshape((-1,) + (1,) * (a.ndim - 1))  # (m, 1...)
        if ignore_nan:
            valid = (~a.isnan()).sum(-1)
            span = (valid.clamp(min=1) - 1).to(x.dtype)
            bad = valid == 0
        else:
            span = n - 1  # non-empty: checked by the forward
            bad = a.isnan().any(-1)
        rank = (qq * span).expand((qq.shape[0],) + tuple(a.shape[:-1]))   # (m, ...)
        lo, hi = rank.floor(), rank.ceil()
        if interpolation == "lower":
            hi, w = lo, rank * 0
        elif interpolation == "higher":
            lo, w = hi, rank * 0 + 1
        elif interpolation == "nearest":
            lo = hi = rank.round()
            w = rank * 0
        else:
            w = rank * 0 + 0.5 if interpolation == "midpoint" else rank - lo
        m = rank.shape[0]
        big = (m,) + tuple(a.shape)
        lo_i, hi_i = lo.long().unsqueeze(-1), hi.long().unsqueeze(-1)   # sorted ranks
        ob = order.unsqueeze(0).expand(big)
        bad = bad.unsqueeze(0).expand(rank.shape)
        wt = w.masked_fill(bad, 0).unsqueeze(-1)
        gm = g.reshape(rank.shape).unsqueeze(-1)                    # (m, ..., 1)
        gx = (g.new_zeros(big).scatter_add(-1, ob.gather(-1, lo_i), gm * (1 - wt))
              .scatter_add(-1, ob.gather(-1, hi_i), gm * wt).sum(0))
        gx = gx.reshape(x.shape) if dim is None or x.ndim == 0 else gx.movedim(-1, _axis(x, dim))
        gq = None
        if hasattr(q, "shape") and interpolation == "linear":
            # d out / d q = (a[hi] - a[lo]) * span: the slope of the interpolation
            vb = vals.unsqueeze(0).expand(big)
            slope = ((vb.gather(-1, hi_i) - vb.gather(-1, lo_i)).squeeze(-1) * span)
            slope = slope.masked_fill(bad, 0)
            gq = (gm.squeeze(-1) * slope).reshape(m, -1).sum(1).reshape(q.shape)
        return gx, gq

    def meta(x, q, dim, keepdim, interpolation):
        _quantile_check(name, x, q, interpolation)
        if dim is None:
            shape = (1,) * x.ndim if keepdim else ()
        else:
            shape = reduced_shape(x.shape, (normalize_dim(dim, x.ndim),) if x.ndim else (),
                                  keepdim)
        return TensorMeta(tuple(q.shape) + shape if hasattr(q, "shape") else shape, x.dtype)

    defop(f"{name}(Tensor self, Tensor q, int? dim=None, bool keepdim=False, *, "
          "str interpolation='linear') -> Tensor", kernels={"cpu": kernel}, meta=meta,
          decomp=_decomp.quantile(name, ignore_nan), vjp=vjp, differentiable=("self", "q"))


class _Meta:
    """A numpy array seen with ember's dtype/ndim/numel, for checks shared with the meta."""

    def __init__(self, a):
        self.dtype, self.ndim, self._n = edtype(a), a.ndim, a.size

    def numel(self):
        return self._n


_quantile("quantile", False)
_quantile("nanquantile", True)


# ---- unique / unique_consecutive -----------------------------------------------------------------
def _unique_kernel(x, sorted, return_inverse, return_counts):
    a = opmath_np(x).reshape(-1)
    u, inv, counts = np.unique(a, return_inverse=True, return_counts=True, equal_nan=False)
    return u.astype(x.dtype), inv.reshape(x.shape).astype(np.int64), counts.astype(np.int64)


def _unique_empty(x, d):
    """unique along dim d of an empty x, as PyTorch: empty results when the selected dim is the
    empty one, else an error."""
    if x.shape[d] != 0:
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique "
                           "cannot be applied")
    return x.copy(), np.zeros(0, np.int64), np.zeros(0, np.int64)


def _unique_dim_kernel(x, dim, sorted, return_inverse, return_counts):
    d = normalize_dim(dim, x.ndim)
    if x.size == 0:
        return _unique_empty(x, d)
    u, inv, counts = np.unique(opmath_np(x), return_inverse=True, return_counts=True, axis=d)
    return u.astype(x.dtype), inv.reshape(-1).astype(np.int64), counts.astype(np.int64)


def _unique_consecutive_kernel(x, return_inverse, return_counts, dim):
    if dim is None:
        a = x.reshape(-1)
        d, change = 0, a[1:] != a[:-1]
    else:
        d = normalize_dim(dim, x.ndim)
        if x.size == 0:
            return _unique_empty(x, d)
        a = np.moveaxis(x, d, 0)
        change = (a[1:] != a[:-1]).reshape(max(a.shape[0] - 1, 0), -1).any(1)
        a = x
    n = x.shape[d] if dim is not None else a.size
    starts = np.flatnonzero(np.concatenate([[n > 0], change]))
    inv = np.cumsum(np.concatenate([[0], change])).astype(np.int64) if n else np.zeros(0, np.int64)
    counts = np.diff(np.append(starts, n)).astype(np.int64)
    u = np.take(a, starts, axis=d)
    return u, inv.reshape(x.shape) if dim is None else inv, counts


def _no_derivative(name):
    """PyTorch records unique's values output (a grad_fn, requires_grad) but has no formula:
    backward through it raises."""
    def vjp(g, out, *args):
        raise NotImplementedError(f"the derivative for '{name}' is not implemented.")
    vjp.saved_outputs = ()
    return vjp


defop("_unique2(Tensor self, bool sorted=True, bool return_inverse=False, "
      "bool return_counts=False) -> (Tensor, Tensor, Tensor)", function=False, method=False,
      kernels={"cpu": _unique_kernel}, decomp=_decomp.unique2, differentiable=("self",),
      vjp=_no_derivative("_unique2"))
defop("unique_dim(Tensor self, int dim, bool sorted=True, bool return_inverse=False, "
      "bool return_counts=False) -> (Tensor, Tensor, Tensor)", function=False, method=False,
      kernels={"cpu": _unique_dim_kernel}, decomp=_decomp.unique_dim,
      differentiable=("self",), vjp=_no_derivative("unique_dim"))
defop("unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False, "
      "int? dim=None) -> (Tensor, Tensor, Tensor)", function=False, method=False,
      kernels={"cpu": _unique_consecutive_kernel},
      decomp=_decomp.unique_consecutive, differentiable=("self",),
      vjp=_no_derivative("unique_consecutive"))


def _outputs(r, return_inverse, return_counts):
    out = (r[0],) + ((r[1],) if return_inverse else ()) + ((r[2],) if return_counts else ())
    return out[0] if len(out) == 1 else out


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The unique elements of input (sorted), with inverse indices and counts on request.

    >>> import ember
    >>> ember.unique(ember.tensor([3, 1, 3])).tolist()
    [1, 3]
    """
    if dim is None:
        r = OPS["_unique2"](input, sorted, return_inverse, return_counts)
    else:
        r = OPS["unique_dim"](input, dim, sorted, return_inverse, return_counts)
    return _outputs(r, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """Collapse runs of equal consecutive elements (or slices along dim).

    >>> import ember
    >>> ember.unique_consecutive(ember.tensor([1, 1, 2, 1])).tolist()
    [1, 2, 1]
    """
    r = OPS["unique_consecutive"](input, return_inverse, return_counts, dim)
    return _outputs(r, return_inverse, return_counts)


for _fn in (unique, unique_consecutive):
    FUNCTIONS[_fn.__name__] = METHODS[_fn.__name__] = _fn


# ---- bincount / histc ----------------------------------------------------------------------------
def _bincount_kernel(x, weights, minlength):
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if x.dtype.kind == "f" or x.dtype == D.bfloat16.np:
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for "
                                  f"'{torch_name(edtype(x))}'")
    if x.ndim != 1 or x.dtype == np.bool_ or (x.size and x.min() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is None:
        return np.bincount(x, minlength=minlength).astype(np.int64)
    if weights.ndim != 1 or weights.shape[0] != x.shape[0]:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    od = np.float32 if weights.dtype == np.float32 else np.float64
    return np.bincount(x, weights.astype(np.float64), minlength=minlength).astype(od)


defop("bincount(Tensor self, Tensor? weights=None, int minlength=0) -> Tensor",
      kernels={"cpu": _bincount_kernel}, differentiable=())


def _histc_check(dtype, bins):
    """PyTorch's argument checks of histc (dtype: an ember dtype): the kernel's and the meta's."""
    if not dtype.is_floating_point or dtype in (D.float8_e4m3fn, D.float8_e5m2):
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{torch_name(dtype)}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")


def _histc_meta(x, bins, lo, hi):
    _histc_check(x.dtype, bins)
    if lo != hi:   # (min == max: the data's range, known to the kernel only)
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"torch.histc: range of [{lo}, {hi}] is not finite")
        if lo > hi:
            raise RuntimeError("torch.histc: max must be larger than min")
    return TensorMeta((bins,), x.dtype)


def _histc_kernel(x, bins, min, max):  # noqa: A002
    _histc_check(edtype(x), bins)
    a = opmath_np(x).reshape(-1)
    lo, hi = a.dtype.type(min), a.dtype.type(max)
    if lo == hi and a.size:
        lo, hi = a.min(), a.max()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"torch.histc: range of [{lo}, {hi}] is not finite")
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    a = a[(a >= lo) & (a <= hi)]
    pos = ((a - lo) * a.dtype.type(bins) / (hi - lo)).astype(np.int64)
    pos[pos == bins] = bins - 1                  # the last bin includes max
    return np.bincount(pos, minlength=bins).astype(x.dtype)


defop("histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor",
      kernels={"cpu": _histc_kernel}, differentiable=(),
      meta=_histc_meta)
