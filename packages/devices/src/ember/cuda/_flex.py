"""FlexAttention's forward as one fused Triton kernel (online softmax over key blocks, the
score_mod and mask_mod inlined into it). The mods are traced once on symbolic index values into
Triton expressions; a mod this tracer cannot express (indexing captured tensors, Python control
flow on values, calls of ember functions) leaves the call to core's eager reference, as does a
call that needs gradients (no fused backward yet).
"""
from __future__ import annotations

import math

from .kernels.pointwise import load_kernel

calls = {"fused": 0, "sparse": 0}   # calls that ran the fused kernel (block-sparse: "sparse")
_kernels: dict = {}


class Unsupported(Exception):
    pass


def _src(v) -> str:
    if isinstance(v, _E):
        return v.s
    if isinstance(v, bool):
        return "(qi >= 0)" if v else "(qi < 0)"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            return 'float("inf")' if v > 0 else 'float("-inf")'
        return repr(v)
    raise Unsupported(f"a {type(v).__name__} in a score_mod/mask_mod")


def _bin(op, rev=False):
    def f(self, other):
        a, b = (_src(other), self.s) if rev else (self.s, _src(other))
        return _E(f"({a} {op} {b})")
    return f


def _call(fn):
    def f(self):
        return _E(f"{fn}({self.s})")
    return f


class _E:
    """A Triton expression standing in for a tensor inside a mod."""

    __slots__ = ("s",)

    def __init__(self, s):
        self.s = s

    __add__, __radd__ = _bin("+"), _bin("+", True)
    __sub__, __rsub__ = _bin("-"), _bin("-", True)
    __mul__, __rmul__ = _bin("*"), _bin("*", True)
    __truediv__, __rtruediv__ = _bin("/"), _bin("/", True)
    __lt__, __le__, __gt__, __ge__ = _bin("<"), _bin("<="), _bin(">"), _bin(">=")
    __eq__, __ne__ = _bin("=="), _bin("!=")  # noqa: PLE0307 (expressions, not comparisons)
    __and__, __rand__ = _bin("&"), _bin("&", True)
    __or__, __ror__ = _bin("|"), _bin("|", True)
    __xor__ = _bin("^")
    __hash__ = object.__hash__
    abs = __abs__ = _call("tl.abs")
    exp = _call("tl.exp")
    log = _call("tl.log")
    sqrt = _call("tl.sqrt")
    sigmoid = _call("tl.sigmoid")

    def __mod__(self, other):  # floor modulo, as PyTorch's remainder (C's % truncates)
        o = _src(other)
        return _E(f"((({self.s} % {o}) + {o}) % {o})")

    def __floordiv__(self, other):
        o = _src(other)
        return _E(f"(({self.s} - ((({self.s} % {o}) + {o}) % {o})) // {o})")

    def __neg__(self):
        return _E(f"(-{self.s})")

    def __invert__(self):
        return _E(f"({self.s} == 0)")

    def tanh(self):
        return _E(f"(2.0 * tl.sigmoid(2.0 * {self.s}) - 1.0)")

    def new_ones(self, *a, **k):
        return _E("(qi >= 0)")

    def new_zeros(self, *a, **k):
        return _E("(qi < 0)")

    @property
    def device(self):
        return None

    def __bool__(self):
        raise Unsupported("Python control flow on a value inside a mod")


def _trace(score_mod, mask_mod):
    b, h, q, k = _E("b"), _E("h"), _E("qi"), _E("ki")
    score = "qk" if score_mod is None else _src(score_mod(_E("qk"), b, h, q, k))
    mask = "(qi >= 0)" if mask_mod is None else _src(mask_mod(b, h, q, k))
    return score, mask


_SRC = '''import triton
import triton.language as tl


@triton.jit
def _tile(q, K, V, kv, S, start, qi, b, h, scale, m_i, l_i, acc, offs_d, offs_v,
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
def {name}(Q, K, V, O, LSE, KVN, KVI, FKVN, FKVI, H, G, L, S, KB, scale, SB, SH, NQB, NKVB,
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
                m_i, l_i, acc = _tile(q, K, V, kv, S, kb * KVBS + t, qi, b, h, scale, m_i, l_i,
                                      acc, offs_d, offs_v, D, DV, BN, True)
        if FULL:
            n_full = tl.load(FKVN + row)
            for j in range(0, n_full):
                kb = tl.load(FKVI + row * NKVB + j)
                for t in range(0, KVBS, BN):
                    m_i, l_i, acc = _tile(q, K, V, kv, S, kb * KVBS + t, qi, b, h, scale, m_i,
                                          l_i, acc, offs_d, offs_v, D, DV, BN, False)
    else:
        for start in range(0, S, BN):
            m_i, l_i, acc = _tile(q, K, V, kv, S, start, qi, b, h, scale, m_i, l_i, acc,
                                  offs_d, offs_v, D, DV, BN, True)
    dead = l_i == 0.0
    out = tl.where(dead[:, None], 0.0, acc / tl.where(dead, 1.0, l_i)[:, None])
    tl.store(O + (bh * L + qi) * DV + offs_v[None, :], out.to(O.dtype.element_ty),
             mask=(qi < L) & (offs_v[None, :] < DV))
    lse = tl.where(dead, float("-inf"), m_i + tl.log(tl.where(dead, 1.0, l_i)))
    tl.store(LSE + bh * L + offs_m, lse, mask=offs_m < L)
'''


def _kernel(score: str, mask: str):
    key = (score, mask)
    k = _kernels.get(key)
    if k is None:
        import hashlib
        name = "flex_fwd_" + hashlib.sha1(repr(key).encode()).hexdigest()[:12]
        k = _kernels[key] = load_kernel(_SRC.format(name=name, score=score, mask=mask), name)
    return k


def _pow2(n: int, lo: int = 16) -> int:
    return max(lo, 1 << (max(n, 1) - 1).bit_length())


def flex_forward(be, query, key, value, score_mod, block_mask, scale, return_lse):
    """(out, lse) of flex attention on cuda tensors, or NotImplemented."""
    import ember
    from ember._ops.registry import dtypes as D

    from .kernels.base import _launch
    if query.dtype not in (D.float32, D.float16, D.bfloat16):
        return NotImplemented
    mask_mod = None if block_mask is None else block_mask.mask_mod
    try:
        score, mask = _trace(score_mod, mask_mod)
    except Exception:  # a mod the tracer cannot express: the eager reference runs it
        return NotImplemented
    B, H, L, E = query.shape
    Hkv, S, Ev = key.size(1), key.size(2), value.size(3)
    q, k, v = query.contiguous(), key.contiguous(), value.contiguous()
    out = ember.empty(B, H, L, Ev, dtype=query.dtype, device=query.device)
    lse = ember.empty(B, H, L, dtype=ember.float32, device=query.device)
    bm = 16 if L <= 16 else 32
    bn = 16 if S <= 16 else 32
    sparse = _sparse_args(block_mask, B, H, L)
    if sparse is None:  # every key tile, masked elementwise
        bmask = [lse, lse, lse, lse, 0, 0, 0, 0]
        flags = {"SPARSE": False, "QBS": 1, "KVBS": 1, "FULL": False}
    else:
        bmask, flags, bm, bn = sparse
    grid = (-(-L // bm), B * H)
    kb = 1 if key.size(0) == B else 0
    _launch(be, _kernel(score, mask), grid,
            [q, k, v, out, lse, *bmask[:4], H, H // Hkv, L, S, kb, float(scale), *bmask[4:]], (),
            {"D": E, "DV": Ev, "BM": bm, "BN": bn, "BD": _pow2(E), "BDV": _pow2(Ev), **flags})
    calls["fused"] += 1
    calls["sparse"] += sparse is not None
    return (out, lse) if return_lse else out


def _sparse_args(block_mask, B, H, L):
    """The BlockMask's kv block lists as kernel arguments (partly kept, full, strides, counts),
    the flags and the tile sizes; None where the kernel cannot walk them (block sizes not
    multiples of 16)."""
    if block_mask is None:
        return None
    qbs, kvbs = block_mask.BLOCK_SIZE
    if qbs % 16 or kvbs % 16 or block_mask.kv_num_blocks.ndim != 3:
        return None
    bm = 32 if qbs % 32 == 0 and L > 16 else 16
    bn = 32 if kvbs % 32 == 0 else 16
    n = block_mask.kv_num_blocks
    bb, hh, nq = n.shape
    if bb not in (1, B) or hh not in (1, H):
        return None
    dev = n.device
    if dev.type != "cuda":
        return None

    def i32(t):
        return t.to(dev).contiguous().to(__import__("ember").int32)
    full = block_mask.full_kv_num_blocks is not None
    kvn, kvi = i32(n), i32(block_mask.kv_indices)
    fkvn = i32(block_mask.full_kv_num_blocks) if full else kvn
    fkvi = i32(block_mask.full_kv_indices) if full else kvi
    sb = hh * nq if bb > 1 else 0
    sh = nq if hh > 1 else 0
    return ([kvn, kvi, fkvn, fkvi, sb, sh, nq, kvi.shape[-1]],
            {"SPARSE": True, "QBS": qbs, "KVBS": kvbs, "FULL": full}, bm, bn)
