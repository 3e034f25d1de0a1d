"""nn ops: linear/bilinear, padding, embedding, one_hot, pixel shuffle, glu, dropout, attention,
normalize and distances. Convolutions live in conv.py, pooling in pool.py, norms in norm.py,
losses in loss.py, resampling in sample.py.

Most entries are decompositions into other table ops; kernels appear where numpy does the job in
one call (padding by index, embedding gathers/scatters, one_hot).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._dispatch import TensorMeta
from ._registry import OPS, defop


def _e():
    import ember
    return ember


def _shape_str(s):
    return "[" + ", ".join(str(v) for v in s) + "]"


# ---- linear / bilinear ---------------------------------------------------------------------------
def _linear(x, w, b):
    y = OPS["matmul"](x, w.t())        # (..., in) @ (in, out) -> (..., out)
    return y if b is None else y + b


defop("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", method=False,
      function=False,
      functional="linear", decomp=_linear)


def _bilinear(x1, x2, w, b):
    o, i1, i2 = w.shape
    if x1.shape[:-1] != x2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got "
                           f"{_shape_str(x1.shape[:-1])} and {_shape_str(x2.shape[:-1])}")
    if x1.shape[-1] != i1 or x2.shape[-1] != i2:
        raise RuntimeError(f"bilinear(): input size does not match weight size: got "
                           f"{x1.shape[-1]} and {x2.shape[-1]} but expected {i1} and {i2}")
    lead = tuple(x1.shape[:-1])
    a = OPS["matmul"](x1.reshape(-1, i1), w.permute(1, 0, 2).reshape(i1, o * i2))  # (B, o*i2)
    y = (a.reshape(-1, o, i2) * x2.reshape(-1, 1, i2)).sum(-1)                     # (B, o)
    y = y.reshape(lead + (o,))
    return y if b is None else y + b


defop("bilinear(Tensor input1, Tensor input2, Tensor weight, Tensor? bias=None) -> Tensor",
      method=False, functional="bilinear", decomp=_bilinear)


# ---- padding -------------------------------------------------------------------------------------
def _pad_pairs(pad, ndim, op):
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pad)} and input of dimension "
                           f"{ndim}")
    # PyTorch's order: (last_lo, last_hi, second_last_lo, ...) -> per-dim from the last
    return [(ndim - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]


def _constant_pad_kernel(x, pad, value):
    pairs = _pad_pairs(pad, x.ndim, "constant_pad_nd")
    shape = list(x.shape)
    src = [slice(None)] * x.ndim
    dst = [slice(None)] * x.ndim
    for d, lo, hi in pairs:
        n = shape[d] + lo + hi
        if n < 0:
            raise RuntimeError(f"The input size {shape[d]}, plus negative padding {lo} and {hi} "
                               f"resulted in a negative output size, which is invalid. Check "
                               f"dimension {d} of your input.")
        shape[d] = n
        src[d] = slice(max(-lo, 0), x.shape[d] - max(-hi, 0))
        dst[d] = slice(max(lo, 0), n - max(hi, 0))
    out = np.full(shape, value, x.dtype)
    out[tuple(dst)] = x[tuple(src)]
    return out


def _constant_pad_meta(x, pad, value):
    shape = list(x.shape)
    for d, lo, hi in _pad_pairs(pad, x.ndim, "constant_pad_nd"):
        shape[d] = shape[d] + lo + hi
    return TensorMeta(tuple(shape), x.dtype)


constant_pad_nd = defop(
    "constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor", method=False,
    kernels={"cpu": _constant_pad_kernel}, meta=_constant_pad_meta,
    vjp=lambda g, out, x, pad, value: (constant_pad_nd(g, [-p for p in pad], 0),))


def _pad_index(n, lo, hi, mode):
    """Source index of each output position along one dim of size n padded by (lo, hi)."""
    i = np.arange(-lo, n + hi)
    if mode == "reflect":
        period = 2 * (n - 1)
        i = np.abs(i) % period if period else np.zeros_like(i)
        return np.where(i >= n, period - i, i)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    return i % n    # circular


def _check_index_pad(x_shape, pairs, mode):
    for d, lo, hi in pairs:
        n = x_shape[d]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding "
                               f"input dimension, but got: padding ({lo}, {hi}) at dimension {d} "
                               f"of input {_shape_str(x_shape)}")
        if mode == "circular" and (lo > n or hi > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if mode == "replicate" and n == 0:
            raise RuntimeError(f"padding size is expected to be positive, got input "
                               f"{_shape_str(x_shape)}")


def _index_pad_kernel(x, pad, mode):
    pairs = _pad_pairs(pad, x.ndim, mode)
    _check_index_pad(x.shape, pairs, mode)
    for d, lo, hi in pairs:
        x = np.take(x, _pad_index(x.shape[d], lo, hi, mode), axis=d)
    return x


def _index_pad_backward_kernel(g, input_shape, pad, mode):
    pairs = _pad_pairs(pad, len(input_shape), mode)
    dt = np.float32 if g.dtype.itemsize < 4 else g.dtype
    g = g.astype(dt)
    for d, lo, hi in reversed(pairs):     # undo the gathers in reverse order
        idx = _pad_index(input_shape[d], lo, hi, mode)
        shape = list(g.shape)
        shape[d] = input_shape[d]
        acc = np.zeros(shape, dt)
        np.add.at(acc.swapaxes(0, d), idx, g.swapaxes(0, d))
        g = acc
    return g


def _index_pad_meta(x, pad, mode):
    return _constant_pad_meta(x, pad, 0)


_index_pad_backward = defop(
    "_pad_index_backward(Tensor grad_output, SymInt[] input_size, SymInt[] pad, str mode) -> "
    "Tensor", function=False, method=False, kernels={"cpu": _index_pad_backward_kernel},
    meta=lambda g, size, pad, mode: TensorMeta(tuple(size), g.dtype),
    vjp=lambda gg, out, g, size, pad, mode: (_index_pad(gg, pad, mode),))
_index_pad = defop(
    "_pad_index(Tensor self, SymInt[] pad, str mode) -> Tensor", function=False, method=False,
    kernels={"cpu": _index_pad_kernel}, meta=_index_pad_meta,
    vjp=lambda g, out, x, pad, mode: (_index_pad_backward(g, x.shape, pad, mode).to(x.dtype),))


def _pad(x, pad, mode, value):
    if mode == "constant":
        return constant_pad_nd(x, pad, 0 if value is None else value)
    if value is not None and value != 0:
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument.")
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if len(pad) // 2 > x.ndim - 1 or len(pad) // 2 > 3:
        raise NotImplementedError("Only 2D, 3D, 4D, 5D padding with non-constant padding are "
                                  "supported for now")
    return _index_pad(x, pad, mode)


defop("pad(Tensor self, SymInt[] pad, str mode=\"constant\", float? value=None) -> Tensor",
      method=False, function=False, functional="pad", decomp=_pad)


# ---- embedding -----------------------------------------------------------------------------------
def _check_indices(idx, name, arg="#1"):
    """PyTorch's index-dtype check; idx: a numpy array (kernels) or a Tensor (metas)."""
    d = idx.dtype if isinstance(idx.dtype, D.dtype) else D.from_numpy_dtype(idx.dtype)
    if d._cat != 1:
        from .._dispatch import torch_name
        raise RuntimeError(f"Expected tensor for argument {arg} 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got "
                           f"torch.{torch_name(d)}Tensor instead (while checking arguments for "
                           f"{name})")


def _embedding_meta(w, idx, *_):
    _check_indices(idx, "embedding")
    return TensorMeta(tuple(idx.shape) + (w.shape[1],), w.dtype)


def _embedding_backward_meta(g, idx, n, p, s):
    _check_indices(idx, "embedding_backward", "#2")
    return TensorMeta((n, g.shape[-1]), g.dtype)


def _embedding_renorm_meta(w, idx, max_norm, norm_type):
    _check_indices(idx, "embedding_renorm_", "#2")
    return TensorMeta(tuple(w.shape), w.dtype)


def _embedding_kernel(w, idx, padding_idx, scale_grad_by_freq, sparse):
    _check_indices(idx, "embedding")
    if idx.size and (idx.min() < 0 or idx.max() >= w.shape[0]):
        raise IndexError("index out of range in self")
    return np.take(w, idx, axis=0)


def _embedding_backward_kernel(g, idx, num_weights, padding_idx, scale_grad_by_freq):
    _check_indices(idx, "embedding_backward", "#2")
    dt = np.float32 if g.dtype.itemsize < 4 else g.dtype
    flat = idx.reshape(-1)
    gf = g.reshape(flat.size, g.shape[-1]).astype(dt)
    if scale_grad_by_freq:
        counts = np.bincount(flat, minlength=num_weights)
        gf = gf / counts[flat][:, None]
    if padding_idx >= 0:
        keep = flat != padding_idx
        flat, gf = flat[keep], gf[keep]
    out = np.zeros((num_weights, gf.shape[1]), dt)
    if flat.size:
        # rows grouped by index (a stable sort keeps each row's order), then one summed slice
        # per index: np.add.at's per-element loop took 2 ms for the GPT step's 2048 x 128
        order = np.argsort(flat, kind="stable")
        sf = flat[order]
        starts = np.flatnonzero(np.concatenate(([True], sf[1:] != sf[:-1])))
        out[sf[starts]] = np.add.reduceat(gf[order], starts, axis=0)
    return out.astype(g.dtype, copy=False)


embedding_dense_backward = defop(
    "embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, "
    "SymInt padding_idx, bool scale_grad_by_freq) -> Tensor", function=False, method=False,
    kernels={"cpu": _embedding_backward_kernel}, differentiable=("grad_output",),
    meta=_embedding_backward_meta,
    vjp=lambda gg, out, g, idx, n, p, s: (embedding(gg, idx, p, s, False),))
embedding = defop(
    "embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq="
    "False, bool sparse=False) -> Tensor", method=False, kernels={"cpu": _embedding_kernel},
    differentiable=("weight",),
    meta=_embedding_meta,
    vjp=lambda g, out, w, idx, p, s, sp: (embedding_dense_backward(g, idx, w.shape[0], p, s),))


def _embedding_renorm_kernel(w, idx, max_norm, norm_type):
    _check_indices(idx, "embedding_renorm_", "#2")
    rows = np.unique(idx.reshape(-1))
    sub = w[rows].astype(np.float64)
    norms = np.linalg.norm(sub, ord=norm_type, axis=1) if norm_type != 2 else \
        np.sqrt((sub * sub).sum(1))
    scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
    w[rows] = (sub * scale[:, None]).astype(w.dtype)
    return w


defop("embedding_renorm_(Tensor(a!) self, Tensor indices, float max_norm, float norm_type) -> "
      "Tensor(a!)", method=False, kernels={"cpu": _embedding_renorm_kernel}, differentiable=(),
      meta=_embedding_renorm_meta, supports="fc")


# ---- one_hot, pixel shuffle, glu -----------------------------------------------------------------
def _one_hot_dtype(x):
    """x: a numpy array (the kernel) or a Tensor (the meta)."""
    d = x.dtype if isinstance(x.dtype, D.dtype) else D.from_numpy_dtype(x.dtype)
    if d is not D.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")


def _one_hot_meta(x, n):
    _one_hot_dtype(x)
    return TensorMeta(tuple(x.shape) + (n,), D.int64)


def _one_hot_kernel(x, num_classes):
    _one_hot_dtype(x)
    if x.size and x.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        if x.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(x.max()) + 1
    elif x.size and x.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    return (x[..., None] == np.arange(num_classes)).astype(np.int64)


defop("one_hot(Tensor self, int num_classes=-1) -> Tensor", method=False, functional="one_hot",
      function=False,
      kernels={"cpu": _one_hot_kernel}, differentiable=(),
      meta=_one_hot_meta)


def _pixel_shuffle(x, r):
    if x.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got "
                           f"input with {x.ndim} dimension(s)")
    *lead, c, h, w = x.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    n = len(lead)
    y = x.reshape(*lead, c // (r * r), r, r, h, w)
    y = y.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)      # (..., c, h, r, w, r)
    return y.reshape(*lead, c // (r * r), h * r, w * r)


def _pixel_unshuffle(x, r):
    if x.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but "
                           f"got input with {x.ndim} dimension(s)")
    *lead, c, h, w = x.shape
    if h % r or w % r:
        which, v = ("height", h) if h % r else ("width", w)
        raise RuntimeError(f"pixel_unshuffle expects {which} to be divisible by "
                           f"downscale_factor, but input.size({-2 if h % r else -1})={v} is not "
                           f"divisible by {r}")
    n = len(lead)
    y = x.reshape(*lead, c, h // r, r, w // r, r)
    y = y.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)      # (..., c, r, r, h, w)
    return y.reshape(*lead, c * r * r, h // r, w // r)


defop("pixel_shuffle(Tensor self, int upscale_factor) -> Tensor", method=False,
      functional="pixel_shuffle", decomp=_pixel_shuffle)
defop("pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor", method=False,
      functional="pixel_unshuffle", decomp=_pixel_unshuffle)


def _glu(x, dim):
    if x.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    from .._size import normalize_dim
    d = normalize_dim(dim, x.ndim)
    n = x.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    a, b = x.narrow(d, 0, n // 2), x.narrow(d, n // 2, n // 2)
    return a * b.sigmoid()


defop("glu(Tensor self, int dim=-1) -> Tensor", method=False, function=False, functional="glu",
      decomp=_glu, supports="fc")


# ---- dropout -----------------------------------------------------------------------------------
def _check_p(p):
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(x, shape, p):
    """Bernoulli(1 - p) mask of `shape` in x's dtype, drawn from ember's generator."""
    return (_e().rand(shape, dtype=x.dtype if x.dtype.is_floating_point else None,
                      device=x.device) >= p).to(x.dtype)


def _feature_shape(x, name):
    if x.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return tuple(x.shape[:2]) + (1,) * (x.ndim - 2)


def _dropout(x, p, train, feature=False):
    _check_p(p)
    if not train or p == 0:
        return x
    if p == 1:
        return x * 0
    mask = _keep_mask(x, _feature_shape(x, "dropout") if feature else tuple(x.shape), p)
    return x * mask * (1.0 / (1 - p))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_ALPHA_P = -_SELU_ALPHA * _SELU_SCALE     # the value SELU saturates to


def _alpha_dropout(x, p, train, feature=False):
    _check_p(p)
    if not train or p == 0:
        return x
    if p == 1:
        return x * 0
    mask = _keep_mask(x, _feature_shape(x, "dropout") if feature else tuple(x.shape), p)
    a = 1.0 / math.sqrt((_ALPHA_P ** 2 * p + 1) * (1 - p))
    b = (mask - 1) * (_ALPHA_P * a) + _ALPHA_P * a * p     # dropped units go to alpha', shifted
    return x * (mask * a) + b


defop("dropout(Tensor input, float p, bool train) -> Tensor", method=False, tags={"random"},
      decomp=_dropout)
defop("feature_dropout(Tensor input, float p, bool train) -> Tensor", method=False,
      tags={"random"}, decomp=lambda x, p, t: _dropout(x, p, t, True))
defop("alpha_dropout(Tensor input, float p, bool train) -> Tensor", method=False,
      tags={"random"}, decomp=_alpha_dropout)
defop("feature_alpha_dropout(Tensor input, float p, bool train) -> Tensor", method=False,
      tags={"random"}, decomp=lambda x, p, t: _alpha_dropout(x, p, t, True))


# ---- attention -----------------------------------------------------------------------------------
def _sdpa(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    from .attention import fused_eligible, sdpa_fused
    if fused_eligible(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa):  # (cuda: flash)
        return sdpa_fused(q, k, v, attn_mask, is_causal, scale)
    e = _e()
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    if enable_gqa and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        hq, hk = q.shape[-3], k.shape[-3]
        if hq % hk:
            raise RuntimeError(f"Number of heads in key and value must divide the number of heads "
                               f"in query, but got {hk} and {hq}")
        r = hq // hk

        def rep(t):     # (..., Hk, S, E) -> (..., Hk*r, S, E), each head repeated r times
            lead = tuple(t.shape[:-3])
            t = t.unsqueeze(-3).expand(*lead, hk, r, t.shape[-2], t.shape[-1])
            return t.reshape(*lead, hk * r, t.shape[-2], t.shape[-1])
        k, v = rep(k), rep(v)
    s = 1.0 / math.sqrt(E) if scale is None else scale
    attn = OPS["matmul"](q, k.transpose(-2, -1)) * s                   # (..., L, S)
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                               "set when is_causal=True")
        attn_mask = e.arange(L, device=q.device).unsqueeze(1) >= \
            e.arange(S, device=q.device).unsqueeze(0)
    if attn_mask is not None:
        if attn_mask.dtype == D.bool:
            attn = e.where(attn_mask, attn, float("-inf"))
        else:
            attn = attn + attn_mask
    attn = OPS["softmax"](attn, -1)
    # rows that are fully masked give NaN in softmax; PyTorch's math path returns zeros there
    # (a causal mask keeps column 0 in every row: no such rows, skip the two passes)
    if attn_mask is not None and not is_causal:
        attn = e.where(attn.isnan(), 0.0, attn)
    if dropout_p > 0:
        attn = _dropout(attn, dropout_p, True)
    return OPS["matmul"](attn, v)


defop("scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask="
      "None, float dropout_p=0.0, bool is_causal=False, *, float? scale=None, bool enable_gqa="
      "False) -> Tensor", method=False, functional="scaled_dot_product_attention",
      decomp=_sdpa)


# ---- normalize, distances ------------------------------------------------------------------------
def _clamp_min(x, v):
    return x.clamp_min(v) if hasattr(x, "clamp_min") else _e().maximum(x, v)


def _normalize(x, p, dim, eps):
    denom = _clamp_min(x.norm(p, dim, keepdim=True), eps)
    return x / denom


defop("_nn_normalize(Tensor input, float p=2.0, int dim=1, float eps=1e-12) -> Tensor",
      function=False, method=False, decomp=_normalize)


def _cosine_similarity(x1, x2, dim, eps):
    from .._size import broadcast_shapes
    shape = broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    x1, x2 = x1.expand(*shape), x2.expand(*shape)
    # each vector is normalised by its norm clamped to eps, as ATen does
    n1 = _clamp_min(x1.norm(2, dim, keepdim=True), eps)
    n2 = _clamp_min(x2.norm(2, dim, keepdim=True), eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


defop("cosine_similarity(Tensor x1, Tensor x2, int dim=1, float eps=1e-08) -> Tensor",
      method=False, functional="cosine_similarity", decomp=_cosine_similarity)


def _pairwise_distance(x1, x2, p, eps, keepdim):
    nd = max(x1.ndim, x2.ndim)
    dim = -1 if nd > 0 else 0
    return (x1 - x2 + eps).norm(p, dim, keepdim=keepdim)


defop("pairwise_distance(Tensor x1, Tensor x2, float p=2, float eps=1e-06, bool keepdim=False)"
      " -> Tensor", method=False, functional="pairwise_distance", decomp=_pairwise_distance)


# ---- embedding_bag -----------------------------------------------------------------------------
_BAG_MODES = {"sum": 0, "mean": 1, "max": 2}


def _bag_layout(idx, offsets, include_last_offset):
    """Bag id of every index (-1 when outside all bags) and the number of bags."""
    n = idx.size
    B = offsets.size - 1 if include_last_offset else offsets.size
    if offsets.size and offsets[0] != 0:
        raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
                           f"has to start from position 0. However, got {int(offsets[0])}")
    pos = np.arange(n)
    bag = np.searchsorted(offsets[:B], pos, side="right") - 1
    if include_last_offset and offsets.size:
        bag = np.where(pos < offsets[-1], bag, -1)
    return bag, B


def _embedding_bag_meta(w, idx, off, mode, ilo):
    _check_indices(idx, "embedding_bag")
    return (
        TensorMeta((off.shape[0] - (1 if ilo else 0), w.shape[1]), w.dtype),
        TensorMeta(tuple(idx.shape), D.int64),
        TensorMeta((off.shape[0] - (1 if ilo else 0),), D.int64),
        TensorMeta((off.shape[0] - (1 if ilo else 0), w.shape[1]) if mode == 2 else (0,),
                   D.int64))


def _embedding_bag_kernel(w, idx, offsets, scale_grad_by_freq, mode, sparse, psw,
                          include_last_offset, padding_idx):
    _check_indices(idx, "embedding_bag")
    if idx.size and (idx.min() < 0 or idx.max() >= w.shape[0]):
        raise IndexError("index out of range in self")
    bag, B = _bag_layout(idx, offsets, include_last_offset)
    valid = (idx != padding_idx) & (bag >= 0)
    D = w.shape[1]
    dt = np.float64 if w.dtype == np.float64 else np.float32
    rows = w[idx].astype(dt)
    if psw is not None:
        rows = rows * psw.astype(dt)[:, None]
    count = np.bincount(bag[valid], minlength=B)[:B]
    max_idx = np.zeros((B, D) if mode == 2 else (0,), np.int64)
    if mode == 2:
        out = np.full((B, D), -np.inf, dt)
        np.maximum.at(out, bag[valid], rows[valid])
        out[count == 0] = 0
        hit = (rows == out[np.maximum(bag, 0)]) & valid[:, None]
        first = np.full((B, D), idx.size, np.int64)
        np.minimum.at(first, bag[valid], np.where(hit, np.arange(idx.size)[:, None],
                                                  idx.size)[valid])
        max_idx = np.where(first < idx.size, np.append(idx, -1)[first], -1)
    else:
        out = np.zeros((B, D), dt)
        np.add.at(out, bag[valid], rows[valid])
        if mode == 1:
            out = out / np.maximum(count, 1)[:, None]
    return out.astype(w.dtype), bag.astype(np.int64), count.astype(np.int64), max_idx


def _embedding_bag_backward_kernel(g, w, idx, bag, count, max_idx, scale_grad_by_freq, mode,
                                   psw, padding_idx):
    dt = np.float64 if g.dtype == np.float64 else np.float32
    g = g.astype(dt)
    gw = np.zeros(w.shape, dt)
    valid = (idx != padding_idx) & (bag >= 0)
    if mode == 2:
        ok = max_idx >= 0
        cols = np.broadcast_to(np.arange(w.shape[1]), max_idx.shape)
        np.add.at(gw, (max_idx[ok], cols[ok]), g[ok])
    else:
        coef = np.ones(idx.shape, dt) if psw is None else psw.astype(dt)
        if mode == 1:
            coef = coef / np.maximum(count, 1)[np.maximum(bag, 0)]
        if scale_grad_by_freq:
            coef = coef / np.bincount(idx, minlength=w.shape[0])[idx]
        contrib = g[np.maximum(bag, 0)] * coef[:, None]
        np.add.at(gw, idx[valid], contrib[valid])
    gpsw = None
    if psw is not None:
        gpsw = (g[np.maximum(bag, 0)] * w[idx].astype(dt)).sum(1) * valid
        gpsw = gpsw.astype(psw.dtype)
    return gw.astype(w.dtype), gpsw


_embedding_bag_backward = defop(
    "_embedding_bag_backward_ember(Tensor grad, Tensor weight, Tensor indices, Tensor offset2bag, "
    "Tensor bag_size, Tensor max_indices, bool scale_grad_by_freq, int mode, "
    "Tensor? per_sample_weights, int padding_idx) -> (Tensor, Tensor)", function=False,
    method=False, kernels={"cpu": _embedding_bag_backward_kernel},
    # the per_sample_weights grad is None without per_sample_weights, as the kernel's
    meta=lambda g, w, idx, *rest: (TensorMeta(tuple(w.shape), w.dtype),
                                   None if rest[5] is None else
                                   TensorMeta(tuple(idx.shape), w.dtype)))


def _embedding_bag_vjp(grads, out, w, idx, offsets, sgf, mode, sparse, psw, ilo, pad):
    gw, gpsw = _embedding_bag_backward(grads[0], w, idx, out[1], out[2], out[3], sgf, mode,
                                       psw, pad)
    return gw, gpsw


embedding_bag_op = defop(
    "_embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False,"
    " int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset="
    "False, int padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)", function=False,
    method=False, kernels={"cpu": _embedding_bag_kernel}, vjp=_embedding_bag_vjp,
    differentiable=("weight", "per_sample_weights"),
    meta=lambda w, idx, off, s, mode, sp, psw, ilo, pad: _embedding_bag_meta(w, idx, off, mode,
                                                                              ilo),
    supports="fc")


def embedding_bag(input, weight, offsets, max_norm, norm_type, scale_grad_by_freq,  # noqa: A002
                  mode, per_sample_weights, include_last_offset, padding_idx):
    """F.embedding_bag's argument handling over the `_embedding_bag` kernel op."""
    e = _e()
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.ndim}")
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is "
                         f"not None, then it must have the same shape as the input "
                         f"({input.shape})")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(f"if input is 2D, then offsets has to be None, as input is treated "
                             f"is a mini-batch of fixed length sequences. However, found offsets "
                             f"of type {type(offsets)}")
        offsets = e.arange(0, input.numel(), input.shape[1], device=input.device)
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    if mode not in _BAG_MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on the PyTorch "
                                  f"GitHub.")
    if padding_idx is None:
        padding_idx = -1
    elif padding_idx < 0:
        padding_idx += weight.shape[0]
    if max_norm is not None:
        with e.no_grad():
            OPS["embedding_renorm_"](weight, input, max_norm, norm_type)
    return embedding_bag_op(weight, input, offsets, scale_grad_by_freq, _BAG_MODES[mode], False,
                            per_sample_weights, include_last_offset, padding_idx)[0]
