"""Losses. nll_loss is a kernel (a gather by class index, with its backward a scatter); the others
are decompositions into pointwise ops and reductions, so autograd needs no extra rules.

`reduction` is an int as in ATen's schemas (0 none, 1 mean, 2 sum); the F wrappers in
ember/nn/_functional_loss.py take PyTorch's strings.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dispatch
from .. import _dtype as D
from .._dispatch import TensorMeta
from .._tensor import Tensor
from . import _cpu_norm
from ._registry import OPS, defop

NONE, MEAN, SUM = 0, 1, 2


def _e():
    import ember
    return ember


def reduce(x, reduction):
    if reduction == NONE:
        return x
    if reduction == SUM:
        return x.sum()
    return x.mean()


def _where(c, a, b):
    return _e().where(c, a, b)


# ---- nll_loss (kernel) --------------------------------------------------------------------------
def _nll_checks(x, t, w):
    """PyTorch's argument checks of nll_loss from shapes and dtypes (x, t, w: numpy arrays in
    the kernels, Tensors in the metas). Returns the number of classes."""
    if x.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {x.ndim})")
    td = t.dtype if isinstance(t.dtype, D.dtype) else D.from_numpy_dtype(t.dtype)
    if td._cat != 1:
        from .._dispatch import torch_name
        raise RuntimeError(f"expected scalar type Long but found {torch_name(td)}")
    xs, ts = tuple(x.shape), tuple(t.shape)
    if x.ndim == 1:
        if t.ndim > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        C = xs[0]
    else:
        C = xs[1]
        if ts[:1] != xs[:1]:
            raise ValueError(f"Expected input batch_size ({xs[0]}) to match target "
                             f"batch_size ({ts[0] if t.ndim else 1}).")
        if ts[1:] != xs[2:]:
            raise RuntimeError(f"size mismatch (got input: {_shape_str(xs)}, target: "
                               f"{_shape_str(ts)})")
    if w is not None and tuple(w.shape) != (C,):
        raise RuntimeError(f"weight tensor should be defined either for all {C} classes or no "
                           f"classes but got weight tensor of shape: {_shape_str(w.shape)}")
    return C


def _nll_prepare(x, t, w, ignore_index, name="nll_loss"):
    """Class-last view of x, targets made safe to gather, per-element weights (0 when ignored)."""
    C = _nll_checks(x, t, w)
    if x.ndim == 1:
        xm = x[None]
        t = t.reshape(1)
    else:
        xm = np.moveaxis(x, 1, -1)
    keep = t != ignore_index
    bad = keep & ((t < 0) | (t >= C))
    if bad.any():
        raise IndexError(f"Target {int(t[bad].flat[0])} is out of bounds.")
    ts = np.where(keep, t, 0)
    dt = np.float64 if x.dtype == np.float64 else np.float32
    wt = (w.astype(dt)[ts] if w is not None else np.ones(ts.shape, dt)) * keep
    return xm, ts, wt


def _shape_str(s):
    return "[" + ", ".join(str(v) for v in s) + "]"


def _nll_kernel(x, t, w, reduction, ignore_index):
    xm, ts, wt = _nll_prepare(x, t, w, ignore_index)
    picked = np.take_along_axis(xm, ts[..., None], -1)[..., 0].astype(wt.dtype)
    loss = -picked * wt
    total = wt.sum()
    if reduction == NONE:
        out = loss.reshape(t.shape) if x.ndim > 1 else loss.reshape(())
    elif reduction == SUM:
        out = loss.sum()
    else:
        with np.errstate(all="ignore"):
            out = loss.sum() / total
    return np.asarray(out, x.dtype), np.asarray(total, x.dtype)


def _nll_backward_kernel(g, x, t, w, reduction, ignore_index, total_weight):
    xm, ts, wt = _nll_prepare(x, t, w, ignore_index)
    g = g.astype(wt.dtype)
    if reduction == NONE:
        coef = -wt * g.reshape(wt.shape)
    elif reduction == SUM:
        coef = -wt * g
    else:
        coef = -wt * g / total_weight.astype(wt.dtype)
    gm = np.zeros(xm.shape, wt.dtype)
    np.put_along_axis(gm, ts[..., None], coef[..., None], -1)
    gx = gm[0] if x.ndim == 1 else np.moveaxis(gm, -1, 1)
    return np.ascontiguousarray(gx).astype(x.dtype)


def _nll_meta(x, t, w, reduction, ii):
    _nll_checks(x, t, w)
    shape = tuple(t.shape) if reduction == NONE and x.ndim > 1 else ()
    return TensorMeta(shape, x.dtype), TensorMeta((), x.dtype)


def _nll_backward_meta(g, x, t, w, *rest):
    _nll_checks(x, t, w)
    return TensorMeta(tuple(x.shape), x.dtype)


nll_loss_backward = defop(
    "nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, "
    "int reduction, SymInt ignore_index, Tensor total_weight) -> Tensor", function=False,
    method=False, kernels={"cpu": _nll_backward_kernel}, differentiable=("grad_output",),
    meta=_nll_backward_meta,
    # nll_loss is linear in its input: the backward's own vjp is the forward again
    vjp=lambda gg, out, g, x, t, w, r, ii, tw: (nll_loss_forward(gg, t, w, r, ii)[0],),
    supports="fc")
nll_loss_forward = defop(
    "nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, "
    "SymInt ignore_index) -> (Tensor output, Tensor total_weight)", function=False, method=False,
    kernels={"cpu": _nll_kernel}, meta=_nll_meta, differentiable=("self",),
    vjp=lambda grads, out, x, t, w, r, ii: (nll_loss_backward(grads[0], x, t, w, r, ii, out[1]),),
    supports="fc")
defop("nll_loss_nd(Tensor self, Tensor target, Tensor? weight=None, int reduction=1, "
      "SymInt ignore_index=-100) -> Tensor", method=False, function=False,
      decomp=lambda x, t, w, r, ii: nll_loss_forward(x, t, w, r, ii)[0])


# ---- cross_entropy ------------------------------------------------------------------------------
# Eager CPU calls of the common case (2-d float32/64 logits, class indices, no label smoothing)
# run log_softmax + nll_loss as one op whose backward is one C++ pass per row from the logits
# (was a zero fill, a scatter and log_softmax's backward). Its decomposition is the two ops:
# traced graphs (modes on), other devices and create_graph see what they saw before.
def _lsm_nll_kernel(x, t, w, reduction, ignore_index):
    return _nll_kernel(OPS["log_softmax"].kernels["cpu"](x, 1, None), t, w, reduction,
                       ignore_index)


def _lsm_nll_backward_kernel(g, x, t, w, reduction, ignore_index, total_weight):
    _, ts, wt = _nll_prepare(x, t, w, ignore_index)
    g = g.astype(wt.dtype).reshape(wt.shape) if reduction == NONE else g.astype(wt.dtype)
    if reduction == MEAN:
        with np.errstate(all="ignore"):
            g = g / total_weight.astype(wt.dtype)
    with np.errstate(all="ignore"):   # ignored rows get 0 (torch skips them: no 0 * inf)
        c = np.where(t.reshape(wt.shape) != ignore_index, wt * g, 0).astype(wt.dtype)
    gi = _cpu_norm.cross_entropy_backward(x, ts, c.astype(x.dtype))
    if gi is None:   # numpy: the same formula, c * (softmax(x) - onehot(t))
        sm = OPS["softmax"].kernels["cpu"](x, 1, None).astype(wt.dtype)
        with np.errstate(all="ignore"):
            gi = sm * c[:, None]
            gi[np.arange(len(ts)), ts] -= c
        gi = gi.astype(x.dtype)
    return gi


def _lsm_nll_meta(x, t, w, reduction, ii):
    if x.ndim != 2:
        raise RuntimeError(f"_log_softmax_nll: expected 2-d input, got {x.ndim}-d")
    return _nll_meta(x, t, w, reduction, ii)


def _lsm_nll_backward_decomp(g, x, t, w, reduction, ii, total):
    lp = OPS["log_softmax"](x, 1)
    return OPS["_log_softmax_backward_data"](nll_loss_backward(g, lp, t, w, reduction, ii, total),
                                             lp, 1, x.dtype)


_lsm_nll_backward = defop(
    "_log_softmax_nll_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, "
    "int reduction, SymInt ignore_index, Tensor total_weight) -> Tensor",
    function=False, method=False, kernels={"cpu": _lsm_nll_backward_kernel},
    meta=lambda g, x, t, w, r, ii, tw: _lsm_nll_meta(x, t, w, r, ii) and TensorMeta(
        tuple(x.shape), x.dtype),
    decomp=_lsm_nll_backward_decomp, differentiable=("grad_output", "self"), supports="fc")
_lsm_nll = defop(
    "_log_softmax_nll(Tensor self, Tensor target, Tensor? weight, int reduction, "
    "SymInt ignore_index) -> (Tensor output, Tensor total_weight)",
    function=False, method=False, kernels={"cpu": _lsm_nll_kernel}, meta=_lsm_nll_meta,
    decomp=lambda x, t, w, r, ii: nll_loss_forward(OPS["log_softmax"](x, 1), t, w, r, ii),
    differentiable=("self",), supports="fc",
    vjp=lambda grads, out, x, t, w, r, ii: (_lsm_nll_backward(grads[0], x, t, w, r, ii,
                                                              out[1]),))


def _fused_ok(x, t, label_smoothing) -> bool:
    return (label_smoothing <= 0 and x.__class__ is Tensor and x.device.type == "cpu"
            and x.ndim == 2 and x.dtype in (D.float32, D.float64)
            and not t.dtype.is_floating_point and not _dispatch.special[0])


def _cross_entropy(x, t, w, reduction, ignore_index, label_smoothing):
    if _fused_ok(x, t, label_smoothing):
        return _lsm_nll(x, t, w, reduction, ignore_index)[0]
    cdim = 1 if x.ndim >= 2 else 0
    C = x.shape[cdim]
    logp = OPS["log_softmax"](x, cdim)
    wb = None if w is None else w.reshape([C] + [1] * (x.ndim - cdim - 1))
    if t.dtype.is_floating_point:                     # class probabilities
        if tuple(t.shape) != tuple(x.shape):
            raise RuntimeError(f"Expected target size {_shape_str(x.shape)}, got "
                               f"{_shape_str(t.shape)}")
        if label_smoothing > 0:
            t = t * (1 - label_smoothing) + label_smoothing / C
        lw = logp * t if wb is None else logp * t * wb
        loss = -lw.sum(cdim)
        if reduction == MEAN:
            n = x.numel() // C if x.numel() else 0
            return loss.sum() / n
        return reduce(loss, reduction)
    out, total = nll_loss_forward(logp, t, w, reduction, ignore_index)
    if label_smoothing <= 0:
        return out
    smooth = -(logp if wb is None else logp * wb).sum(cdim)          # (N, *d)
    smooth = _where(t != ignore_index, smooth, 0.0)
    if reduction == MEAN:
        smooth = smooth.sum() / total
    else:
        smooth = reduce(smooth, reduction)
    return out * (1 - label_smoothing) + smooth * (label_smoothing / C)


defop("cross_entropy_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=1, "
      "SymInt ignore_index=-100, float label_smoothing=0.0) -> Tensor", method=False,
      function=False, decomp=_cross_entropy)


# ---- pointwise losses ---------------------------------------------------------------------------
# names torch exposes only in torch._C._nn (not as torch.<name>) stay out of ember.<name> too
_NN_ONLY = {"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "multi_margin_loss",
            "multilabel_margin_loss"}


def _loss(schema, fn, **kw):
    defop(schema, method=False, decomp=fn, function=schema[:schema.index("(")] not in _NN_ONLY,
          **kw)


_loss("mse_loss(Tensor self, Tensor target, int reduction=1) -> Tensor",
      lambda x, t, r: reduce((x - t) * (x - t), r), supports="fc")
_loss("l1_loss(Tensor self, Tensor target, int reduction=1) -> Tensor",
      lambda x, t, r: reduce((x - t).abs(), r))


def _smooth_l1(x, t, r, beta):
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = (x - t).abs()
    if beta == 0:
        return reduce(d, r)
    return reduce(_where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), r)


def _huber(x, t, r, delta):
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = (x - t).abs()
    return reduce(_where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), r)


_loss("smooth_l1_loss(Tensor self, Tensor target, int reduction=1, float beta=1.0) -> Tensor",
      _smooth_l1, supports="fc")
_loss("huber_loss(Tensor self, Tensor target, int reduction=1, float delta=1.0) -> Tensor",
      _huber, supports="fc")


def _bce(x, t, w, r):
    if tuple(x.shape) != tuple(t.shape):
        raise ValueError(f"Using a target size ({_e().Size(t.shape)}) that is different to the "
                         f"input size ({_e().Size(x.shape)}) is deprecated. Please ensure they "
                         f"have the same size.")
    if x.device.type == "cpu" and x.numel() and not bool(((x >= 0) & (x <= 1)).all()):
        raise RuntimeError("all elements of input should be between 0 and 1")
    e = _e()
    # PyTorch clamps the logs at -100 so that x = 0 or 1 gives a finite loss
    logx = e.maximum(x.log(), e.tensor(-100.0, dtype=x.dtype))
    log1mx = e.maximum((1 - x).log(), e.tensor(-100.0, dtype=x.dtype))
    loss = -(t * logx + (1 - t) * log1mx)
    return reduce(loss if w is None else loss * w, r)


_loss("binary_cross_entropy(Tensor self, Tensor target, Tensor? weight=None, int reduction=1) "
      "-> Tensor", _bce, supports="fc")


def _bce_logits(x, t, w, pw, r):
    e = _e()
    sp = (-x.abs()).exp().log1p() + e.maximum(-x, e.zeros_like(x))   # softplus(-x), stable
    if pw is not None:
        loss = (1 - t) * x + ((pw - 1) * t + 1) * sp
    else:
        loss = (1 - t) * x + sp
    return reduce(loss if w is None else loss * w, r)


_loss("binary_cross_entropy_with_logits(Tensor self, Tensor target, Tensor? weight=None, "
      "Tensor? pos_weight=None, int reduction=1) -> Tensor", _bce_logits, supports="fc")


def _kl_div(x, t, r, log_target):
    if log_target:
        loss = t.exp() * (t - x)
    else:
        safe = _where(t > 0, t, 1.0)
        loss = t * safe.log() - t * x      # xlogy(t, t) - t * x
    return reduce(loss, r)


_loss("kl_div(Tensor self, Tensor target, int reduction=1, *, bool log_target=False) -> Tensor",
      _kl_div, supports="fc")


def _cosine_embedding(x1, x2, y, margin, r):
    if x1.ndim != x2.ndim or tuple(x1.shape) != tuple(x2.shape):
        raise RuntimeError(f"cosine_embedding_loss: Input1 and Input2 must have the same shape, "
                           f"but got {_shape_str(x1.shape)} and {_shape_str(x2.shape)}")
    d = 1 if x1.ndim == 2 else 0
    eps = 1e-12
    prod = (x1 * x2).sum(d)
    denom = (((x1 * x1).sum(d) + eps) * ((x2 * x2).sum(d) + eps)).sqrt()
    cos = prod / denom
    e = _e()
    neg = e.maximum(cos - margin, e.zeros_like(cos))
    loss = _where(y == 1, 1 - cos, 0.0) + _where(y == -1, neg, 0.0)
    return reduce(loss, r)


_loss("cosine_embedding_loss(Tensor input1, Tensor input2, Tensor target, float margin=0.0, "
      "int reduction=1) -> Tensor", _cosine_embedding)


def _relu0(v):
    e = _e()
    return e.maximum(v, e.zeros_like(v))


_loss("margin_ranking_loss(Tensor input1, Tensor input2, Tensor target, float margin=0.0, "
      "int reduction=1) -> Tensor",
      lambda a, b, y, m, r: reduce(_relu0(-y * (a - b) + m), r))
_loss("hinge_embedding_loss(Tensor self, Tensor target, float margin=1.0, int reduction=1) -> "
      "Tensor", lambda x, y, m, r: reduce(_where(y != 1, _relu0(m - x), 0.0)
                                          + _where(y != -1, x, 0.0), r), supports="fc")
_loss("soft_margin_loss(Tensor self, Tensor target, int reduction=1) -> Tensor",
      lambda x, y, r: reduce((-y * x).exp().log1p(), r), supports="fc")


def _logsigmoid(x):
    e = _e()
    return -((-x.abs()).exp().log1p() + e.maximum(-x, e.zeros_like(x)))


def _multilabel_soft_margin(x, y, w, r):
    loss = -(y * _logsigmoid(x) + (1 - y) * _logsigmoid(-x))
    if w is not None:
        loss = loss * w
    loss = loss.sum(x.ndim - 1) / x.shape[-1]
    return reduce(loss, r)


_loss("multilabel_soft_margin_loss(Tensor self, Tensor target, Tensor? weight=None, "
      "int reduction=1) -> Tensor", _multilabel_soft_margin, supports="fc")


def _poisson_nll(x, t, log_input, full, eps, r):
    if log_input:
        loss = x.exp() - t * x
    else:
        loss = x - t * (x + eps).log()
    if full:
        safe = _where(t > 1, t, 1.0)
        stirling = safe * safe.log() - safe + (safe * (2 * math.pi)).log() * 0.5
        loss = loss + _where(t > 1, stirling, 0.0)
    return reduce(loss, r)


_loss("poisson_nll_loss(Tensor input, Tensor target, bool log_input, bool full, float eps, "
      "int reduction) -> Tensor", _poisson_nll)


def _gaussian_nll(x, t, var, full, eps, r):
    if tuple(var.shape) != tuple(x.shape):
        if tuple(x.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif tuple(x.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1:
            pass
        else:
            raise ValueError("var is of incorrect size")
    if bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    e = _e()
    # clamp var at eps without stopping its gradient (PyTorch clamps a clone under no_grad)
    var = var + (e.maximum(var, e.full_like(var, eps)) - var).detach()
    loss = (var.log() + (x - t) * (x - t) / var) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduce(loss, r)


_loss("gaussian_nll_loss(Tensor input, Tensor target, Tensor var, bool full=False, "
      "float eps=1e-06, int reduction=1) -> Tensor", _gaussian_nll, supports="fc")


def _triplet(a, p, n, margin, pnorm, eps, swap, r):
    pd = OPS["pairwise_distance"]
    d_ap = pd(a, p, pnorm, eps)
    d_an = pd(a, n, pnorm, eps)
    if swap:
        d_an = _e().minimum(d_an, pd(p, n, pnorm, eps))
    return reduce(_relu0(d_ap - d_an + margin), r)


_loss("triplet_margin_loss(Tensor anchor, Tensor positive, Tensor negative, float margin=1.0, "
      "float p=2, float eps=1e-06, bool swap=False, int reduction=1) -> Tensor", _triplet)
