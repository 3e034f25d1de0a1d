"""Normalization ops: batch_norm, layer_norm, group_norm (numpy kernels with backward kernels),
instance_norm, rms_norm and local_response_norm (decompositions).

All three kernels share one pattern: normalise x over some axes (xhat = (x - mean) * rstd), then
scale and shift per channel; their backward is the same formula over those axes.
"""
from __future__ import annotations

import math

import numpy as np

from .._dispatch import TensorMeta
from . import _cpu_norm
from ._registry import OPS, defop, saves_outputs


def _cdt(a):
    return np.float64 if a.dtype == np.float64 else np.float32


def _shape_str(s):
    return "[" + ", ".join(str(v) for v in s) + "]"


def _normalize_fwd(x, axes, eps):
    """(xhat, mean, rstd) over axes (kept), computed in float32/float64."""
    x = x.astype(_cdt(x), copy=False)
    mean = x.mean(axis=axes, keepdims=True)
    xc = x - mean
    var = np.multiply(xc, xc).mean(axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    xc *= rstd  # xc is ours: xhat in place (the temporaries of big inputs cost page faults)
    return xc, mean, rstd


def _normalize_bwd(gxhat, xhat, rstd, axes):
    """Gradient through xhat = (x - mean(x)) * rstd(x), given d/dxhat."""
    m1 = gxhat.mean(axis=axes, keepdims=True)
    t = gxhat * xhat
    m2 = t.mean(axis=axes, keepdims=True)
    np.multiply(xhat, m2, out=t)   # rstd * ((gxhat - m1) - xhat * m2), in two buffers
    r = gxhat - m1
    r -= t
    r *= rstd
    return r


def _affine_shape(x_ndim, caxis, n):
    """Shape that broadcasts a (n,) per-channel vector against x along caxis."""
    s = [1] * x_ndim
    s[caxis] = n
    return s


def _stats_like_saved(x, axes, rstd):
    """(x - mean, rstd) recomputed from x in ember ops, so double backward sees how both depend
    on x; eps is recovered from the saved rstd (a constant), which keeps the values equal."""
    mu = x.mean(axes, keepdim=True)
    xc = x - mu
    var = (xc * xc).mean(axes, keepdim=True)
    eps_hat = rstd.detach().reshape(var.shape) ** -2 - var.detach()
    return xc, (var + eps_hat).rsqrt()


def _normalize_bwd_ops(gxhat, xhat, r, axes):
    m1 = gxhat.mean(axes, keepdim=True)
    m2 = (gxhat * xhat).mean(axes, keepdim=True)
    return r * (gxhat - m1 - xhat * m2)


# ---- layer_norm -------------------------------------------------------------------------------
def _check_layer_norm(x, nshape, w, b):
    nshape = tuple(nshape)
    k = len(nshape)
    if k == 0:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., "
                           "containing at least one element, but got normalized_shape = []")
    for t, name in ((w, "weight"), (b, "bias")):
        if t is not None and tuple(t.shape) != nshape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got "
                               f"{name} of shape {_shape_str(t.shape)} and normalized_shape = "
                               f"{_shape_str(nshape)}")
    if tuple(x.shape[x.ndim - k:]) != nshape or x.ndim < k:
        raise RuntimeError(f"Given normalized_shape={_shape_str(nshape)}, expected input with "
                           f"shape [*, {', '.join(map(str, nshape))}], but got input of size"
                           f"{_shape_str(x.shape)}")
    return tuple(range(x.ndim - k, x.ndim))


def _layer_norm_kernel(x, nshape, w, b, eps):
    axes = _check_layer_norm(x, nshape, w, b)
    stat = tuple(x.shape[:x.ndim - len(axes)]) + (1,) * len(axes)
    r = _cpu_norm.layer_norm(x, w, b, eps, math.prod(x.shape[x.ndim - len(axes):]))
    if r is not None:   # one C++ pass per row (float32/64)
        return r[0], r[1].reshape(stat), r[2].reshape(stat)
    xhat, mean, rstd = _normalize_fwd(x, axes, eps)
    y = xhat  # a fresh array: scale and shift in place
    if w is not None:
        y *= w.astype(y.dtype, copy=False)
    if b is not None:
        y += b.astype(y.dtype, copy=False)
    return y.astype(x.dtype, copy=False), mean.astype(x.dtype), rstd.astype(x.dtype)


def _layer_norm_meta(x, nshape, w, b, eps):
    k = len(nshape)
    stat = tuple(x.shape[:x.ndim - k]) + (1,) * k
    return TensorMeta(tuple(x.shape), x.dtype), TensorMeta(stat, x.dtype), \
        TensorMeta(stat, x.dtype)


def _layer_norm_bwd_kernel(g, x, nshape, mean, rstd, w, b, mask):
    k = len(nshape)
    axes = tuple(range(x.ndim - k, x.ndim))
    lead = tuple(range(x.ndim - k))
    r = _cpu_norm.layer_norm_backward(g, x, mean, rstd, w, math.prod(x.shape[x.ndim - k:]),
                                      mask[0], mask[1] and w is not None,
                                      mask[2] and b is not None)
    if r is not None:   # one C++ pass per row (float32/64)
        return r[0], *(None if v is None else v.reshape(tuple(nshape)) for v in r[1:])
    dt = _cdt(x)
    g = g.astype(dt, copy=False)
    xhat = x.astype(dt, copy=False) - mean.astype(dt, copy=False)
    xhat *= rstd.astype(dt, copy=False)
    gi = gw = gb = None
    if mask[0]:
        gxhat = g * w.astype(dt, copy=False) if w is not None else g
        gi = _normalize_bwd(gxhat, xhat, rstd.astype(dt, copy=False), axes).astype(
            x.dtype, copy=False)
    if mask[1] and w is not None:
        gw = (g * xhat).sum(axis=lead).astype(w.dtype)
    if mask[2] and b is not None:
        gb = g.sum(axis=lead).astype(b.dtype)
    return gi, gw, gb


def _layer_norm_bwd_decomp(g, x, nshape, mean, rstd, w, b, mask):
    k = len(nshape)
    axes, lead = list(range(x.ndim - k, x.ndim)), list(range(x.ndim - k))
    xc, r = _stats_like_saved(x, axes, rstd)
    xhat = xc * r
    gi = gw = gb = None
    if mask[0]:
        gi = _normalize_bwd_ops(g * w if w is not None else g, xhat, r, axes)
    if mask[1] and w is not None:
        gw = (g * xhat).sum(lead) if lead else g * xhat
    if mask[2] and b is not None:
        gb = g.sum(lead) if lead else g
    return gi, gw, gb


# kernel for speed; the decomposition is what create_graph=True differentiates (double backward)
native_layer_norm_backward = defop(
    "native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, "
    "Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> "
    "(Tensor, Tensor, Tensor)", function=False, method=False,
    kernels={"cpu": _layer_norm_bwd_kernel}, decomp=_layer_norm_bwd_decomp,
    meta=lambda g, x, ns, m, r, w, b, mask: (
        TensorMeta(tuple(x.shape), x.dtype),
        None if w is None else TensorMeta(tuple(w.shape), w.dtype),
        None if b is None else TensorMeta(tuple(b.shape), b.dtype)), supports="fc")


def _req(t):
    return t is not None and getattr(t, "requires_grad", False)


@saves_outputs(1, 2)  # mean and rstd, never the result (PyTorch saves the same)
def _layer_norm_vjp(grads, out, x, nshape, w, b, eps):
    _, mean, rstd = out
    return native_layer_norm_backward(grads[0], x, nshape, mean, rstd, w, b,
                                      [_req(x), _req(w), _req(b)])


native_layer_norm = defop(
    "native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, "
    "float eps) -> (Tensor, Tensor, Tensor)", method=False, kernels={"cpu": _layer_norm_kernel},
    meta=_layer_norm_meta, vjp=_layer_norm_vjp, supports="fc")


def _nshape(s):
    return (s,) if isinstance(s, int) else tuple(s)


defop("layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None,"
      " float eps=1e-05, bool cudnn_enable=True) -> Tensor", method=False,
      decomp=lambda x, ns, w, b, eps, cud: native_layer_norm(x, _nshape(ns), w, b, eps)[0])


# ---- group_norm -------------------------------------------------------------------------------
def _group_norm_kernel(x, w, b, N, C, HxW, group, eps):
    xg = x.reshape(N, group, -1)
    xhat, mean, rstd = _normalize_fwd(xg, (2,), eps)
    y = xhat.reshape(N, C, -1)
    if w is not None:
        y = y * w.astype(y.dtype)[None, :, None]
    if b is not None:
        y = y + b.astype(y.dtype)[None, :, None]
    return (y.reshape(x.shape).astype(x.dtype, copy=False), mean.reshape(N, group).astype(x.dtype),
            rstd.reshape(N, group).astype(x.dtype))


def _group_norm_bwd_kernel(g, x, mean, rstd, w, N, C, HxW, group, mask):
    dt = _cdt(x)
    g3 = g.astype(dt).reshape(N, C, -1)
    xhat = ((x.astype(dt).reshape(N, group, -1) - mean.astype(dt)[..., None])
            * rstd.astype(dt)[..., None]).reshape(N, C, -1)
    gi = gw = gb = None
    if mask[0]:
        gxhat = g3 * w.astype(dt)[None, :, None] if w is not None else g3
        gi = _normalize_bwd(gxhat.reshape(N, group, -1), xhat.reshape(N, group, -1),
                            rstd.astype(dt)[..., None], (2,))
        gi = gi.reshape(x.shape).astype(x.dtype)
    if mask[1]:
        gw = (g3 * xhat).sum(axis=(0, 2)).astype(g.dtype)
    if mask[2]:
        gb = g3.sum(axis=(0, 2)).astype(g.dtype)
    return gi, gw, gb


def _group_norm_bwd_decomp(g, x, mean, rstd, w, N, C, HxW, group, mask):
    xg = x.reshape(N, group, -1)
    xc, r = _stats_like_saved(xg, [2], rstd)
    xhat = (xc * r).reshape(N, C, -1)
    g3 = g.reshape(N, C, -1)
    gi = gw = gb = None
    if mask[0]:
        gx = g3 * w.reshape(1, C, 1) if w is not None else g3
        gi = _normalize_bwd_ops(gx.reshape(N, group, -1), xhat.reshape(N, group, -1), r, [2])
        gi = gi.reshape(x.shape)
    if mask[1]:
        gw = (g3 * xhat).sum([0, 2])
    if mask[2]:
        gb = g3.sum([0, 2])
    return gi, gw, gb


native_group_norm_backward = defop(
    "native_group_norm_backward(Tensor grad_out, Tensor input, Tensor mean, Tensor rstd, "
    "Tensor? weight, SymInt N, SymInt C, SymInt HxW, int group, bool[3] output_mask) -> "
    "(Tensor, Tensor, Tensor)", function=False, method=False,
    kernels={"cpu": _group_norm_bwd_kernel}, decomp=_group_norm_bwd_decomp,
    meta=lambda g, x, m, r, w, N, C, HxW, G, mask: (
        TensorMeta(tuple(x.shape), x.dtype), TensorMeta((C,), x.dtype),
        TensorMeta((C,), x.dtype)), supports="fc")


@saves_outputs(1, 2)
def _group_norm_vjp(grads, out, x, w, b, N, C, HxW, group, eps):
    _, mean, rstd = out
    return native_group_norm_backward(grads[0], x, mean, rstd, w, N, C, HxW, group,
                                      [_req(x), _req(w), _req(b)])


native_group_norm = defop(
    "native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, "
    "SymInt HxW, int group, float eps) -> (Tensor, Tensor, Tensor)", method=False,
    kernels={"cpu": _group_norm_kernel}, vjp=_group_norm_vjp,
    meta=lambda x, w, b, N, C, HxW, G, eps: (TensorMeta(tuple(x.shape), x.dtype),
                                             TensorMeta((N, G), x.dtype),
                                             TensorMeta((N, G), x.dtype)), supports="fc")


def _group_norm(x, num_groups, w, b, eps):
    if x.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{x.ndim}")
    N, C = x.shape[:2]
    if C % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, "
                           f"but got input of shape {_shape_str(x.shape)} and num_groups="
                           f"{num_groups}")
    for t, name in ((w, "weight"), (b, "bias")):
        if t is not None and (t.ndim != 1 or t.shape[0] != C):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of "
                               f"channels in input, but got {name} of shape "
                               f"{_shape_str(t.shape)} and input of shape {_shape_str(x.shape)}")
    hxw = math.prod(x.shape[2:])
    return native_group_norm(x, w, b, N, C, hxw, num_groups, eps)[0]


defop("group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05, bool cudnn_enabled=True) -> Tensor", method=False,
      decomp=lambda x, g, w, b, eps, cud: _group_norm(x, g, w, b, eps))


# ---- batch_norm -------------------------------------------------------------------------------
def _bn_axes(x):
    return (0,) + tuple(range(2, x.ndim))


def _batch_norm_kernel(x, w, b, rm, rv, training, momentum, eps):
    """Functional batch norm: (out, save_mean, save_invstd, new running_mean, new running_var);
    nothing is mutated here (native_batch_norm below writes the new stats back)."""
    axes = _bn_axes(x)
    C = x.shape[1]
    shape = _affine_shape(x.ndim, 1, C)
    new_rm = new_rv = None
    if training:
        n = x.size // C
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {_shape_str(x.shape)}")
        xhat, mean, rstd = _normalize_fwd(x, axes, eps)
        mean, rstd = mean.reshape(C), rstd.reshape(C)
        if rm is not None:
            new_rm = ((1 - momentum) * rm + momentum * mean).astype(rm.dtype)
        if rv is not None:
            xc = x.astype(_cdt(x)) - mean.reshape(shape)
            var_unbiased = (xc * xc).sum(axis=axes) / (n - 1)
            new_rv = ((1 - momentum) * rv + momentum * var_unbiased).astype(rv.dtype)
    else:
        dt = _cdt(x)
        mean = rm.astype(dt)
        rstd = 1.0 / np.sqrt(rv.astype(dt) + eps)
        xhat = (x.astype(dt) - mean.reshape(shape)) * rstd.reshape(shape)
    y = xhat
    if w is not None:
        y = y * w.astype(y.dtype).reshape(shape)
    if b is not None:
        y = y + b.astype(y.dtype).reshape(shape)
    sdt = np.float32 if x.dtype.itemsize < 4 else x.dtype
    return y.astype(x.dtype, copy=False), mean.astype(sdt), rstd.astype(sdt), new_rm, new_rv


def _batch_norm_bwd_kernel(g, x, w, rm, rv, save_mean, save_invstd, train, eps, mask):
    axes = _bn_axes(x)
    C = x.shape[1]
    shape = _affine_shape(x.ndim, 1, C)
    dt = _cdt(x)
    g = g.astype(dt, copy=False)
    mean, rstd = save_mean.astype(dt).reshape(shape), save_invstd.astype(dt).reshape(shape)
    xhat = (x.astype(dt) - mean) * rstd
    gi = gw = gb = None
    if mask[0]:
        gxhat = g * w.astype(dt).reshape(shape) if w is not None else g
        gi = _normalize_bwd(gxhat, xhat, rstd, axes) if train else gxhat * rstd
        gi = gi.astype(x.dtype)
    if mask[1] and w is not None:
        gw = (g * xhat).sum(axis=axes).astype(w.dtype)
    if mask[2]:
        gb = g.sum(axis=axes).astype(x.dtype if w is None else w.dtype)
    return gi, gw, gb


def _batch_norm_bwd_decomp(g, x, w, rm, rv, save_mean, save_invstd, train, eps, mask):
    axes = list(_bn_axes(x))
    shape = _affine_shape(x.ndim, 1, x.shape[1])
    if train:
        xc, r = _stats_like_saved(x, axes, save_invstd)
    else:
        xc, r = x - save_mean.reshape(shape), save_invstd.reshape(shape)
    xhat = xc * r
    gi = gw = gb = None
    if mask[0]:
        gx = g * w.reshape(shape) if w is not None else g
        gi = _normalize_bwd_ops(gx, xhat, r, axes) if train else gx * r
    if mask[1] and w is not None:
        gw = (g * xhat).sum(axes)
    if mask[2]:
        gb = g.sum(axes)
    return gi, gw, gb


native_batch_norm_backward = defop(
    "native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight, Tensor? "
    "running_mean, Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, bool train, "
    "float eps, bool[3] output_mask) -> (Tensor, Tensor, Tensor)", function=False, method=False,
    kernels={"cpu": _batch_norm_bwd_kernel}, decomp=_batch_norm_bwd_decomp,
    meta=lambda g, x, w, *rest: (TensorMeta(tuple(x.shape), x.dtype),
                                 TensorMeta((x.shape[1],), x.dtype),
                                 TensorMeta((x.shape[1],), x.dtype)), supports="fc")


@saves_outputs(1, 2)  # save_mean and save_invstd: the result may be changed in place after
def _batch_norm_vjp(grads, out, x, w, b, rm, rv, training, momentum, eps):
    mean, invstd = out[1], out[2]
    # the saved stats cover eval mode too, so the buffers (mutated right after) are not saved
    return native_batch_norm_backward(grads[0], x, w, None, None, mean, invstd, training, eps,
                                      [_req(x), _req(w), _req(b)])


def _batch_norm_meta(x, w, b, rm, rv, training, momentum, eps):
    c = x.shape[1]
    return (TensorMeta(tuple(x.shape), x.dtype), TensorMeta((c,), x.dtype),
            TensorMeta((c,), x.dtype), None if rm is None else TensorMeta((c,), rm.dtype),
            None if rv is None else TensorMeta((c,), rv.dtype))


# the functional form (new running stats as outputs) carries the kernel and the vjp, so autograd
# and tracing see a pure op; native_batch_norm writes the stats back into the buffers
batch_norm_functional = defop(
    "_native_batch_norm_legit_functional(Tensor input, Tensor? weight, Tensor? bias, "
    "Tensor? running_mean, Tensor? running_var, bool training, float momentum, float eps) -> "
    "(Tensor, Tensor, Tensor, Tensor, Tensor)", function=False, method=False,
    kernels={"cpu": _batch_norm_kernel}, meta=_batch_norm_meta, vjp=_batch_norm_vjp,
    differentiable=("input", "weight", "bias"), supports="fc")


def _native_batch_norm(x, w, b, rm, rv, training, momentum, eps):
    y, mean, invstd, new_rm, new_rv = batch_norm_functional(x, w, b, rm, rv, training,
                                                            momentum, eps)
    if training and (rm is not None or rv is not None):
        import ember
        with ember.no_grad():
            if rm is not None:
                rm.copy_(new_rm)
            if rv is not None:
                rv.copy_(new_rv)
    return y, mean, invstd


native_batch_norm = defop(
    "native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!)? running_mean, "
    "Tensor(b!)? running_var, bool training, float momentum, float eps) -> "
    "(Tensor, Tensor, Tensor)", method=False, decomp=_native_batch_norm)


def _check_bn(x, w, b, rm, rv, training):
    if x.ndim < 2:
        raise ValueError(f"Expected 2D or 3D input (got {x.ndim}D input)")
    C = x.shape[1]
    for t, name in ((rm, "running_mean"), (rv, "running_var"), (w, "weight"), (b, "bias")):
        if t is not None and t.numel() != C:
            raise RuntimeError(f"{name} should contain {C} elements not {t.numel()}")
    if not training and (rm is None or rv is None):
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")


def _batch_norm(x, w, b, rm, rv, training, momentum, eps, cudnn_enabled):
    _check_bn(x, w, b, rm, rv, training)
    return native_batch_norm(x, w, b, rm, rv, training, momentum, eps)[0]


defop("batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, "
      "Tensor? running_var, bool training, float momentum, float eps, bool cudnn_enabled) -> "
      "Tensor", method=False, decomp=_batch_norm)


def _instance_norm(x, w, b, rm, rv, use_input_stats, momentum, eps, cudnn_enabled):
    """Batch norm of the (1, N*C, *S) view: each (n, c) plane normalised by its own stats."""
    N, C = x.shape[:2]
    xr = x.reshape(1, N * C, *x.shape[2:])

    def rep(t):
        return None if t is None else t.unsqueeze(0).expand(N, C).reshape(N * C)
    rm_r = None if rm is None else rep(rm).clone()
    rv_r = None if rv is None else rep(rv).clone()
    y = native_batch_norm(xr, rep(w), rep(b), rm_r, rv_r, use_input_stats, momentum, eps)[0]
    import ember
    with ember.no_grad():
        if use_input_stats and rm is not None:
            rm.copy_(rm_r.reshape(N, C).mean(0))
        if use_input_stats and rv is not None:
            rv.copy_(rv_r.reshape(N, C).mean(0))
    return y.reshape(x.shape)


defop("instance_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, "
      "Tensor? running_var, bool use_input_stats, float momentum, float eps, "
      "bool cudnn_enabled) -> Tensor", method=False, decomp=_instance_norm)


# ---- rms_norm, local_response_norm ------------------------------------------------------------
def _rms_norm(x, nshape, w, eps):
    nshape = _nshape(nshape)
    axes = _check_layer_norm(x, nshape, w, None)
    if eps is None:
        import ember
        eps = ember.finfo(x.dtype).eps
    dims = list(axes)
    y = x * ((x * x).mean(dims, keepdim=True) + eps).rsqrt()
    return y if w is None else y * w


defop("rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) "
      "-> Tensor", method=False, functional="rms_norm", decomp=_rms_norm, supports="fc")


def _local_response_norm(x, size, alpha, beta, k):
    if x.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {x.ndim} dimensions)")
    if x.numel() == 0:
        return x
    C = x.shape[1]
    sq = x * x
    # sum over a window of `size` channels around each channel (zero padded), / size
    pad = [0, 0] * (x.ndim - 2) + [size // 2, (size - 1) // 2]
    sqp = OPS["constant_pad_nd"](sq, pad, 0)
    acc = sqp.narrow(1, 0, C)
    for i in range(1, size):
        acc = acc + sqp.narrow(1, i, C)
    div = (acc * (alpha / size) + k) ** beta
    return x / div


defop("_nn_local_response_norm(Tensor input, int size, float alpha=0.0001, float beta=0.75, "
      "float k=1.0) -> Tensor", function=False, method=False, functional="local_response_norm",
      decomp=_local_response_norm)
