"""Fused attention: `_fused_attention` (softmax(q k^T * scale + mask) v and the rows' logsumexp)
and its backward, the pair a device fills with a flash-attention kernel pair (ember-devices'
cuda). `scaled_dot_product_attention` (nn.py) routes here where the device has the kernel and
the call fits it (no dropout, no GQA, one head dim, a mask that needs no gradient); else it
keeps its decomposition. The entries' decompositions are the reference (float32 math, or
float64 for float64) and what a device without the kernel runs. The backward's tag
"kernel_in_backward": a compiled backward calls it whole (its kernel), not its decomposition.

ember-private names (PyTorch splits this into _scaled_dot_product_{flash,efficient}_attention
with dropout and philox state; ember's pair has neither).
"""
from __future__ import annotations

import math

from .. import _dtype as D
from .._dispatch import TensorMeta
from ._registry import OPS, defop

__all__ = ["fused_eligible"]

_FLOATS = (D.float32, D.float16, D.bfloat16)


def _e():
    import ember
    return ember


def fused_eligible(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa) -> bool:
    """Whether scaled_dot_product_attention(q, k, v, ...) runs as `_fused_attention` here: a
    device with the kernel, (B, H, L, E) inputs of one float dtype and shape but L / S, E == Ev
    <= 128, no dropout, no GQA, a bool or q-dtype mask broadcasting to (B, H, L, S) without
    gradient, not both a mask and is_causal (the decomposition raises PyTorch's error)."""
    dev = getattr(q, "device", None)
    if dev is None or dev.type == "cpu" or dev.type not in OPS["_fused_attention"].kernels:
        return False
    if dropout_p or enable_gqa or q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        return False
    from ..backends.cuda import _SDP  # (enable_flash_sdp / enable_mem_efficient_sdp)
    if not (_SDP["flash"] or _SDP["mem_efficient"]):
        return False
    if q.dtype not in _FLOATS or k.dtype is not q.dtype or v.dtype is not q.dtype:
        return False
    B, H, L, E = q.shape
    S = k.shape[2]
    if tuple(k.shape) != (B, H, S, E) or tuple(v.shape) != (B, H, S, E) or not 0 < E <= 128:
        return False
    if k.device != dev or v.device != dev:
        return False
    if attn_mask is not None:
        if is_causal or attn_mask.requires_grad or attn_mask.device != dev:
            return False
        if attn_mask.dtype is not D.bool and attn_mask.dtype is not q.dtype:
            return False
        ms = tuple(attn_mask.shape)
        if len(ms) > 4 or any(m != 1 and m != t for m, t in zip(ms[::-1], (S, L, H, B))):
            return False
    return True


def _scores(q, k, attn_mask, is_causal, scale):
    """(..., L, S) float scores with the mask applied (the reference's arithmetic)."""
    e = _e()
    s = e.matmul(q, k.transpose(-2, -1)) * scale
    L, S = q.shape[-2], k.shape[-2]
    if is_causal:
        keep = e.arange(L, device=q.device).unsqueeze(1) >= e.arange(S, device=q.device)
        s = e.where(keep, s, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == D.bool:
            s = e.where(attn_mask, s, float("-inf"))
        else:
            s = s + attn_mask.to(s.dtype)
    return s


def _work(q):
    return D.float64 if q.dtype == D.float64 else D.float32


def _fused_ref(q, k, v, attn_mask, is_causal, scale):
    e = _e()
    w = _work(q)
    s = _scores(q.to(w), k.to(w), attn_mask, is_causal, scale)
    lse = e.logsumexp(s, -1)                                               # (..., L)
    live = lse != float("-inf")
    p = e.where(live.unsqueeze(-1), (s - e.where(live, lse, 0.0).unsqueeze(-1)).exp(), 0.0)
    out = e.matmul(p, v.to(w))
    return out.to(q.dtype), lse.to(w)


def _fused_bwd_ref(g, q, k, v, attn_mask, out, lse, is_causal, scale):
    # recomputes P and O from q, k, v (out and lse unread): differentiating this decomposition
    # (double backward) then gives exact second derivatives, none flowing through out or lse
    e = _e()
    w = _work(q)
    qf, kf, vf, gf = q.to(w), k.to(w), v.to(w), g.to(w)
    s = _scores(qf, kf, attn_mask, is_causal, scale)
    m = s.amax(-1, keepdim=True)
    live = m != float("-inf")
    p = (s - e.where(live, m, 0.0)).exp()
    p = p / e.where(live, p.sum(-1, keepdim=True), 1.0)                  # (..., L, S)
    dv = e.matmul(p.transpose(-2, -1), gf)
    delta = (gf * e.matmul(p, vf)).sum(-1, keepdim=True)
    ds = p * (e.matmul(gf, vf.transpose(-2, -1)) - delta)
    dq = e.matmul(ds, kf) * scale
    dk = e.matmul(ds.transpose(-2, -1), qf) * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def _fused_meta(q, k, v, attn_mask, is_causal, scale):
    return (TensorMeta(tuple(q.shape[:-1]) + (v.shape[-1],), q.dtype),
            TensorMeta(tuple(q.shape[:-1]), _work(q)))


def _fused_bwd_meta(g, q, k, v, attn_mask, out, lse, is_causal, scale):
    return TensorMeta(q.shape, q.dtype), TensorMeta(k.shape, k.dtype), TensorMeta(v.shape, v.dtype)


def _fused_vjp(grads, res, q, k, v, attn_mask, is_causal, scale):
    # the logsumexp is an auxiliary output: its gradient is not propagated (grads[0] only)
    return OPS["_fused_attention_backward"](grads[0], q, k, v, attn_mask, res[0], res[1],
                                            is_causal, scale)


defop("_fused_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, "
      "bool is_causal=False, float scale=1.0) -> (Tensor output, Tensor logsumexp)",
      function=False, method=False, out=False, supports="f",
      differentiable=("query", "key", "value"), meta=_fused_meta, decomp=_fused_ref,
      vjp=_fused_vjp)
defop("_fused_attention_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value, "
      "Tensor? attn_mask, Tensor output, Tensor logsumexp, bool is_causal, float scale) -> "
      "(Tensor, Tensor, Tensor)", function=False, method=False, out=False, supports="f",
      tags={"kernel_in_backward"}, meta=_fused_bwd_meta, decomp=_fused_bwd_ref)


def sdpa_fused(q, k, v, attn_mask, is_causal, scale):
    """scaled_dot_product_attention's output through `_fused_attention` (fused_eligible)."""
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return OPS["_fused_attention"](q, k, v, attn_mask, bool(is_causal), s)[0]
