"""FlexAttention as fused Triton kernels: the forward (online softmax over key blocks, the
score_mod and mask_mod inlined into it) here, the backward (dq; dk and dv) in `_flex_bwd`. The
mods are traced once into expressions (core's `ember.nn.attention.backend_api`, which also
differentiates the score_mod); a mod it cannot express (indexing captured tensors, Python
control flow on values, calls of ember functions) leaves the call to core's eager reference.
"""
from __future__ import annotations

from ember.nn.attention import backend_api as flex

from .kernels.pointwise import load_kernel

calls = {"fused": 0, "sparse": 0, "backward": 0}   # calls of the fused kernels (block-sparse:
#                                                    "sparse"; the fused backward: "backward")
_kernels: dict = {}


class Unsupported(flex.Unsupported):
    pass


def _trace(score_mod, mask_mod):
    """((score, d score / d qk, mask) as Triton source, captured tensors they read)."""
    s, ds, m, bufs = flex.trace(score_mod, mask_mod)
    if any(b.device.type != "cuda" for b in bufs):
        raise flex.Unsupported("a captured tensor on another device")
    return (flex.to_triton(s), flex.to_triton(ds), flex.to_triton(m), len(bufs)), bufs


def bufparams(n: int) -> str:
    """The captured tensors' parameters in the kernels' signatures and calls."""
    return "".join(f"BUF{i}, " for i in range(n))


_SRC = '''import triton
import triton.language as tl


@triton.jit
def _tile(q, K, V, {bp}kv, S, start, qi, b, h, scale, m_i, l_i, acc, offs_d, offs_v,
          D: tl.constexpr, DV: tl.constexpr, BN: tl.constexpr, MASK: tl.constexpr):
    # one tile of keys: scores, the mods, the online-softmax update
    offs_n = start + tl.arange(0, BN)
    ki = offs_n[None, :]
    kt = tl.load(K + (kv * S + ki) * D + offs_d[:, None],
                 mask=(ki < S) & (offs_d[:, None] < D), other=0.0).to(tl.float32)
    qk = tl.dot(q, kt, input_precision="ieee") * scale
    qk = {score}
    if MASK:
        keep = ({mask}) & (ki < S)
    else:
        keep = (qi >= 0) & (ki < S)
    qk = tl.where(keep, qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp(qk - m_safe[:, None])
    alpha = tl.exp(m_i - m_safe)
    l_i = l_i * alpha + tl.sum(p, 1)
    v = tl.load(V + (kv * S + offs_n[:, None]) * DV + offs_v[None, :],
                mask=(offs_n[:, None] < S) & (offs_v[None, :] < DV), other=0.0).to(tl.float32)
    acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    return m_new, l_i, acc


# no value specialization of the ints (the launcher's cache key does not carry their values)
@triton.jit(do_not_specialize=["H", "G", "L", "S", "KB", "scale", "SB", "SH", "NQB", "NKVB"])
def {name}(Q, K, V, O, LSE, KVN, KVI, FKVN, FKVI, {bp}H, G, L, S, KB, scale, SB, SH, NQB, NKVB,
           D: tl.constexpr, DV: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
           BD: tl.constexpr, BDV: tl.constexpr, SPARSE: tl.constexpr, QBS: tl.constexpr,
           KVBS: tl.constexpr, FULL: tl.constexpr):
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    kv = ((b * KB) * (H // G) + h // G)
    offs_m = pid * BM + tl.arange(0, BM)
    offs_d = tl.arange(0, BD)
    offs_v = tl.arange(0, BDV)
    qi = offs_m[:, None]
    q = tl.load(Q + (bh * L + qi) * D + offs_d[None, :],
                mask=(qi < L) & (offs_d[None, :] < D), other=0.0).to(tl.float32)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, BDV], tl.float32)
    if SPARSE:  # only the key blocks the BlockMask keeps: partly kept ones masked, full ones not
        row = b * SB + h * SH + (pid * BM) // QBS
        n_part = tl.load(KVN + row)
        for j in range(0, n_part):
            kb = tl.load(KVI + row * NKVB + j)
            for t in range(0, KVBS, BN):
                m_i, l_i, acc = _tile(q, K, V, {bp}kv, S, kb * KVBS + t, qi, b, h, scale, m_i, l_i,
                                      acc, offs_d, offs_v, D, DV, BN, True)
        if FULL:
            n_full = tl.load(FKVN + row)
            for j in range(0, n_full):
                kb = tl.load(FKVI + row * NKVB + j)
                for t in range(0, KVBS, BN):
                    m_i, l_i, acc = _tile(q, K, V, {bp}kv, S, kb * KVBS + t, qi, b, h, scale, m_i,
                                          l_i, acc, offs_d, offs_v, D, DV, BN, False)
    else:
        for start in range(0, S, BN):
            m_i, l_i, acc = _tile(q, K, V, {bp}kv, S, start, qi, b, h, scale, m_i, l_i, acc,
                                  offs_d, offs_v, D, DV, BN, True)
    dead = l_i == 0.0
    out = tl.where(dead[:, None], 0.0, acc / tl.where(dead, 1.0, l_i)[:, None])
    tl.store(O + (bh * L + qi) * DV + offs_v[None, :], out.to(O.dtype.element_ty),
             mask=(qi < L) & (offs_v[None, :] < DV))
    lse = tl.where(dead, float("-inf"), m_i + tl.log(tl.where(dead, 1.0, l_i)))
    tl.store(LSE + bh * L + offs_m, lse, mask=offs_m < L)
'''


def _kernel(score: str, mask: str, nbuf: int):
    key = ("fwd", score, mask, nbuf)
    k = _kernels.get(key)
    if k is None:
        import hashlib
        name = "flex_fwd_" + hashlib.sha1(repr(key).encode()).hexdigest()[:12]
        k = _kernels[key] = load_kernel(_SRC.format(name=name, score=score, mask=mask,
                                                    bp=bufparams(nbuf)), name)
    return k


def _pow2(n: int, lo: int = 16) -> int:
    return max(lo, 1 << (max(n, 1) - 1).bit_length())


def flex_forward(be, query, key, value, score_mod, block_mask, scale, return_lse):
    """flex attention on cuda tensors through the fused kernels (an autograd node over the
    fused backward where gradients are wanted), or NotImplemented."""
    from ember._ops.registry import dtypes as D
    if query.dtype not in (D.float32, D.float16, D.bfloat16):
        return NotImplemented
    mask_mod = None if block_mask is None else block_mask.mask_mod
    try:
        srcs, bufs = _trace(score_mod, mask_mod)
    except Exception:  # a mod the tracer cannot express: the eager reference runs it
        return NotImplemented
    return flex.run(FlexPlan(be, srcs, block_mask, query, key, value, scale, bufs), query,
                      key, value, return_lse)


class FlexPlan:
    """One call's kernels and launch arguments: `forward` and `backward` (core's `flex.run`)."""

    def __init__(self, be, srcs, block_mask, query, key, value, scale, bufs=()):
        B, H, L, E = query.shape
        self.be, self.srcs, self.scale = be, srcs, float(scale)
        self.bufs = list(bufs)
        self.sizes = (B, H, key.size(1), L, key.size(2), E, value.size(3))
        self.kb = 1 if key.size(0) == B else 0
        self.bm = 16 if L <= 16 else 32
        self.bn = 16 if key.size(2) <= 16 else 32
        self.kv = self.q = None
        if _walkable(block_mask, B, H, query.device):
            qbs, kvbs = block_mask.BLOCK_SIZE
            self.bm = 32 if qbs % 32 == 0 and L > 16 else 16
            self.bn = 32 if kvbs % 32 == 0 else 16
            self.kv = _lists(block_mask, "kv", qbs, kvbs)
            if block_mask.q_num_blocks is not None:
                self.q = _lists(block_mask, "q", qbs, kvbs)

    def forward(self, query, key, value):
        import ember

        from .kernels.base import _launch
        B, H, Hkv, L, S, E, Ev = self.sizes
        q, k, v = query.contiguous(), key.contiguous(), value.contiguous()
        out = ember.empty(B, H, L, Ev, dtype=query.dtype, device=query.device)
        lse = ember.empty(B, H, L, dtype=ember.float32, device=query.device)
        walk, flags = _walk_args(self.kv, lse)
        grid = (-(-L // self.bm), B * H)
        _launch(self.be, _kernel(self.srcs[0], self.srcs[2], self.srcs[3]), grid,
                [q, k, v, out, lse, *walk[:4], *self.bufs, H, H // Hkv, L, S, self.kb, self.scale,
                 *walk[4:]], (),
                {"D": E, "DV": Ev, "BM": self.bm, "BN": self.bn, "BD": _pow2(E),
                 "BDV": _pow2(Ev), **flags})
        calls["fused"] += 1
        calls["sparse"] += self.kv is not None
        return out, lse

    def backward(self, q, k, v, out, lse, dout, dlse):
        from ._flex_bwd import flex_backward
        calls["backward"] += 1
        return flex_backward(self, q, k, v, out, lse, dout, dlse)


def _walkable(block_mask, B, H, dev) -> bool:
    """Whether the kernels can walk the BlockMask's block lists (block sizes multiples of 16,
    (B, H, blocks) lists broadcasting to the call's, on the device)."""
    if block_mask is None:
        return False
    qbs, kvbs = block_mask.BLOCK_SIZE
    n = block_mask.kv_num_blocks
    if qbs % 16 or kvbs % 16 or n.ndim != 3 or n.device != dev:
        return False
    return n.shape[0] in (1, B) and n.shape[1] in (1, H)


def _lists(block_mask, by: str, qbs: int, kvbs: int):
    """The block lists by kv ("kv": per query block, the key blocks kept) or by query ("q"):
    [partial num, partial idx, full num, full idx, batch stride, head stride, rows, cols] and
    whether full blocks are listed apart."""
    import ember

    def i32(t):
        return t.contiguous().to(ember.int32)
    n, idx = getattr(block_mask, f"{by}_num_blocks"), getattr(block_mask, f"{by}_indices")
    fn, fidx = (getattr(block_mask, f"full_{by}_num_blocks"),
                getattr(block_mask, f"full_{by}_indices"))
    full = fn is not None
    num, ind = i32(n), i32(idx)
    bb, hh, rows = n.shape
    return ([num, ind, i32(fn) if full else num, i32(fidx) if full else ind,
             hh * rows if bb > 1 else 0, rows if hh > 1 else 0, rows, ind.shape[-1]],
            {"SPARSE": True, "QBS": qbs, "KVBS": kvbs, "FULL": full})


def _walk_args(lists, dummy):
    if lists is None:  # every tile, masked elementwise
        return ([dummy, dummy, dummy, dummy, 0, 0, 0, 0],
                {"SPARSE": False, "QBS": 1, "KVBS": 1, "FULL": False})
    return lists
