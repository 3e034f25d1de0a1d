"""Pooling: max/avg pooling (1d/2d/3d), adaptive avg/max pooling.

Kernels work on the last n (spatial) dims of any leading shape, so batched and unbatched inputs
share them. Windows are strided views (no copies per pixel); backward kernels scatter with one
bincount (max) or one strided add per kernel offset (avg). Each backward op's vjp is the forward
op again (or a gather), so double backward works.
"""
from __future__ import annotations

import math

import numpy as np

from .._dispatch import TensorMeta
from . import _cpu_conv
from ._registry import defop
from .conv import ntuple, windows


def _shape_str(s):
    return "[" + ", ".join(str(v) for v in s) + "]"


def _cdt(a):
    return np.float64 if a.dtype == np.float64 else np.float32


def pool_out_size(size, k, s, p, d, ceil_mode):
    """PyTorch's pooling_output_shape: the last window must start inside input + left pad."""
    eff = d * (k - 1) + 1
    num = size + 2 * p - eff + ((s - 1) if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _geometry(x_shape, n, k, s, p, d, ceil_mode, name):
    spatial = tuple(x_shape[-n:])
    for ki, pi, di in zip(k, p, d):
        if pi > (di * (ki - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={pi}, kernel_size={ki} and dilation={di}")
    if any(v <= 0 for v in k):
        raise RuntimeError(f"{name}(): kernel_size must be greater than zero, but got {list(k)}")
    if any(v <= 0 for v in s):
        raise RuntimeError(f"{name}(): stride must be greater than zero, but got {list(s)}")
    out = tuple(pool_out_size(*a, ceil_mode) for a in zip(spatial, k, s, p, d))
    if any(o < 1 for o in out):
        lead = x_shape[-n - 1] if len(x_shape) > n else 1
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, (lead,) + spatial))}). "
                           f"Calculated output size: ({'x'.join(map(str, (lead,) + out))}). "
                           f"Output size is too small")
    return spatial, out


def _padded(x, n, k, s, p, d, out, fill):
    """x padded on the left by p and on the right far enough for every (ceil_mode) window."""
    widths = [(0, 0)] * (x.ndim - n)
    for size, ki, si, pi, di, o in zip(x.shape[-n:], k, s, p, d, out):
        need = (o - 1) * si + di * (ki - 1) + 1
        widths.append((pi, max(need - size - pi, 0)))
    if not any(lo or hi for lo, hi in widths):
        return x
    return np.pad(x, widths, constant_values=fill)


def _lowest(dt):
    return -np.inf if _is_float(dt) else np.iinfo(dt).min


def _is_float(dt) -> bool:
    return dt.kind == "f" or dt.name == "bfloat16"  # ml_dtypes' bfloat16 has kind "V"


# ---- max pooling -------------------------------------------------------------------------------
def _max_pool_kernel(n):
    def kernel(x, k, s, p, d, ceil_mode):
        k, s, p, d = _norm_args(n, k, s, p, d)
        _check_ndim(x, n, f"max_pool{n}d")
        spatial, out = _geometry(x.shape, n, k, s, p, d, ceil_mode, f"max_pool{n}d")
        r = _cpu_conv.max_pool(x, n, k, s, p, d, out)   # one C++ pass (float32/64)
        if r is not None:
            return r
        xp = _padded(x, n, k, s, p, d, out, _lowest(x.dtype))
        win = windows(xp, k, s, d, out)                            # (..., *out, *K)
        # a running max over the prod(K) window offsets, each a strided (..., *out) view: a few
        # passes over the output instead of an argmax along a tiny last axis (numpy's slow case)
        offsets = list(np.ndindex(*k))
        lead = (slice(None),) * x.ndim
        vals = np.array(win[lead + offsets[0]], copy=True)
        small = len(offsets) < 128
        arg = np.zeros(vals.shape, np.int8 if small else np.int64)
        for j, off in enumerate(offsets[1:], 1):
            v = win[lead + off]
            # PyTorch's rule: val > max || isnan(val) (ties keep the first, the last NaN wins)
            take = v > vals
            if _is_float(vals.dtype):
                take |= np.isnan(v)
            np.maximum(vals, v, out=vals)  # NaN-propagating, like the rule above
            # offsets grow, so the last one taken is the largest j * take (masked copies are
            # several times slower than these two passes)
            tj = take.view(np.int8) if small else take.astype(np.int64)
            tj *= j
            np.maximum(arg, tj, out=arg)
        # window offset -> flat spatial index: a per-position base plus a per-offset step
        base = np.zeros((), np.int64)
        step = np.zeros((), np.int64)
        for i in range(n):
            o = np.arange(out[i], dtype=np.int64) * s[i] - p[i]
            base = np.add.outer(base * spatial[i], o)
            step = np.add.outer(step * spatial[i], np.arange(k[i], dtype=np.int64) * d[i])
        idx = step.reshape(-1)[arg]
        idx += base
        return vals, idx
    return kernel


def _norm_args(n, k, s, p, d):
    k = ntuple(k, n)
    s = k if s is None or (isinstance(s, (list, tuple)) and len(s) == 0) else ntuple(s, n)
    return k, s, ntuple(p, n), ntuple(d, n)


def _check_ndim(x, n, name):
    if x.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"{name}: Expected {n + 1}D or {n + 2}D (batch mode) tensor for input "
                           f"with possibly 0 batch size and non-zero dimensions for input, but "
                           f"got: {_shape_str(x.shape)}")


def _max_pool_meta(n):
    def meta(x, k, s, p, d, ceil_mode):
        k, s, p, d = _norm_args(n, k, s, p, d)
        _, out = _geometry(tuple(x.shape), n, k, s, p, d, ceil_mode, f"max_pool{n}d")
        shape = tuple(x.shape[:-n]) + out
        from .. import _dtype as D
        return TensorMeta(shape, x.dtype), TensorMeta(shape, D.int64)
    return meta


def _pool_gather_kernel(x, idx, n):
    """out[..., j] = x[..., idx[..., j]] over the n flattened spatial dims."""
    lead = x.shape[:x.ndim - n]
    xf = x.reshape(lead + (-1,))
    return np.take_along_axis(xf, idx.reshape(lead + (-1,)), -1).reshape(idx.shape)


def _pool_scatter_kernel(g, x, idx, n):
    """Adjoint of the gather: gi[..., idx[..., j]] += g[..., j] (one bincount)."""
    gi = _cpu_conv.pool_scatter(g, idx, tuple(x.shape), n)
    if gi is not None:
        return gi
    lead = x.shape[:x.ndim - n]
    m = math.prod(lead)
    per = math.prod(x.shape[x.ndim - n:])
    flat = idx.reshape(m, -1) + (np.arange(m) * per)[:, None]
    gi = np.bincount(flat.ravel(), weights=g.reshape(-1).astype(np.float64), minlength=m * per)
    return gi.reshape(x.shape).astype(g.dtype)


_pool_gather = defop(
    "_pool_gather(Tensor self, Tensor indices, int n) -> Tensor", function=False, method=False,
    kernels={"cpu": _pool_gather_kernel}, differentiable=("self",),
    meta=lambda x, idx, n: TensorMeta(tuple(idx.shape), x.dtype),
    vjp=lambda g, out, x, idx, n: (_pool_scatter(g, x, idx, n),))
_pool_scatter = defop(
    "_pool_scatter(Tensor grad_output, Tensor self, Tensor indices, int n) -> Tensor",
    function=False, method=False, kernels={"cpu": _pool_scatter_kernel},
    differentiable=("grad_output",),
    meta=lambda g, x, idx, n: TensorMeta(tuple(x.shape), g.dtype),
    vjp=lambda gg, out, g, x, idx, n: (_pool_gather(gg, idx, n),))


def _max_pool_vjp(n):
    return lambda grads, out, x, *rest: (_pool_scatter(grads[0], x, out[1], n),)


for _n in (1, 2, 3):
    defop(f"max_pool{_n}d_with_indices(Tensor self, int[{_n}] kernel_size, int[{_n}] stride=[], "
          f"int[{_n}] padding=0, int[{_n}] dilation=1, bool ceil_mode=False) -> "
          f"(Tensor, Tensor)", method=False, kernels={"cpu": _max_pool_kernel(_n)},
          meta=_max_pool_meta(_n), vjp=_max_pool_vjp(_n))


# ---- avg pooling ---------------------------------------------------------------------------------
def _avg_divisor(spatial, out, k, s, p, ceil_mode, count_include_pad, divisor_override):
    """Per-output-position divisor, as an outer product of 1-D counts (PyTorch's rules)."""
    if divisor_override:
        return float(divisor_override)
    div = np.ones((), np.float64)
    for size, o, ki, si, pi in zip(spatial, out, k, s, p):
        start = np.arange(o) * si - pi
        end = np.minimum(start + ki, size + pi)
        if count_include_pad:
            cnt = end - start
        else:
            cnt = np.minimum(end, size) - np.maximum(start, 0)
        div = np.multiply.outer(div, cnt.astype(np.float64))
    return div


def _avg_args(n, k, s, p):
    k, s, p, _ = _norm_args(n, k, s, p, 1)
    return k, s, p


def _avg_pool_kernel(n):
    def kernel(x, k, s, p, ceil_mode, count_include_pad, divisor_override=None):
        k, s, p = _avg_args(n, k, s, p)
        _check_ndim(x, n, f"avg_pool{n}d")
        if divisor_override is not None and divisor_override == 0:
            raise RuntimeError("divisor must be not zero")
        d = (1,) * n
        spatial, out = _geometry(x.shape, n, k, s, p, d, ceil_mode, f"avg_pool{n}d")
        dt = _cdt(x)
        xp = _padded(x.astype(dt, copy=False), n, k, s, p, d, out, 0)
        win = windows(xp, k, s, d, out)
        tot = win.sum(axis=tuple(range(x.ndim, x.ndim + n)))
        div = _avg_divisor(spatial, out, k, s, p, ceil_mode, count_include_pad, divisor_override)
        return (tot / div).astype(x.dtype)
    return kernel


def _avg_pool_backward_kernel(g, x, k, s, p, ceil_mode, count_include_pad, divisor_override):
    n = len(k)
    spatial = x.shape[-n:]
    out = g.shape[-n:]
    dt = _cdt(g)
    gd = g.astype(dt) / _avg_divisor(spatial, out, k, s, p, ceil_mode, count_include_pad,
                                     divisor_override)
    padded = tuple(max((o - 1) * si + ki, sz + pi) + pi for o, si, ki, sz, pi in
                   zip(out, s, k, spatial, p))
    gp = np.zeros(x.shape[:-n] + padded, dt)
    lead = (slice(None),) * (x.ndim - n)
    for off in np.ndindex(*k):
        sl = tuple(slice(o_, o_ + (o - 1) * si + 1, si) for o_, o, si in zip(off, out, s))
        gp[lead + sl] += gd
    crop = tuple(slice(pi, pi + sz) for pi, sz in zip(p, spatial))
    return gp[lead + crop].astype(g.dtype)


_avg_pool_backward = defop(
    "_avg_pool_backward(Tensor grad_output, Tensor self, int[] kernel_size, int[] stride, "
    "int[] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor",
    function=False, method=False, kernels={"cpu": _avg_pool_backward_kernel},
    differentiable=("grad_output",),
    meta=lambda g, x, *rest: TensorMeta(tuple(x.shape), g.dtype),
    vjp=lambda gg, out, g, x, k, s, p, c, cip, dv: (
        _AVG[len(k)](gg, k, s, p, c, cip, dv) if len(k) > 1 else _AVG[1](gg, k, s, p, c, cip),))


def _avg_pool_vjp(n):
    def vjp(g, out, x, k, s, p, ceil_mode, cip, dv=None):
        k, s, p = _avg_args(n, k, s, p)
        return (_avg_pool_backward(g, x, k, s, p, ceil_mode, cip, dv),)
    return vjp


def _avg_pool_meta(n):
    def meta(x, k, s, p, ceil_mode, *rest):
        k, s, p = _avg_args(n, k, s, p)
        _, out = _geometry(tuple(x.shape), n, k, s, p, (1,) * n, ceil_mode, f"avg_pool{n}d")
        return TensorMeta(tuple(x.shape[:-n]) + out, x.dtype)
    return meta


_AVG = {}
for _n in (1, 2, 3):
    _dv = ", int? divisor_override=None" if _n > 1 else ""
    _AVG[_n] = defop(
        f"avg_pool{_n}d(Tensor self, int[{_n}] kernel_size, int[{_n}] stride=[], "
        f"int[{_n}] padding=0, bool ceil_mode=False, bool count_include_pad=True{_dv}) -> Tensor",
        method=False, functional=f"avg_pool{_n}d", kernels={"cpu": _avg_pool_kernel(_n)},
        meta=_avg_pool_meta(_n), vjp=_avg_pool_vjp(_n))


# ---- adaptive pooling ----------------------------------------------------------------------------
def _adaptive_ranges(size, out):
    i = np.arange(out)
    start = (i * size) // out
    end = -((-(i + 1) * size) // out)     # ceil((i+1)*size/out)
    return start, end


def _adaptive_matrix(size, out, dt):
    start, end = _adaptive_ranges(size, out)
    j = np.arange(size)
    m = (j >= start[:, None]) & (j < end[:, None])
    return m.astype(dt) / (end - start)[:, None].astype(dt)      # (out, size)


def _apply_per_dim(x, mats):
    """Contract each of the last len(mats) dims of x with its (out, in) matrix."""
    n = len(mats)
    for i, m in enumerate(mats):
        ax = x.ndim - n + i
        x = np.moveaxis(np.tensordot(x, m, axes=([ax], [1])), -1, ax)
    return x


def _adaptive_out(x_shape, output_size, n):
    osz = ntuple(output_size, n, "output_size")
    return tuple(x_shape[-n + i] if o is None else o for i, o in enumerate(osz))


def _check_adaptive(x, n, name):
    if x.ndim not in (n + 1, n + 2) or any(s == 0 for s in x.shape[-n:]):
        raise RuntimeError(f"{name}(): Expected {n + 1}D or {n + 2}D tensor, but got "
                           f"{_shape_str(x.shape)}")


def _adaptive_avg_kernel(x, output_size):
    n = len(output_size)
    _check_adaptive(x, n, f"adaptive_avg_pool{n}d")
    dt = _cdt(x)
    mats = [_adaptive_matrix(s, o, dt) for s, o in zip(x.shape[-n:], output_size)]
    return np.ascontiguousarray(_apply_per_dim(x.astype(dt), mats)).astype(x.dtype)


_adaptive_avg = defop(
    "_adaptive_avg_pool(Tensor self, SymInt[] output_size) -> Tensor", function=False,
    method=False, kernels={"cpu": _adaptive_avg_kernel},
    meta=lambda x, o: TensorMeta(tuple(x.shape[:x.ndim - len(o)]) + tuple(o), x.dtype),
    vjp=lambda g, out, x, o: (_adaptive_avg_backward(g, x.shape[x.ndim - len(o):]),), supports="fc")


def _adaptive_avg_bwd_kernel(g, input_spatial):
    n = len(input_spatial)
    dt = _cdt(g)
    mats = [_adaptive_matrix(s, o, dt).T for s, o in zip(input_spatial, g.shape[-n:])]
    return np.ascontiguousarray(_apply_per_dim(g.astype(dt), mats)).astype(g.dtype)


_adaptive_avg_backward = defop(
    "_adaptive_avg_pool_backward(Tensor grad_output, SymInt[] input_size) -> Tensor",
    function=False, method=False, kernels={"cpu": _adaptive_avg_bwd_kernel},
    meta=lambda g, s: TensorMeta(tuple(g.shape[:g.ndim - len(s)]) + tuple(s), g.dtype),
    vjp=lambda gg, out, g, s: (_adaptive_avg(gg, g.shape[g.ndim - len(s):]),))


def _adaptive_max_kernel(x, output_size):
    n = len(output_size)
    _check_adaptive(x, n, f"adaptive_max_pool{n}d")
    lead = x.ndim - n
    # per dim: (out, kmax) source positions, clipped, and which of them are inside the window
    idxs, valid = [], []
    for s, o in zip(x.shape[lead:], output_size):
        start, end = _adaptive_ranges(s, o)
        kmax = int((end - start).max())
        pos = start[:, None] + np.arange(kmax)
        valid.append(pos < end[:, None])
        idxs.append(np.minimum(pos, s - 1))
    # gather (..., o1, k1, o2, k2, ...) with broadcast index arrays
    grids = np.ix_(*[i.reshape(-1) for i in idxs])
    g = x[(Ellipsis,) + grids]                                   # (..., o1*k1, o2*k2, ...)
    shp = x.shape[:lead] + sum(((i.shape[0], i.shape[1]) for i in idxs), ())
    g = g.reshape(shp)
    perm = tuple(range(lead)) + tuple(lead + 2 * i for i in range(n)) + \
        tuple(lead + 2 * i + 1 for i in range(n))
    g = g.transpose(perm)                                        # (..., *out, *K)
    ok = np.ones((), bool)
    for v in valid:
        ok = np.logical_and.outer(ok, v) if ok.ndim else v
    # ok has shape (o1, k1, o2, k2, ...) -> (*out, *K)
    ok = ok.reshape(sum(((i.shape[0], i.shape[1]) for i in idxs), ())).transpose(
        tuple(2 * i for i in range(n)) + tuple(2 * i + 1 for i in range(n)))
    g = np.where(ok, g, _lowest(x.dtype))
    kshape = tuple(i.shape[1] for i in idxs)
    flat = g.reshape(g.shape[:lead + n] + (-1,))
    arg = flat.argmax(-1)
    vals = np.take_along_axis(flat, arg[..., None], -1)[..., 0]
    kid = np.unravel_index(arg, kshape)
    idx = np.zeros(arg.shape, np.int64)
    for i in range(n):
        start, _ = _adaptive_ranges(x.shape[lead + i], output_size[i])
        coord = start.reshape((-1,) + (1,) * (n - 1 - i)) + kid[i]
        idx = idx * x.shape[lead + i] + coord
    return vals.astype(x.dtype), idx


def _adaptive_max_meta(x, o):
    from .. import _dtype as D
    shape = tuple(x.shape[:x.ndim - len(o)]) + tuple(o)
    return TensorMeta(shape, x.dtype), TensorMeta(shape, D.int64)


_adaptive_max = defop(
    "_adaptive_max_pool(Tensor self, SymInt[] output_size) -> (Tensor, Tensor)", function=False,
    method=False, kernels={"cpu": _adaptive_max_kernel}, meta=_adaptive_max_meta,
    vjp=lambda grads, out, x, o: (_pool_scatter(grads[0], x, out[1], len(o)),), supports="fc")


def _make_adaptive(n):
    def avg(x, output_size):
        return _adaptive_avg(x, _adaptive_out(tuple(x.shape), output_size, n))

    def mx(x, output_size):
        return tuple(_adaptive_max(x, _adaptive_out(tuple(x.shape), output_size, n)))
    defop(f"adaptive_avg_pool{n}d(Tensor self, SymInt[{n}] output_size) -> Tensor",
          method=False, decomp=avg)
    defop(f"adaptive_max_pool{n}d(Tensor self, int[{n}] output_size) -> (Tensor, Tensor)",
          method=False, decomp=mx)


for _n in (1, 2, 3):
    _make_adaptive(_n)
