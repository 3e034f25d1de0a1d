"""Less common nn ops, all decompositions: channel_shuffle, pdist, lp_pool, max_unpool,
multi_margin_loss, multilabel_margin_loss, rrelu, and ctc_loss (a numpy kernel: the alpha/beta
recursions over time, vectorised over batch and label positions).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._dispatch import TensorMeta, torch_name
from ._registry import OPS, defop
from .conv import ntuple
from .loss import reduce


def _e():
    import ember
    return ember


def _channel_shuffle(x, groups):
    if x.ndim <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with "
                           f"sizes {list(x.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of "
                           f"groups:{groups}")
    N, C, *rest = x.shape
    if C % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {C} channels and "
                           f"{groups} groups.")
    y = x.reshape(N, groups, C // groups, *rest).transpose(1, 2)
    return y.reshape(x.shape)


defop("channel_shuffle(Tensor self, SymInt groups) -> Tensor", method=False,
      functional="channel_shuffle", decomp=_channel_shuffle)
defop("native_channel_shuffle(Tensor self, SymInt groups) -> Tensor", method=False,
      functional="native_channel_shuffle", decomp=_channel_shuffle)


def _pdist(x, p):
    if x.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {x.ndim}D")
    n = x.shape[0]
    i, j = np.triu_indices(n, 1)
    e = _e()
    ii, jj = e.tensor(i, device=x.device), e.tensor(j, device=x.device)
    if len(i) == 0:
        return x.new_zeros((0,))
    return (x[ii] - x[jj]).norm(p, 1)


defop("pdist(Tensor self, float p=2) -> Tensor", method=False, functional="pdist",
      decomp=_pdist)


# ---- lp_pool, max_unpool -------------------------------------------------------------------
def _lp_pool(n):
    def decomp(x, norm_type, kernel_size, stride, ceil_mode):
        k = ntuple(kernel_size, n)
        avg = OPS[f"avg_pool{n}d"]
        s = [] if stride is None else stride
        out = avg(x.pow(norm_type), k, s, 0, ceil_mode)
        # sign(out) * relu(|out|) keeps the sign of odd powers while clamping rounding noise
        return (out.sign() * out.abs().relu()).mul(math.prod(k)).pow(1.0 / norm_type)
    defop(f"_lp_pool{n}d(Tensor input, float norm_type, int[{n}] kernel_size, int[{n}]? "
          f"stride=None, bool ceil_mode=False) -> Tensor", function=False, method=False,
          functional=f"lp_pool{n}d", decomp=decomp)


def _unpool_size(x, k, s, p, output_size, n):
    """PyTorch's unpool output size: the default one, or output_size checked to lie within a
    stride of it (with or without the leading batch and channel sizes)."""
    default = [(x.shape[x.ndim - n + i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(n)]
    if output_size is None:
        out = default
    else:
        if len(output_size) == n + 2:
            output_size = output_size[2:]
        if len(output_size) != n:
            raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} "
                             f"elements, but it has a length of '{len(output_size)}'")
        for d in range(n):
            lo, hi = default[d] - s[d], default[d] + s[d]
            if not lo < output_size[d] < hi:
                raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between '
                                 f'{lo} and {hi})')
        out = list(output_size)
    for d in range(n):
        if out[d] < 0:
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial "
                             f"dimensions, but got output_size[{d}]={out[d]}")
    return tuple(int(v) for v in out)


def _max_unpool(n):
    def decomp(x, indices, kernel_size, stride, padding, output_size):
        k = ntuple(kernel_size, n)
        s = k if stride is None else ntuple(stride, n, "stride")
        p = ntuple(padding, n, "padding")
        out = _unpool_size(x, k, s, p, output_size, n)
        if indices.dtype is not D.int64:
            raise RuntimeError(f"elements in indices should be type int64 but got: "
                               f"{torch_name(indices.dtype)}")
        if tuple(indices.shape) != tuple(x.shape):
            raise RuntimeError(f"Expected shape of indices to be same as that of the input "
                               f"tensor ({list(x.shape)}) but got indices tensor with shape: "
                               f"{list(indices.shape)}")
        return _unpool(x, indices, out, n)
    defop(f"_max_unpool{n}d(Tensor input, Tensor indices, int[{n}] kernel_size, int[{n}]? "
          f"stride=None, int[{n}] padding=0, int[]? output_size=None) -> Tensor",
          function=False, method=False, functional=f"max_unpool{n}d", decomp=decomp)


def _unpool_kernel(x, idx, out, n):
    """Place x's values at the flat spatial indices of a zero output (repeats overwrite)."""
    lead = x.shape[:x.ndim - n]
    m = math.prod(lead)
    per = math.prod(out)
    if idx.size and (idx.min() < 0 or idx.max() >= per):
        raise RuntimeError(f"Found an invalid max index: {int(idx.max())} (output volumes are of "
                           f"size {'x'.join(map(str, out))}")
    y = np.zeros((m, per), x.dtype)
    np.put_along_axis(y, idx.reshape(m, -1), x.reshape(m, -1), 1)
    return y.reshape(tuple(lead) + tuple(out))


_unpool = defop(
    "_max_unpool_ember(Tensor self, Tensor indices, SymInt[] output_size, int n) -> Tensor",
    function=False, method=False, kernels={"cpu": _unpool_kernel}, differentiable=("self",),
    meta=lambda x, idx, out, n: TensorMeta(tuple(x.shape[:x.ndim - n]) + tuple(out), x.dtype),
    vjp=lambda g, out, x, idx, o, n: (OPS["_pool_gather"](g, idx, n),), supports="fc")

for _n in (1, 2, 3):
    _lp_pool(_n)
    _max_unpool(_n)


# ---- margin losses -------------------------------------------------------------------------
def _multi_margin(x, t, p, margin, w, r):
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    nd = x.ndim
    if not (nd == 0 or (nd in (1, 2) and x.shape[-1] != 0)):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, "
                           f"but got: {list(x.shape)}")
    N, C = (x.shape[0] if nd == 2 else 1), (x.shape[-1] if nd else 1)
    if t.ndim > 1 or t.numel() != N:
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to "
                           f"the number of input samples (batch size). Expected target size "
                           f"[{N}], but got {list(t.shape)}. Input has shape {list(x.shape)}.")
    if w is not None and (w.ndim > 1 or w.numel() != C):
        raise RuntimeError(f"inconsistent weight size, expected {C} but got {list(w.shape)}")
    x2 = x.reshape(N, C)
    t1 = t.reshape(-1)
    # a value check: meta tensors have no values to check (PyTorch's meta skips it too)
    if t1.device.type != "meta" and t1.numel() and (bool((t1 < 0).any())
                                                    or bool((t1 >= C).any())):
        raise RuntimeError("target out of range")
    xy = x2.gather(1, t1.unsqueeze(1))                                     # (N, 1)
    z = (xy.neg() + x2 + margin).relu()
    if p == 2:
        z = z * z
    if w is not None:
        z = z * w[t1].unsqueeze(1)
    own = OPS["one_hot"](t1, C).bool()
    z = _e().where(own, 0.0, z)
    loss = z.sum(1) / C
    loss = loss.reshape(t.shape) if nd <= 1 else loss     # unbatched: the target's shape
    return reduce(loss, r)


defop("multi_margin_loss(Tensor self, Tensor target, Scalar p=1, Scalar margin=1, "
      "Tensor? weight=None, int reduction=1) -> Tensor", method=False, function=False,
      decomp=_multi_margin, supports="fc")


def _multilabel_margin_check(x, t):
    nd = x.ndim
    if not (nd == 0 or (nd in (1, 2) and x.shape[-1] != 0)):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, "
                           f"but got: {list(x.shape)}")
    C = x.shape[-1] if nd else 1
    ok = (t.ndim <= 1 and t.numel() == C) if nd <= 1 else tuple(t.shape) == tuple(x.shape)
    if not ok:
        raise RuntimeError(f"inconsistent target size: {list(t.shape)} for input of size: "
                           f"{list(x.shape)}")
    if t.device.type != "meta" and t.numel() and (bool((t < -1).any())
                                                  or bool((t >= C).any())):
        raise RuntimeError("argument #2 'target' is out of range")


def _multilabel_margin(x, t, r):
    _multilabel_margin_check(x, t)
    x2 = x.reshape(-1, x.shape[-1] if x.ndim else 1)
    t2 = t.reshape(x2.shape)
    C = x2.shape[1]
    # targets are the class indices before the first -1 of each row
    valid = (t2 >= 0).to(_e().int64).cumprod(1).bool()                    # (N, C)
    ts = _e().where(valid, t2, 0)
    is_target = (OPS["one_hot"](ts, C) * valid.unsqueeze(-1)).sum(1) > 0  # (N, C)
    xy = x2.gather(1, ts)                                                  # (N, Cj)
    m = (1 - (xy.unsqueeze(2) - x2.unsqueeze(1))).relu()                   # (N, Cj, Ci)
    m = m * valid.unsqueeze(2) * (~is_target).unsqueeze(1)
    loss = m.sum((1, 2)) / C
    loss = loss.reshape(()) if x.ndim <= 1 else loss
    return reduce(loss, r)


defop("multilabel_margin_loss(Tensor self, Tensor target, int reduction=1) -> Tensor",
      method=False, function=False, decomp=_multilabel_margin, supports="fc")


# ---- rrelu ---------------------------------------------------------------------------------
def _rrelu(x, lower, upper, training):
    # x > 0, not >= 0: PyTorch puts x == 0 on the slope side, so its gradient there is the slope
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    e = _e()
    if not training:
        a = (lower + upper) / 2
        return e.where(x > 0, x, x * a)
    slope = e.rand(tuple(x.shape), dtype=x.dtype, device=x.device) * (upper - lower) + lower
    return e.where(x > 0, x, x * slope)


defop("rrelu(Tensor self, Scalar lower=0.125, Scalar upper=0.3333333333333333, "
      "bool training=False) -> Tensor", method=False, tags={"random"}, decomp=_rrelu, supports="fc")


# ---- ctc_loss ------------------------------------------------------------------------------
_NEG = -np.inf


def _lse(*xs):
    m = np.maximum.reduce(xs)
    safe = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        return safe + np.log(sum(np.exp(x - safe) for x in xs))


def _ctc_setup(lp, targets, in_lens, tgt_lens, blank):
    T, N, C = lp.shape
    in_lens = np.asarray(in_lens, np.int64).reshape(-1)
    tgt_lens = np.asarray(tgt_lens, np.int64).reshape(-1)
    if targets.ndim == 2:
        tg = targets
    else:      # concatenated 1-D targets
        off = np.concatenate([[0], np.cumsum(tgt_lens)[:-1]])
        L = int(tgt_lens.max()) if N else 0
        tg = np.zeros((N, max(L, 1)), np.int64)
        for b in range(N):
            tg[b, :tgt_lens[b]] = targets[off[b]:off[b] + tgt_lens[b]]
    Lmax = int(tgt_lens.max()) if N else 0
    S = 2 * Lmax + 1
    ext = np.full((N, S), blank, np.int64)               # blank, l1, blank, l2, ..., blank
    ext[:, 1::2] = tg[:, :Lmax]
    s_idx = np.arange(S)
    valid_s = s_idx[None, :] < (2 * tgt_lens[:, None] + 1)
    # a skip from s-2 is allowed onto a label that differs from the label two back
    skip = np.zeros((N, S), bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    return T, N, C, in_lens, tgt_lens, ext, S, valid_s, skip


def _ctc_alpha(lp, ext, S, valid_s, skip, in_lens):
    T, N, _ = lp.shape
    emit = np.take_along_axis(lp, np.broadcast_to(ext[None], (T, N, S)), 2)   # (T, N, S)
    alpha = np.full((T, N, S), _NEG)
    alpha[0, :, 0] = emit[0, :, 0]
    if S > 1:
        alpha[0, :, 1] = emit[0, :, 1]
    alpha[0][~valid_s] = _NEG
    for t in range(1, T):
        prev = alpha[t - 1]
        a1 = np.concatenate([np.full((N, 1), _NEG), prev[:, :-1]], 1)
        a2 = np.concatenate([np.full((N, 2), _NEG), prev[:, :-2]], 1)
        a2 = np.where(skip, a2, _NEG)
        alpha[t] = np.where(valid_s, _lse(prev, a1, a2) + emit[t], _NEG)
    return alpha, emit


def _ctc_targets(targets):
    """targets: a numpy array (the kernel) or a Tensor (the meta)."""
    d = targets.dtype
    d = d if isinstance(d, D.dtype) else D.from_numpy_dtype(d)
    if d._cat != 1:
        raise RuntimeError(f"Expected tensor for argument #2 'targets' to have one of the "
                           f"following scalar types: Int, Long; but got {torch_name(d)} instead "
                           f"(while checking arguments for ctc_loss)")


def _ctc_kernel(lp, targets, in_lens, tgt_lens, blank, zero_infinity):
    _ctc_targets(targets)
    dt = np.float64 if lp.dtype == np.float64 else np.float32
    lpc = lp.astype(np.float64)
    T, N, C, in_lens, tgt_lens, ext, S, valid_s, skip = _ctc_setup(lpc, targets, in_lens,
                                                                   tgt_lens, blank)
    alpha, _ = _ctc_alpha(lpc, ext, S, valid_s, skip, in_lens)
    b = np.arange(N)
    last = alpha[in_lens - 1, b]                                    # (N, S)
    end = 2 * tgt_lens
    ll = _lse(last[b, end], np.where(end > 0, last[b, np.maximum(end - 1, 0)], _NEG))
    nll = -ll
    if zero_infinity:
        nll = np.where(np.isinf(nll), 0, nll)
    return nll.astype(dt), alpha.astype(dt)


def _ctc_backward_kernel(g, lp, targets, in_lens, tgt_lens, nll, alpha, blank, zero_infinity):
    lpc = lp.astype(np.float64)
    T, N, C, in_lens, tgt_lens, ext, S, valid_s, skip = _ctc_setup(lpc, targets, in_lens,
                                                                   tgt_lens, blank)
    emit = np.take_along_axis(lpc, np.broadcast_to(ext[None], (T, N, S)), 2)
    alpha = alpha.astype(np.float64)
    beta = np.full((T, N, S), _NEG)
    b = np.arange(N)
    end = 2 * tgt_lens
    tl = in_lens - 1
    beta[tl, b, end] = emit[tl, b, end]
    has2 = end > 0
    beta[tl[has2], b[has2], end[has2] - 1] = emit[tl[has2], b[has2], end[has2] - 1]
    skip_next = np.zeros((N, S), bool)            # may s jump to s+2?
    skip_next[:, :-2] = skip[:, 2:]
    for t in range(T - 2, -1, -1):
        nxt = beta[t + 1]
        b1 = np.concatenate([nxt[:, 1:], np.full((N, 1), _NEG)], 1)
        b2 = np.concatenate([nxt[:, 2:], np.full((N, 2), _NEG)], 1)
        b2 = np.where(skip_next, b2, _NEG)
        upd = np.where(valid_s, _lse(nxt, b1, b2) + emit[t], _NEG)
        active = (t < tl)[:, None]
        beta[t] = np.where(active, upd, beta[t])
    ll = -nll.astype(np.float64)
    ab = alpha + beta              # both include the emission at t: divide by it once (- lp)
    occ = np.full((T, N, C), _NEG)
    for s in range(S):
        cls = ext[:, s]
        occ[:, b, cls] = _lse(occ[:, b, cls], ab[:, :, s])
    # PyTorch's formula: the gradient as seen through a log_softmax producing log_probs
    # (exp(lp) - occupancy); it equals the logits' gradient after log_softmax's backward
    with np.errstate(over="ignore", invalid="ignore"):
        grad = np.exp(lpc) - np.exp(occ - ll[None, :, None] - lpc)
    t_mask = np.arange(T)[:, None] < in_lens[None, :]
    grad = np.where(t_mask[..., None], grad, 0)
    if zero_infinity:
        # nll has its infinities zeroed already: find the impossible samples from alpha
        last = alpha[tl, b]
        ll_a = _lse(last[b, end], np.where(has2, last[b, np.maximum(end - 1, 0)], _NEG))
        grad = np.where(np.isinf(ll_a)[None, :, None], 0, grad)
    return (grad * g.astype(np.float64).reshape(1, N, 1)).astype(lp.dtype)


_ctc_backward = defop(
    "_ctc_loss_backward_ember(Tensor grad, Tensor log_probs, Tensor targets, int[] input_lengths,"
    " int[] target_lengths, Tensor neg_log_likelihood, Tensor log_alpha, int blank, "
    "bool zero_infinity) -> Tensor", function=False, method=False,
    kernels={"cpu": _ctc_backward_kernel},
    meta=lambda g, lp, *rest: TensorMeta(tuple(lp.shape), lp.dtype))


def _ctc_vjp(grads, out, lp, targets, il, tl, blank, zi):
    return (_ctc_backward(grads[0], lp, targets, il, tl, out[0], out[1], blank, zi),)


_ctc = defop(
    "_ctc_loss(Tensor log_probs, Tensor targets, int[] input_lengths, int[] target_lengths, "
    "int blank=0, bool zero_infinity=False) -> (Tensor, Tensor)", function=False, method=False,
    kernels={"cpu": _ctc_kernel}, differentiable=("log_probs",), vjp=_ctc_vjp,
    meta=lambda lp, tg, il, tl, b, z: _ctc_meta(lp, tg, tl), supports="fc")


def _ctc_meta(lp, targets, tl):
    _ctc_targets(targets)
    return (TensorMeta((lp.shape[1],), lp.dtype),
            TensorMeta((lp.shape[0], lp.shape[1], 2 * max(tl) + 1), lp.dtype))


def _ctc_check(log_probs, targets, il, tl, blank):
    """PyTorch's argument checks (ctc_loss_allocate_outputs), with its messages."""
    T, N, C = log_probs.shape
    where = " (while checking arguments for ctc_loss_allocate_outputs)"
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    if len(il) != N:
        raise RuntimeError("input_lengths must be of size batch_size")
    if len(tl) != N:
        raise RuntimeError("target_lengths must be of size batch_size")
    for v in tl:
        if v < 0:
            raise RuntimeError(f"Expected target_lengths to have value at least 0, but got value "
                               f"{v}{where}")
    # 1-D targets are the concatenation (exactly sum(tl) long); 2-D ones are padded rows
    dims = [(0, sum(tl), "")] if targets.ndim == 1 else \
        [(0, N, ""), (1, max(tl, default=0), "at least ")]
    for d, want, least in dims:
        got = targets.shape[d]
        if (got < want) if least else (got != want):
            raise RuntimeError(f"Expected tensor to have size {least}{want} at dimension {d}, but "
                               f"got size {got} for argument #2 'targets'{where}")
    for v in il:
        if v < 0:
            raise RuntimeError(f"Expected input_lengths to have value at least 0, but got value "
                               f"{v}{where}")
        if v > T:
            raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value "
                               f"{v}{where}")


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity):
    """F.ctc_loss: lengths as tensors or lists; 'mean' divides each loss by its target length."""
    def as_list(v):      # a list, a tensor (0-d for one sample), or an int
        v = v.tolist() if hasattr(v, "tolist") else v
        return [int(a) for a in v] if isinstance(v, (list, tuple)) else [int(v)]
    unb = log_probs.ndim == 2
    if unb:     # one sample; 1-D targets stay the concatenated form (exactly its length long)
        log_probs = log_probs.unsqueeze(1)
    il, tl = as_list(input_lengths), as_list(target_lengths)
    _ctc_check(log_probs, targets, il, tl, blank)
    nll = _ctc(log_probs, targets, il, tl, blank, zero_infinity)[0]
    if reduction == "mean":
        lens = _e().tensor(tl, dtype=nll.dtype, device=nll.device).clamp_min(1)
        return (nll / lens).mean()
    if reduction == "sum":
        return nll.sum()
    return nll[0] if unb else nll
