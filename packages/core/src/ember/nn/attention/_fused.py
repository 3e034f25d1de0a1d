"""How flex_attention runs a fused kernel pair (a device's Triton kernels, the C++ ones on CPU):
a `plan` with `forward(q, k, v) -> (out, lse)` and `backward(q, k, v, out, lse, dout, dlse) ->
(dq, dk, dv)`; where gradients are wanted the pair becomes one autograd node (ember-autograd's
Function, loaded only then), so `out.backward()` runs the fused backward.

The backward kernels see the softmax statistics the forward saved (lse) and
delta = rowsum(dout * out) - dlse: with P = exp(score - lse), d score = P * (dP - delta) where
dP = dout @ v^T (the lse's own gradient folds into delta).
"""
from __future__ import annotations

import ember

__all__ = ["run", "delta", "reduce_kv"]

_FN = None


def _function():
    global _FN
    if _FN is None:
        from ember.autograd import Function  # ember-autograd: only when gradients are wanted

        class FlexAttentionFused(Function):
            @staticmethod
            def forward(ctx, plan, q, k, v):
                out, lse = plan.forward(q, k, v)
                ctx.plan = plan
                ctx.save_for_backward(q, k, v, out, lse)
                return out, lse

            @staticmethod
            def backward(ctx, dout, dlse):
                q, k, v, out, lse = ctx.saved_tensors
                with ember.no_grad():
                    dq, dk, dv = ctx.plan.backward(q, k, v, out, lse, dout, dlse)
                return None, dq, dk, dv

        _FN = FlexAttentionFused
    return _FN


def run(plan, query, key, value, return_lse):
    """The fused forward, recorded for autograd where an input needs gradients."""
    if ember.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)):
        out, lse = _function().apply(plan, query, key, value)
    else:
        out, lse = plan.forward(query, key, value)
    return (out, lse) if return_lse else out


def delta(out, lse, dout, dlse):
    """rowsum(dout * out) - dlse, float32 (float64 for float64) (B, H, L)."""
    w = ember.float64 if out.dtype == ember.float64 else ember.float32
    d = (dout.to(w) * out.to(w)).sum(dim=-1)
    if dlse is not None:
        d = d - ember.where(lse == -float("inf"), 0.0, dlse.to(w))
    return d.contiguous()


def reduce_kv(d, like):
    """A (B, Hq, S, E) gradient summed onto like's (Bkv, Hkv, S, E): the query heads sharing
    a kv head (GQA) and a broadcast batch."""
    B, Hq, S, E = d.shape
    Bkv, Hkv = like.size(0), like.size(1)
    if Hq != Hkv:
        d = d.reshape(B, Hkv, Hq // Hkv, S, E).sum(dim=2)
    if Bkv != B:
        d = d.sum(dim=0, keepdim=True)
    return d.to(like.dtype)
