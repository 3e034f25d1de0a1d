"""Flash attention in Triton (FlashAttention-2's algorithm): the forward (online softmax over key
blocks, saving the row logsumexp), the backward's delta = rowsum(dO * O), dk/dv per key block and
dq per query block, each recomputing P = exp(score - lse). Causal calls skip the key blocks above
the diagonal and mask only the diagonal ones. Scores are in log2 units inside (exp2).

Strides arrive divided by ALIGN (a constexpr: every row stride is a multiple of it) so Triton
knows the rows' alignment without specializing on stride values; the last dim is contiguous.
DOT: see _dot. MASK: 0 none, 1 a bool mask (True keeps), 2 an additive float mask (natural-log
units).
Imported only when a kernel is first needed (triton is optional at import).
"""
from __future__ import annotations

import triton
import triton.language as tl

# no value specialization of the ints (the launcher's cache key does not carry their values)
_FWD = ["sqb", "sqh", "sqm", "skb", "skh", "skn", "svb", "svh", "svn", "smb", "smh", "smm", "smn",
        "H", "L", "S"]
_BWD = _FWD[:9] + ["sdb", "sdh", "sdm"] + _FWD[9:]


@triton.jit
def _dot(a, b, DOT: tl.constexpr):
    # DOT 0: the inputs' precision (16-bit), 1: exact float32, 2: 16-bit upcast first (Triton's
    # interpreter, the fake device: its bfloat16 dots are wrong)
    if DOT == 1:
        return tl.dot(a, b, input_precision="ieee")
    if DOT == 2:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    return tl.dot(a, b)


@triton.jit
def _mask_tile(s, M, offs_m, offs_n, smm, smn, L, S, MASK: tl.constexpr, EVEN: tl.constexpr,
               TRANS: tl.constexpr):
    # the attn_mask applied to one (BM, BN) score tile (TRANS: a (BN, BM) tile, keys down)
    if TRANS:
        ptr = M + offs_m[None, :] * smm + offs_n[:, None] * smn
        inb = (offs_m[None, :] < L) & (offs_n[:, None] < S)
    else:
        ptr = M + offs_m[:, None] * smm + offs_n[None, :] * smn
        inb = (offs_m[:, None] < L) & (offs_n[None, :] < S)
    if MASK == 1:
        if EVEN:
            keep = tl.load(ptr)
        else:
            keep = tl.load(ptr, mask=inb, other=0)
        s = tl.where(keep != 0, s, float("-inf"))
    elif MASK == 2:
        if EVEN:
            add = tl.load(ptr)
        else:
            add = tl.load(ptr, mask=inb, other=0.0)
        s = s + add.to(tl.float32) * 1.4426950408889634
    return s


@triton.jit
def _fwd_loop(acc, l_i, m_i, q, Kb, Vb, Mb, skn, svn, smm, smn, offs_m, offs_d, L, S, qk_scale,
              lo, hi, ALIGN: tl.constexpr, D: tl.constexpr, BN: tl.constexpr,
              DIAG: tl.constexpr, MASK: tl.constexpr, EVEN: tl.constexpr, DOT: tl.constexpr):
    for start in range(lo, hi, BN):
        start = tl.multiple_of(start, BN)
        offs_n = start + tl.arange(0, BN)
        kp = Kb + offs_n[None, :] * (skn * ALIGN) + offs_d[:, None]
        vp = Vb + offs_n[:, None] * (svn * ALIGN) + offs_d[None, :]
        if EVEN:
            kt = tl.load(kp)
        else:
            kt = tl.load(kp, mask=(offs_n[None, :] < S) & (offs_d[:, None] < D), other=0.0)
        s = _dot(q, kt, DOT) * qk_scale                                  # (BM, BN), log2 units
        if MASK != 0:
            s = _mask_tile(s, Mb, offs_m, offs_n, smm, smn, L, S, MASK, EVEN, False)
        if DIAG:
            s = tl.where(offs_m[:, None] >= offs_n[None, :], s, float("-inf"))
        if not EVEN:
            s = tl.where(offs_n[None, :] < S, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        if MASK != 0:   # a row masked so far: no max yet (exp2(-inf - -inf) would be NaN)
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        else:
            m_use = m_new
        p = tl.math.exp2(s - m_use[:, None])
        alpha = tl.math.exp2(m_i - m_use)
        l_i = l_i * alpha + tl.sum(p, 1)
        if EVEN:
            v = tl.load(vp)
        else:
            v = tl.load(vp, mask=(offs_n[:, None] < S) & (offs_d[None, :] < D), other=0.0)
        acc = acc * alpha[:, None] + _dot(p.to(v.dtype), v, DOT)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit(do_not_specialize=_FWD)
def attn_fwd(Q, K, V, O, LSE, M, sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, smb, smh, smm, smn,
             H, L, S, qk_scale, ALIGN: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
             BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr, MASK: tl.constexpr,
             EVEN: tl.constexpr, DOT: tl.constexpr):
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    Qb = Q + b * (sqb * ALIGN) + h * (sqh * ALIGN)
    Kb = K + b * (skb * ALIGN) + h * (skh * ALIGN)
    Vb = V + b * (svb * ALIGN) + h * (svh * ALIGN)
    Mb = M + b * smb + h * smh
    offs_m = pid * BM + tl.arange(0, BM)
    offs_d = tl.arange(0, BD)
    qp = Qb + offs_m[:, None] * (sqm * ALIGN) + offs_d[None, :]
    if EVEN:
        q = tl.load(qp)
    else:
        q = tl.load(qp, mask=(offs_m[:, None] < L) & (offs_d[None, :] < D), other=0.0)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, BD], tl.float32)
    if CAUSAL:   # key j <= query i: the blocks left of the diagonal whole, the diagonal masked
        mid = tl.minimum(pid * BM, S)
        acc, l_i, m_i = _fwd_loop(acc, l_i, m_i, q, Kb, Vb, Mb, skn, svn, smm, smn, offs_m,
                                  offs_d, L, S, qk_scale, 0, mid, ALIGN, D, BN, False, MASK,
                                  EVEN, DOT)
        acc, l_i, m_i = _fwd_loop(acc, l_i, m_i, q, Kb, Vb, Mb, skn, svn, smm, smn, offs_m,
                                  offs_d, L, S, qk_scale, mid, tl.minimum(pid * BM + BM, S),
                                  ALIGN, D, BN, True, MASK, EVEN, DOT)
    else:
        acc, l_i, m_i = _fwd_loop(acc, l_i, m_i, q, Kb, Vb, Mb, skn, svn, smm, smn, offs_m,
                                  offs_d, L, S, qk_scale, 0, S, ALIGN, D, BN, False, MASK, EVEN,
                                  DOT)
    if MASK != 0 or not EVEN:   # fully masked rows: zeros (as PyTorch's math path), lse -inf
        dead = l_i == 0.0
        l_safe = tl.where(dead, 1.0, l_i)
        lse = tl.where(dead, float("-inf"), (m_i + tl.math.log2(l_safe)) * 0.6931471805599453)
    else:
        l_safe = l_i
        lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453
    out = acc / l_safe[:, None]
    op = O + bh.to(tl.int64) * L * D + offs_m[:, None] * D + offs_d[None, :]
    if EVEN:
        tl.store(op, out.to(O.dtype.element_ty))
        tl.store(LSE + bh.to(tl.int64) * L + offs_m, lse)
    else:
        tl.store(op, out.to(O.dtype.element_ty),
                 mask=(offs_m[:, None] < L) & (offs_d[None, :] < D))
        tl.store(LSE + bh.to(tl.int64) * L + offs_m, lse, mask=offs_m < L)


@triton.jit(do_not_specialize=["sdb", "sdh", "sdm", "H", "L"])
def attn_bwd_delta(O, DO, DELTA, sdb, sdh, sdm, H, L, ALIGN: tl.constexpr, D: tl.constexpr,
                   BD: tl.constexpr, BM: tl.constexpr):
    # delta = rowsum(dO * O) in float32 (O contiguous, dO strided)
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    offs_m = pid * BM + tl.arange(0, BM)
    offs_d = tl.arange(0, BD)
    msk = (offs_m[:, None] < L) & (offs_d[None, :] < D)
    o = tl.load(O + bh.to(tl.int64) * L * D + offs_m[:, None] * D + offs_d[None, :], mask=msk,
                other=0.0)
    do = tl.load(DO + b * (sdb * ALIGN) + h * (sdh * ALIGN) + offs_m[:, None] * (sdm * ALIGN)
                 + offs_d[None, :], mask=msk, other=0.0)
    d = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + bh.to(tl.int64) * L + offs_m, d, mask=offs_m < L)


@triton.jit
def _kv_loop(dk, dv, k, v, Qb, DOb, Mb, LSEb, DELb, sqm, sdm, smm, smn, offs_n, offs_d, L, S,
             qk_scale, lo, hi, ALIGN: tl.constexpr, D: tl.constexpr, BM: tl.constexpr,
             DIAG: tl.constexpr, MASK: tl.constexpr, EVEN: tl.constexpr, DOT: tl.constexpr):
    # dk, dv of one key block over the query blocks [lo, hi)
    for start in range(lo, hi, BM):
        start = tl.multiple_of(start, BM)
        offs_m = start + tl.arange(0, BM)
        qp = Qb + offs_m[None, :] * (sqm * ALIGN) + offs_d[:, None]
        dop = DOb + offs_m[:, None] * (sdm * ALIGN) + offs_d[None, :]
        if EVEN:
            qt = tl.load(qp)                                               # (BD, BM)
            do = tl.load(dop)                                              # (BM, BD)
            lse = tl.load(LSEb + offs_m)
            dl = tl.load(DELb + offs_m)
        else:
            qt = tl.load(qp, mask=(offs_m[None, :] < L) & (offs_d[:, None] < D), other=0.0)
            do = tl.load(dop, mask=(offs_m[:, None] < L) & (offs_d[None, :] < D), other=0.0)
            lse = tl.load(LSEb + offs_m, mask=offs_m < L, other=float("inf"))
            dl = tl.load(DELb + offs_m, mask=offs_m < L, other=0.0)
        # a fully masked row (lse -inf) has P = 0: +inf makes exp2(s - lse) 0
        lse2 = tl.where(lse == float("-inf"), float("inf"), lse * 1.4426950408889634)
        st = _dot(k, qt, DOT) * qk_scale                                  # (BN, BM)
        if MASK != 0:
            st = _mask_tile(st, Mb, offs_m, offs_n, smm, smn, L, S, MASK, EVEN, True)
        if DIAG:
            st = tl.where(offs_m[None, :] >= offs_n[:, None], st, float("-inf"))
        if not EVEN:
            st = tl.where(offs_n[:, None] < S, st, float("-inf"))
        pt = tl.math.exp2(st - lse2[None, :])
        dv += _dot(pt.to(do.dtype), do, DOT)
        dpt = _dot(v, tl.trans(do), DOT)                                  # (BN, BM)
        dst = pt * (dpt - dl[None, :])
        dk += _dot(dst.to(qt.dtype), tl.trans(qt), DOT)
    return dk, dv


@triton.jit(do_not_specialize=_BWD)
def attn_bwd_dkdv(Q, K, V, DO, LSE, DELTA, M, DK, DV, sqb, sqh, sqm, skb, skh, skn, svb, svh, svn,
                  sdb, sdh, sdm, smb, smh, smm, smn, H, L, S, qk_scale, scale,
                  ALIGN: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, BM: tl.constexpr,
                  BN: tl.constexpr, CAUSAL: tl.constexpr, MASK: tl.constexpr,
                  EVEN: tl.constexpr, DOT: tl.constexpr):
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    Qb = Q + b * (sqb * ALIGN) + h * (sqh * ALIGN)
    DOb = DO + b * (sdb * ALIGN) + h * (sdh * ALIGN)
    Mb = M + b * smb + h * smh
    LSEb = LSE + bh.to(tl.int64) * L
    DELb = DELTA + bh.to(tl.int64) * L
    offs_n = pid * BN + tl.arange(0, BN)
    offs_d = tl.arange(0, BD)
    kp = K + b * (skb * ALIGN) + h * (skh * ALIGN) + offs_n[:, None] * (skn * ALIGN) + \
        offs_d[None, :]
    vp = V + b * (svb * ALIGN) + h * (svh * ALIGN) + offs_n[:, None] * (svn * ALIGN) + \
        offs_d[None, :]
    if EVEN:
        k = tl.load(kp)
        v = tl.load(vp)
    else:
        inb = (offs_n[:, None] < S) & (offs_d[None, :] < D)
        k = tl.load(kp, mask=inb, other=0.0)
        v = tl.load(vp, mask=inb, other=0.0)
    dk = tl.zeros([BN, BD], tl.float32)
    dv = tl.zeros([BN, BD], tl.float32)
    if CAUSAL:   # queries i >= j: the diagonal blocks masked, the ones below it whole
        lo = pid * BN
        mid = tl.minimum(lo + BN, L)
        dk, dv = _kv_loop(dk, dv, k, v, Qb, DOb, Mb, LSEb, DELb, sqm, sdm, smm, smn, offs_n,
                          offs_d, L, S, qk_scale, lo, mid, ALIGN, D, BM, True, MASK, EVEN, DOT)
        dk, dv = _kv_loop(dk, dv, k, v, Qb, DOb, Mb, LSEb, DELb, sqm, sdm, smm, smn, offs_n,
                          offs_d, L, S, qk_scale, mid, L, ALIGN, D, BM, False, MASK, EVEN, DOT)
    else:
        dk, dv = _kv_loop(dk, dv, k, v, Qb, DOb, Mb, LSEb, DELb, sqm, sdm, smm, smn, offs_n,
                          offs_d, L, S, qk_scale, 0, L, ALIGN, D, BM, False, MASK, EVEN, DOT)
    dk = dk * scale
    base = bh.to(tl.int64) * S * D + offs_n[:, None] * D + offs_d[None, :]
    if EVEN:
        tl.store(DK + base, dk.to(DK.dtype.element_ty))
        tl.store(DV + base, dv.to(DV.dtype.element_ty))
    else:
        inb = (offs_n[:, None] < S) & (offs_d[None, :] < D)
        tl.store(DK + base, dk.to(DK.dtype.element_ty), mask=inb)
        tl.store(DV + base, dv.to(DV.dtype.element_ty), mask=inb)


@triton.jit
def _q_loop(dq, q, do, lse2, dl, Kb, Vb, Mb, skn, svn, smm, smn, offs_m, offs_d, L, S, qk_scale,
            lo, hi, ALIGN: tl.constexpr, D: tl.constexpr, BN: tl.constexpr, DIAG: tl.constexpr,
            MASK: tl.constexpr, EVEN: tl.constexpr, DOT: tl.constexpr):
    # dq of one query block over the key blocks [lo, hi)
    for start in range(lo, hi, BN):
        start = tl.multiple_of(start, BN)
        offs_n = start + tl.arange(0, BN)
        kp = Kb + offs_n[None, :] * (skn * ALIGN) + offs_d[:, None]
        vp = Vb + offs_n[None, :] * (svn * ALIGN) + offs_d[:, None]
        if EVEN:
            kt = tl.load(kp)                                               # (BD, BN)
            vt = tl.load(vp)
        else:
            inb = (offs_n[None, :] < S) & (offs_d[:, None] < D)
            kt = tl.load(kp, mask=inb, other=0.0)
            vt = tl.load(vp, mask=inb, other=0.0)
        s = _dot(q, kt, DOT) * qk_scale                                   # (BM, BN)
        if MASK != 0:
            s = _mask_tile(s, Mb, offs_m, offs_n, smm, smn, L, S, MASK, EVEN, False)
        if DIAG:
            s = tl.where(offs_m[:, None] >= offs_n[None, :], s, float("-inf"))
        if not EVEN:
            s = tl.where(offs_n[None, :] < S, s, float("-inf"))
        p = tl.math.exp2(s - lse2[:, None])
        dp = _dot(do, vt, DOT)
        ds = p * (dp - dl[:, None])
        dq += _dot(ds.to(kt.dtype), tl.trans(kt), DOT)
    return dq


@triton.jit(do_not_specialize=_BWD)
def attn_bwd_dq(Q, K, V, DO, LSE, DELTA, M, DQ, sqb, sqh, sqm, skb, skh, skn, svb, svh, svn,
                sdb, sdh, sdm, smb, smh, smm, smn, H, L, S, qk_scale, scale,
                ALIGN: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, BM: tl.constexpr,
                BN: tl.constexpr, CAUSAL: tl.constexpr, MASK: tl.constexpr,
                EVEN: tl.constexpr, DOT: tl.constexpr):
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    Kb = K + b * (skb * ALIGN) + h * (skh * ALIGN)
    Vb = V + b * (svb * ALIGN) + h * (svh * ALIGN)
    Mb = M + b * smb + h * smh
    offs_m = pid * BM + tl.arange(0, BM)
    offs_d = tl.arange(0, BD)
    qp = Q + b * (sqb * ALIGN) + h * (sqh * ALIGN) + offs_m[:, None] * (sqm * ALIGN) + \
        offs_d[None, :]
    dop = DO + b * (sdb * ALIGN) + h * (sdh * ALIGN) + offs_m[:, None] * (sdm * ALIGN) + \
        offs_d[None, :]
    LSEb = LSE + bh.to(tl.int64) * L
    DELb = DELTA + bh.to(tl.int64) * L
    if EVEN:
        q = tl.load(qp)
        do = tl.load(dop)
        lse = tl.load(LSEb + offs_m)
        dl = tl.load(DELb + offs_m)
    else:
        inb = (offs_m[:, None] < L) & (offs_d[None, :] < D)
        q = tl.load(qp, mask=inb, other=0.0)
        do = tl.load(dop, mask=inb, other=0.0)
        lse = tl.load(LSEb + offs_m, mask=offs_m < L, other=float("inf"))
        dl = tl.load(DELb + offs_m, mask=offs_m < L, other=0.0)
    lse2 = tl.where(lse == float("-inf"), float("inf"), lse * 1.4426950408889634)
    dq = tl.zeros([BM, BD], tl.float32)
    if CAUSAL:
        mid = tl.minimum(pid * BM, S)
        dq = _q_loop(dq, q, do, lse2, dl, Kb, Vb, Mb, skn, svn, smm, smn, offs_m, offs_d, L, S,
                     qk_scale, 0, mid, ALIGN, D, BN, False, MASK, EVEN, DOT)
        dq = _q_loop(dq, q, do, lse2, dl, Kb, Vb, Mb, skn, svn, smm, smn, offs_m, offs_d, L, S,
                     qk_scale, mid, tl.minimum(pid * BM + BM, S), ALIGN, D, BN, True, MASK,
                     EVEN, DOT)
    else:
        dq = _q_loop(dq, q, do, lse2, dl, Kb, Vb, Mb, skn, svn, smm, smn, offs_m, offs_d, L, S,
                     qk_scale, 0, S, ALIGN, D, BN, False, MASK, EVEN, DOT)
    dq = dq * scale
    op = DQ + bh.to(tl.int64) * L * D + offs_m[:, None] * D + offs_d[None, :]
    if EVEN:
        tl.store(op, dq.to(DQ.dtype.element_ty))
    else:
        tl.store(op, dq.to(DQ.dtype.element_ty), mask=(offs_m[:, None] < L) & (offs_d[None, :] < D))
