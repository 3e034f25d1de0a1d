"""Fused attention's cuda slots: `_fused_attention` (the flash forward: output and the rows'
logsumexp) and `_fused_attention_backward` (delta, then dk/dv per key block and dq per query
block), the Triton kernels of `attention_tl`. q, k, v (and the gradient) are read through their
strides (the GPT's q, k, v are views of one qkv projection: no copies); the outputs are
contiguous. Calls the kernels do not take (an empty tensor) decline to core's decomposition.
"""
from __future__ import annotations

from ember._ops.registry import dtypes as D

from ..runtime import driver as rt
from .base import _launch, _lazy, cuda_kernel

__all__ = ["CONFIG", "calls"]

calls = {"forward": 0, "backward": 0}   # launches of the fused pair (tests count them)

# (BM, BN, num_warps, num_stages) by (kernel, kind): kind "16" (fp16/bf16, head dim <= 64),
# "16w" (fp16/bf16, head dim 128), "32" (float32, exact dots). BM: query rows a program, BN:
# keys. The forward and dq need BM a multiple of BN (causal diagonal), dk/dv BN of BM. "16" as
# swept on an H100 at B 8, H 12, T 1024, d 64 bf16 causal (gpu_sdpa_bench.py --sweep, RESULTS.md).
CONFIG = {
    ("fwd", "16"): (128, 64, 4, 3), ("fwd", "16w"): (128, 64, 8, 3), ("fwd", "32"): (64, 32, 4, 2),
    ("dkdv", "16"): (32, 128, 4, 3), ("dkdv", "16w"): (32, 64, 4, 2),
    ("dkdv", "32"): (32, 64, 4, 2),
    ("dq", "16"): (64, 32, 4, 3), ("dq", "16w"): (64, 32, 4, 2), ("dq", "32"): (64, 32, 4, 2),
}
_LOG2E = 1.4426950408889634


def _pow2(n: int, lo: int = 16) -> int:
    return max(lo, 1 << (max(int(n), 1) - 1).bit_length())


def _blocks(kernel, dt, BD, L, S):
    """(BM, BN, launch options) for this call, clamped to the sequence lengths."""
    kind = "32" if dt is D.float32 else ("16" if BD <= 64 else "16w")
    bm, bn, warps, stages = CONFIG[(kernel, kind)]
    bm, bn = min(bm, _pow2(L)), min(bn, _pow2(S))
    if kernel == "dkdv":
        bm = min(bm, bn)
    else:
        bn = min(bn, bm)
    return bm, bn, {"num_warps": warps, "num_stages": stages}


def _last_contiguous(be, t):
    return t if t.stride(-1) == 1 or t.shape[-1] == 1 else be._copy_new(t, t.dtype)


def _align(ts) -> int:
    """The most elements (16 bytes at most) dividing every batch, head and row stride of ts."""
    a = 16 // ts[0].dtype.itemsize
    while a > 1 and any(s % a for t in ts for s in t.stride()[:3]):
        a //= 2
    return a


def _strides(t, a):
    return [s // a for s in t.stride()[:3]]


def _mask_args(m, q, B, H, L, S):
    """(pointer, [batch, head, row, col strides], MASK kind) of attn_mask (None: q, kind 0)."""
    if m is None:
        return q, [0, 0, 0, 0], 0
    m = m.expand(B, H, L, S)
    return m, list(m.stride()), 1 if m.dtype is D.bool else 2


def _dot_kind(dt) -> int:
    """attention_tl._dot's DOT: exact float32 dots; 16-bit ones upcast in the interpreter."""
    if dt is D.float32:
        return 1
    return 2 if rt.FAKE else 0


def _usable(q, k, v):
    return q.dtype in (D.float32, D.float16, D.bfloat16) and q.numel() and k.numel() and \
        q.ndim == 4 and q.shape[-1] <= 128


@cuda_kernel("_fused_attention")
def fused_attention(be, op, q, k, v, attn_mask, is_causal, scale):
    if not _usable(q, k, v):
        return NotImplemented
    B, H, L, E = q.shape
    S = k.shape[2]
    q, k, v = (_last_contiguous(be, t) for t in (q, k, v))
    out = be._new((B, H, L, E), q.dtype, q.device)
    lse = be._new((B, H, L), D.float32, q.device)
    BD = _pow2(E)
    a = _align((q, k, v))
    m, ms, kind = _mask_args(attn_mask, q, B, H, L, S)
    bm, bn, opts = _blocks("fwd", q.dtype, BD, L, S)
    even = L % bm == 0 and S % bn == 0 and E == BD
    _launch(be, _lazy("attention_tl").attn_fwd, (-(-L // bm), B * H),
            [q, k, v, out, lse, m, *_strides(q, a), *_strides(k, a), *_strides(v, a), *ms, H, L,
             S, float(scale) * _LOG2E], (),
            {"ALIGN": a, "D": E, "BD": BD, "BM": bm, "BN": bn, "CAUSAL": bool(is_causal),
             "MASK": kind, "EVEN": even, "DOT": _dot_kind(q.dtype), **opts})
    calls["forward"] += 1
    return out, lse


@cuda_kernel("_fused_attention_backward")
def fused_attention_backward(be, op, g, q, k, v, attn_mask, out, lse, is_causal, scale):
    if not _usable(q, k, v) or g.dtype is not q.dtype:
        return NotImplemented
    tl_ = _lazy("attention_tl")
    B, H, L, E = q.shape
    S = k.shape[2]
    q, k, v, g = (_last_contiguous(be, t) for t in (q, k, v, g))
    out = out if out.is_contiguous() else out.contiguous()
    lse = lse if lse.is_contiguous() else lse.contiguous()
    BD = _pow2(E)
    a = _align((q, k, v, g))
    m, ms, kind = _mask_args(attn_mask, q, B, H, L, S)
    dev = q.device
    delta = be._new((B, H, L), D.float32, dev)
    _launch(be, tl_.attn_bwd_delta, (-(-L // 64), B * H), [out, g, delta, *_strides(g, a), H, L],
            (), {"ALIGN": a, "D": E, "BD": BD, "BM": 64})
    dq = be._new((B, H, L, E), q.dtype, dev)
    dk = be._new((B, H, S, E), k.dtype, dev)
    dv = be._new((B, H, S, E), v.dtype, dev)
    strides = [*_strides(q, a), *_strides(k, a), *_strides(v, a), *_strides(g, a), *ms, H, L, S,
               float(scale) * _LOG2E, float(scale)]
    common = {"ALIGN": a, "D": E, "BD": BD, "CAUSAL": bool(is_causal), "MASK": kind,
              "DOT": _dot_kind(q.dtype)}
    bm, bn, opts = _blocks("dkdv", q.dtype, BD, L, S)
    _launch(be, tl_.attn_bwd_dkdv, (-(-S // bn), B * H),
            [q, k, v, g, lse, delta, m, dk, dv, *strides], (),
            {**common, "BM": bm, "BN": bn, "EVEN": L % bm == 0 and S % bn == 0 and E == BD,
             **opts})
    bm, bn, opts = _blocks("dq", q.dtype, BD, L, S)
    _launch(be, tl_.attn_bwd_dq, (-(-L // bm), B * H),
            [q, k, v, g, lse, delta, m, dq, *strides], (),
            {**common, "BM": bm, "BN": bn, "EVEN": L % bm == 0 and S % bn == 0 and E == BD,
             **opts})
    calls["backward"] += 1
    return dq, dk, dv

