"""FlexAttention's fused backward in Triton (FlashAttention-2's algorithm): one kernel gives dq
per query tile walking the key blocks the BlockMask keeps, one gives dk and dv per key tile
walking the query blocks that keep it (the BlockMask's q lists); both recompute the scores,
P = exp(score_mod(qk) - lse) and dS = P * (dout @ v^T - delta) * d score_mod / d qk.
dk and dv come per query head and are summed onto the kv heads (GQA) by core's
`ember.nn.attention.backend_api.reduce_kv`.
"""
from __future__ import annotations

from .kernels.pointwise import load_kernel

_kernels: dict = {}

_SRC = '''import triton
import triton.language as tl


@triton.jit
def _p_ds(q, do, kt, vt, lse, dl, {bp}qi, ki, b, h, scale, L, S, MASK: tl.constexpr):
    # the probabilities P and the score gradient dS of one (query tile, key tile) pair
    qk = tl.dot(q, kt, input_precision="ieee") * scale
    s = {score}
    if MASK:
        keep = ({mask}) & (ki < S) & (qi < L)
    else:
        keep = (ki < S) & (qi < L)
    live = lse != float("-inf")
    p = tl.where(keep & live[:, None], tl.exp(s - tl.where(live, lse, 0.0)[:, None]), 0.0)
    dp = tl.dot(do, vt, input_precision="ieee")
    ds = tl.where(keep, p * (dp - dl[:, None]) * ({dscore}), 0.0)
    return p, ds


@triton.jit
def _dq_tile(q, do, lse, dl, K, V, {bp}kv, L, S, start, qi, b, h, scale, dq, offs_d, offs_v,
             D: tl.constexpr, DV: tl.constexpr, BN: tl.constexpr, MASK: tl.constexpr):
    ki = (start + tl.arange(0, BN))[None, :]
    kt = tl.load(K + (kv * S + ki) * D + offs_d[:, None],
                 mask=(ki < S) & (offs_d[:, None] < D), other=0.0).to(tl.float32)
    vt = tl.load(V + (kv * S + ki) * DV + offs_v[:, None],
                 mask=(ki < S) & (offs_v[:, None] < DV), other=0.0).to(tl.float32)
    p, ds = _p_ds(q, do, kt, vt, lse, dl, {bp}qi, ki, b, h, scale, L, S, MASK)
    return dq + tl.dot(ds, tl.trans(kt), input_precision="ieee") * scale


@triton.jit(do_not_specialize=["H", "G", "L", "S", "KB", "scale", "SB", "SH", "NR", "NC"])
def {name}_dq(Q, K, V, DO, LSE, DL, DQ, KVN, KVI, FKVN, FKVI, {bp}H, G, L, S, KB, scale, SB, SH,
              NR, NC, D: tl.constexpr, DV: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
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
    do = tl.load(DO + (bh * L + qi) * DV + offs_v[None, :],
                 mask=(qi < L) & (offs_v[None, :] < DV), other=0.0).to(tl.float32)
    lse = tl.load(LSE + bh * L + offs_m, mask=offs_m < L, other=float("-inf"))
    dl = tl.load(DL + bh * L + offs_m, mask=offs_m < L, other=0.0)
    dq = tl.zeros([BM, BD], tl.float32)
    if SPARSE:
        row = b * SB + h * SH + (pid * BM) // QBS
        for j in range(0, tl.load(KVN + row)):
            kb = tl.load(KVI + row * NC + j)
            for t in range(0, KVBS, BN):
                dq = _dq_tile(q, do, lse, dl, K, V, {bp}kv, L, S, kb * KVBS + t, qi, b, h, scale,
                              dq, offs_d, offs_v, D, DV, BN, True)
        if FULL:
            for j in range(0, tl.load(FKVN + row)):
                kb = tl.load(FKVI + row * NC + j)
                for t in range(0, KVBS, BN):
                    dq = _dq_tile(q, do, lse, dl, K, V, {bp}kv, L, S, kb * KVBS + t, qi, b, h,
                                  scale, dq, offs_d, offs_v, D, DV, BN, False)
    else:
        for start in range(0, S, BN):
            dq = _dq_tile(q, do, lse, dl, K, V, {bp}kv, L, S, start, qi, b, h, scale, dq, offs_d,
                          offs_v, D, DV, BN, True)
    tl.store(DQ + (bh * L + qi) * D + offs_d[None, :], dq.to(DQ.dtype.element_ty),
             mask=(qi < L) & (offs_d[None, :] < D))


@triton.jit
def _dkdv_tile(Q, DO, LSE, DL, {bp}bh, kt, vt, L, S, start, ki, b, h, scale, dk, dv, offs_d,
               offs_v, D: tl.constexpr, DV: tl.constexpr, BM: tl.constexpr,
               MASK: tl.constexpr):
    offs_m = start + tl.arange(0, BM)
    qi = offs_m[:, None]
    q = tl.load(Q + (bh * L + qi) * D + offs_d[None, :],
                mask=(qi < L) & (offs_d[None, :] < D), other=0.0).to(tl.float32)
    do = tl.load(DO + (bh * L + qi) * DV + offs_v[None, :],
                 mask=(qi < L) & (offs_v[None, :] < DV), other=0.0).to(tl.float32)
    lse = tl.load(LSE + bh * L + offs_m, mask=offs_m < L, other=float("-inf"))
    dl = tl.load(DL + bh * L + offs_m, mask=offs_m < L, other=0.0)
    p, ds = _p_ds(q, do, kt, vt, lse, dl, {bp}qi, ki, b, h, scale, L, S, MASK)
    dv += tl.dot(tl.trans(p), do, input_precision="ieee")
    dk += tl.dot(tl.trans(ds), q, input_precision="ieee") * scale
    return dk, dv


@triton.jit(do_not_specialize=["H", "G", "L", "S", "KB", "scale", "SB", "SH", "NR", "NC"])
def {name}_dkdv(Q, K, V, DO, LSE, DL, DK, DV_, QN, QI, FQN, FQI, {bp}H, G, L, S, KB, scale, SB,
                SH, NR, NC, D: tl.constexpr, DV: tl.constexpr, BM: tl.constexpr,
                BN: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr, SPARSE: tl.constexpr,
                QBS: tl.constexpr, KVBS: tl.constexpr, FULL: tl.constexpr):
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    kv = ((b * KB) * (H // G) + h // G)
    offs_n = pid * BN + tl.arange(0, BN)
    offs_d = tl.arange(0, BD)
    offs_v = tl.arange(0, BDV)
    ki = offs_n[None, :]
    kt = tl.load(K + (kv * S + ki) * D + offs_d[:, None],
                 mask=(ki < S) & (offs_d[:, None] < D), other=0.0).to(tl.float32)
    vt = tl.load(V + (kv * S + ki) * DV + offs_v[:, None],
                 mask=(ki < S) & (offs_v[:, None] < DV), other=0.0).to(tl.float32)
    dk = tl.zeros([BN, BD], tl.float32)
    dv = tl.zeros([BN, BDV], tl.float32)
    if SPARSE:  # the query blocks keeping this key block: partly (masked), wholly (not)
        row = b * SB + h * SH + (pid * BN) // KVBS
        for j in range(0, tl.load(QN + row)):
            qb = tl.load(QI + row * NC + j)
            for t in range(0, QBS, BM):
                dk, dv = _dkdv_tile(Q, DO, LSE, DL, {bp}bh, kt, vt, L, S, qb * QBS + t, ki, b, h,
                                    scale, dk, dv, offs_d, offs_v, D, DV, BM, True)
        if FULL:
            for j in range(0, tl.load(FQN + row)):
                qb = tl.load(FQI + row * NC + j)
                for t in range(0, QBS, BM):
                    dk, dv = _dkdv_tile(Q, DO, LSE, DL, {bp}bh, kt, vt, L, S, qb * QBS + t, ki, b,
                                        h, scale, dk, dv, offs_d, offs_v, D, DV, BM, False)
    else:
        for start in range(0, L, BM):
            dk, dv = _dkdv_tile(Q, DO, LSE, DL, {bp}bh, kt, vt, L, S, start, ki, b, h, scale, dk,
                                dv, offs_d, offs_v, D, DV, BM, True)
    kn = offs_n[:, None]
    tl.store(DK + (bh * S + kn) * D + offs_d[None, :], dk, mask=(kn < S) & (offs_d[None, :] < D))
    tl.store(DV_ + (bh * S + kn) * DV + offs_v[None, :], dv,
             mask=(kn < S) & (offs_v[None, :] < DV))
'''


def _kernels_for(score: str, dscore: str, mask: str, nbuf: int):
    from ._flex import bufparams
    key = (score, dscore, mask, nbuf)
    k = _kernels.get(key)
    if k is None:
        import hashlib
        name = "flex_bwd_" + hashlib.sha1(repr(key).encode()).hexdigest()[:12]
        src = _SRC.format(name=name, score=score, dscore=dscore, mask=mask,
                          bp=bufparams(nbuf))
        k = _kernels[key] = (load_kernel(src, name + "_dq"), load_kernel(src, name + "_dkdv"))
    return k


def flex_backward(plan, query, key, value, out, lse, dout, dlse):
    """(dq, dk, dv) of the fused forward's call `plan`, dk and dv shaped as key and value."""
    import ember
    from ember.nn.attention import backend_api as flex

    from ._flex import _pow2, _walk_args
    from .kernels.base import _launch
    B, H, Hkv, L, S, E, Ev = plan.sizes
    q, k, v = query.contiguous(), key.contiguous(), value.contiguous()
    do = dout.contiguous() if dout is not None else ember.zeros_like(out)
    dl = flex.delta(out, lse, do, dlse)
    lse = lse.contiguous()
    dev = query.device
    dq = ember.empty(B, H, L, E, dtype=query.dtype, device=dev)
    dk = ember.empty(B, H, S, E, dtype=ember.float32, device=dev)
    dv = ember.empty(B, H, S, Ev, dtype=ember.float32, device=dev)
    kdq, kdkdv = _kernels_for(*plan.srcs)
    common = [H, H // Hkv, L, S, plan.kb, plan.scale]
    const = {"D": E, "DV": Ev, "BM": plan.bm, "BN": plan.bn, "BD": _pow2(E), "BDV": _pow2(Ev)}
    walk, flags = _walk_args(plan.kv, lse)
    _launch(plan.be, kdq, (-(-L // plan.bm), B * H),
            [q, k, v, do, lse, dl, dq, *walk[:4], *plan.bufs, *common, *walk[4:]], (),
            {**const, **flags})
    walk, flags = _walk_args(plan.q, lse)
    _launch(plan.be, kdkdv, (-(-S // plan.bn), B * H),
            [q, k, v, do, lse, dl, dk, dv, *walk[:4], *plan.bufs, *common, *walk[4:]], (),
            {**const, **flags})
    return dq, flex.reduce_kv(dk, key), flex.reduce_kv(dv, value)
