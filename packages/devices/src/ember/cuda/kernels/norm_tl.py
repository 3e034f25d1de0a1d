"""Triton kernels for normalization: batch norm (per channel, or split over programs), group
norm, layer norm (forward and backward).

Inputs are contiguous; statistics and sums accumulate in ACC (float32, float64 for float64).
Imported only when first needed (triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _rsqrt(v, ACC: tl.constexpr):
    # IEEE-rounded square root (sqrt_rn takes float32 only; float64's sqrt is exact already)
    if ACC == tl.float64:
        r = 1.0 / tl.sqrt(v)
    else:
        r = 1.0 / tl.sqrt_rn(v)
    return r


# ---- batch norm: x (N, C, S) contiguous, one program per channel ---------------------------------
@triton.jit
def _bn_running(rm_ptr, rv_ptr, nrm_ptr, nrv_ptr, c, mean, ss, M, momentum, HAS_RM: tl.constexpr,
                HAS_RV: tl.constexpr, ACC: tl.constexpr):
    # the new running mean and (unbiased) variance of channel c; ss: its sum of squared deviations
    if HAS_RM:
        rm = tl.load(rm_ptr + c).to(ACC)
        tl.store(nrm_ptr + c, ((1 - momentum) * rm + momentum * mean).to(
            nrm_ptr.dtype.element_ty))
    if HAS_RV:
        rv = tl.load(rv_ptr + c).to(ACC)
        tl.store(nrv_ptr + c, ((1 - momentum) * rv + momentum * (ss / (M - 1))).to(
            nrv_ptr.dtype.element_ty))


@triton.jit
def _bn_apply(x_ptr, w_ptr, b_ptr, y_ptr, c, C, S, lo, hi, mean, invstd, HAS_W: tl.constexpr,
              HAS_B: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    # y = (x - mean) * invstd * w + b over values [lo, hi) of channel c, as one scale and shift
    scale = invstd
    shift = -mean * invstd
    if HAS_W:
        wv = tl.load(w_ptr + c).to(ACC)
        scale = scale * wv
        shift = shift * wv
    if HAS_B:
        shift = shift + tl.load(b_ptr + c).to(ACC)
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    for start in range(lo, hi, BLOCK):
        i = start + lanes
        m = i < hi
        off = (i // S) * C * S + c * S + i % S
        xv = tl.load(x_ptr + off, mask=m, other=0).to(ACC)
        tl.store(y_ptr + off, (xv * scale + shift).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _bn_dx(g_ptr, x_ptr, w_ptr, dx_ptr, c, C, S, lo, hi, M, mean, invstd, sum_g, sum_gxhat,
           TRAIN: tl.constexpr, HAS_W: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    # dx over values [lo, hi) of channel c (M values in all) from the channel's sums of g and
    # g * xhat; eval mode: g * invstd * w
    wv = invstd
    if HAS_W:
        wv = wv * tl.load(w_ptr + c).to(ACC)
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    for start in range(lo, hi, BLOCK):
        i = start + lanes
        m = i < hi
        off = (i // S) * C * S + c * S + i % S
        gv = tl.load(g_ptr + off, mask=m, other=0).to(ACC)
        if TRAIN:
            xv = tl.load(x_ptr + off, mask=m, other=0).to(ACC)
            xhat = (xv - mean) * invstd
            gv = gv - sum_g / M - xhat * (sum_gxhat / M)
        tl.store(dx_ptr + off, (gv * wv).to(dx_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["N", "C", "S", "momentum", "eps"])
def bn_fwd(x_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, y_ptr, sm_ptr, si_ptr, nrm_ptr, nrv_ptr,
           N, C, S, momentum, eps, TRAIN: tl.constexpr, HAS_W: tl.constexpr,
           HAS_B: tl.constexpr, HAS_RM: tl.constexpr, HAS_RV: tl.constexpr,
           ACC: tl.constexpr, BLOCK: tl.constexpr):
    c = tl.program_id(0).to(tl.int64)
    M = N.to(tl.int64) * S
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    if TRAIN:
        acc = tl.zeros([BLOCK], ACC)
        for start in range(0, M, BLOCK):
            i = start + lanes
            m = i < M
            off = (i // S) * C * S + c * S + i % S
            acc += tl.load(x_ptr + off, mask=m, other=0).to(ACC)
        mean = tl.sum(acc, axis=0) / M
        acc2 = tl.zeros([BLOCK], ACC)
        for start in range(0, M, BLOCK):
            i = start + lanes
            m = i < M
            off = (i // S) * C * S + c * S + i % S
            d = tl.load(x_ptr + off, mask=m, other=0).to(ACC) - mean
            acc2 += tl.where(m, d * d, 0.0)
        ss = tl.sum(acc2, axis=0)
        invstd = _rsqrt(ss / M + eps, ACC)
        _bn_running(rm_ptr, rv_ptr, nrm_ptr, nrv_ptr, c, mean, ss, M, momentum, HAS_RM, HAS_RV,
                    ACC)
    else:
        mean = tl.load(rm_ptr + c).to(ACC)
        invstd = _rsqrt(tl.load(rv_ptr + c).to(ACC) + eps, ACC)
    _bn_apply(x_ptr, w_ptr, b_ptr, y_ptr, c, C, S, 0, M, mean, invstd, HAS_W, HAS_B, ACC, BLOCK)
    tl.store(sm_ptr + c, mean.to(sm_ptr.dtype.element_ty))
    tl.store(si_ptr + c, invstd.to(si_ptr.dtype.element_ty))


@triton.jit(do_not_specialize=["N", "C", "S"])
def bn_bwd(g_ptr, x_ptr, w_ptr, sm_ptr, si_ptr, dx_ptr, dw_ptr, db_ptr, N, C, S,
           TRAIN: tl.constexpr, HAS_W: tl.constexpr, NEED_DX: tl.constexpr,
           NEED_DW: tl.constexpr, NEED_DB: tl.constexpr, ACC: tl.constexpr,
           BLOCK: tl.constexpr):
    c = tl.program_id(0).to(tl.int64)
    M = N.to(tl.int64) * S
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    mean = tl.load(sm_ptr + c).to(ACC)
    invstd = tl.load(si_ptr + c).to(ACC)
    sg = tl.zeros([BLOCK], ACC)
    sgx = tl.zeros([BLOCK], ACC)
    for start in range(0, M, BLOCK):
        i = start + lanes
        m = i < M
        off = (i // S) * C * S + c * S + i % S
        gv = tl.load(g_ptr + off, mask=m, other=0).to(ACC)
        xv = tl.load(x_ptr + off, mask=m, other=0).to(ACC)
        sg += gv
        sgx += tl.where(m, gv * (xv - mean), 0.0)
    sum_g = tl.sum(sg, axis=0)
    sum_gxhat = tl.sum(sgx, axis=0) * invstd
    if NEED_DW:
        tl.store(dw_ptr + c, sum_gxhat.to(dw_ptr.dtype.element_ty))
    if NEED_DB:
        tl.store(db_ptr + c, sum_g.to(db_ptr.dtype.element_ty))
    if NEED_DX:
        _bn_dx(g_ptr, x_ptr, w_ptr, dx_ptr, c, C, S, 0, M, M, mean, invstd, sum_g, sum_gxhat,
               TRAIN, HAS_W, ACC, BLOCK)


# ---- group norm: x (N, C, S) contiguous, one program per (n, group) row of Cg*S values --------
@triton.jit(do_not_specialize=["C", "S", "Cg", "G", "eps"])
def gn_fwd(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, C, S, Cg, G, eps,
           HAS_W: tl.constexpr, HAS_B: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    L = Cg.to(tl.int64) * S
    base = row * L
    grp = row % G
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    acc = tl.zeros([BLOCK], ACC)
    for start in range(0, L, BLOCK):
        i = start + lanes
        acc += tl.load(x_ptr + base + i, mask=i < L, other=0).to(ACC)
    mean = tl.sum(acc, axis=0) / L
    acc2 = tl.zeros([BLOCK], ACC)
    for start in range(0, L, BLOCK):
        i = start + lanes
        m = i < L
        d = tl.load(x_ptr + base + i, mask=m, other=0).to(ACC) - mean
        acc2 += tl.where(m, d * d, 0.0)
    rstd = _rsqrt(tl.sum(acc2, axis=0) / L + eps, ACC)
    for start in range(0, L, BLOCK):
        i = start + lanes
        m = i < L
        y = (tl.load(x_ptr + base + i, mask=m, other=0).to(ACC) - mean) * rstd
        ch = grp * Cg + i // S
        if HAS_W:
            y = y * tl.load(w_ptr + ch, mask=m, other=0).to(ACC)
        if HAS_B:
            y = y + tl.load(b_ptr + ch, mask=m, other=0).to(ACC)
        tl.store(y_ptr + base + i, y.to(y_ptr.dtype.element_ty), mask=m)
    tl.store(mean_ptr + row, mean.to(mean_ptr.dtype.element_ty))
    tl.store(rstd_ptr + row, rstd.to(rstd_ptr.dtype.element_ty))


@triton.jit(do_not_specialize=["C", "S", "Cg", "G"])
def gn_bwd_dx(g_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, C, S, Cg, G,
              HAS_W: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    L = Cg.to(tl.int64) * S
    base = row * L
    grp = row % G
    mean = tl.load(mean_ptr + row).to(ACC)
    rstd = tl.load(rstd_ptr + row).to(ACC)
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    s1 = tl.zeros([BLOCK], ACC)
    s2 = tl.zeros([BLOCK], ACC)
    for start in range(0, L, BLOCK):
        i = start + lanes
        m = i < L
        gv = tl.load(g_ptr + base + i, mask=m, other=0).to(ACC)
        if HAS_W:
            gv = gv * tl.load(w_ptr + grp * Cg + i // S, mask=m, other=0).to(ACC)
        xhat = (tl.load(x_ptr + base + i, mask=m, other=0).to(ACC) - mean) * rstd
        s1 += gv
        s2 += tl.where(m, gv * xhat, 0.0)
    m1 = tl.sum(s1, axis=0) / L
    m2 = tl.sum(s2, axis=0) / L
    for start in range(0, L, BLOCK):
        i = start + lanes
        m = i < L
        gv = tl.load(g_ptr + base + i, mask=m, other=0).to(ACC)
        if HAS_W:
            gv = gv * tl.load(w_ptr + grp * Cg + i // S, mask=m, other=0).to(ACC)
        xhat = (tl.load(x_ptr + base + i, mask=m, other=0).to(ACC) - mean) * rstd
        tl.store(dx_ptr + base + i, (rstd * (gv - m1 - xhat * m2)).to(
            dx_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["N", "C", "S", "Cg", "G"])
def gn_bwd_dwb(g_ptr, x_ptr, mean_ptr, rstd_ptr, dw_ptr, db_ptr, N, C, S, Cg, G,
               NEED_DW: tl.constexpr, NEED_DB: tl.constexpr, ACC: tl.constexpr,
               BLOCK: tl.constexpr):
    # one program per channel: sums over (n, s) of g * xhat and g
    c = tl.program_id(0).to(tl.int64)
    M = N.to(tl.int64) * S
    grp = c // Cg
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    sw = tl.zeros([BLOCK], ACC)
    sb = tl.zeros([BLOCK], ACC)
    for start in range(0, M, BLOCK):
        i = start + lanes
        m = i < M
        n = i // S
        off = n * C * S + c * S + i % S
        gv = tl.load(g_ptr + off, mask=m, other=0).to(ACC)
        xv = tl.load(x_ptr + off, mask=m, other=0).to(ACC)
        mu = tl.load(mean_ptr + n * G + grp, mask=m, other=0).to(ACC)
        rs = tl.load(rstd_ptr + n * G + grp, mask=m, other=0).to(ACC)
        sw += tl.where(m, gv * (xv - mu) * rs, 0.0)
        sb += gv
    if NEED_DW:
        tl.store(dw_ptr + c, tl.sum(sw, axis=0).to(dw_ptr.dtype.element_ty))
    if NEED_DB:
        tl.store(db_ptr + c, tl.sum(sb, axis=0).to(db_ptr.dtype.element_ty))


# ---- batch norm, split: each channel's N*S values over P programs of `chunk` values -------------
@triton.jit(do_not_specialize=["N", "C", "S", "chunk", "P"])
def bn_partial(x_ptr, g_ptr, mean_ptr, p1_ptr, p2_ptr, N, C, S, chunk, P, BWD: tl.constexpr,
               ACC: tl.constexpr, BLOCK: tl.constexpr):
    # program (c, p) over values [p*chunk, (p+1)*chunk) of channel c. Forward: the chunk's mean
    # and its sum of squared deviations (two passes over the chunk; Chan's formula combines
    # them). BWD: sum(g) and sum(g * (x - mean)) with the saved mean.
    c = tl.program_id(0).to(tl.int64)
    p = tl.program_id(1).to(tl.int64)
    M = N.to(tl.int64) * S
    lo = p * chunk
    hi = tl.minimum(lo + chunk, M)
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    a1 = tl.zeros([BLOCK], ACC)
    a2 = tl.zeros([BLOCK], ACC)
    if BWD:
        mean = tl.load(mean_ptr + c).to(ACC)
        for start in range(lo, hi, BLOCK):
            i = start + lanes
            m = i < hi
            off = (i // S) * C * S + c * S + i % S
            gv = tl.load(g_ptr + off, mask=m, other=0).to(ACC)
            xv = tl.load(x_ptr + off, mask=m, other=0).to(ACC)
            a1 += gv
            a2 += tl.where(m, gv * (xv - mean), 0.0)
        tl.store(p1_ptr + c * P + p, tl.sum(a1, axis=0))
        tl.store(p2_ptr + c * P + p, tl.sum(a2, axis=0))
    else:
        for start in range(lo, hi, BLOCK):
            i = start + lanes
            m = i < hi
            off = (i // S) * C * S + c * S + i % S
            a1 += tl.load(x_ptr + off, mask=m, other=0).to(ACC)
        cnt = tl.maximum(hi - lo, 1).to(ACC)
        pm = tl.sum(a1, axis=0) / cnt
        for start in range(lo, hi, BLOCK):
            i = start + lanes
            m = i < hi
            off = (i // S) * C * S + c * S + i % S
            d = tl.load(x_ptr + off, mask=m, other=0).to(ACC) - pm
            a2 += tl.where(m, d * d, 0.0)
        tl.store(p1_ptr + c * P + p, pm)
        tl.store(p2_ptr + c * P + p, tl.sum(a2, axis=0))


@triton.jit(do_not_specialize=["N", "C", "S", "chunk", "P", "momentum", "eps"])
def bn_fwd_split(x_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, y_ptr, sm_ptr, si_ptr, nrm_ptr, nrv_ptr,
                 p1_ptr, p2_ptr, N, C, S, chunk, P, momentum, eps, TRAIN: tl.constexpr,
                 HAS_W: tl.constexpr, HAS_B: tl.constexpr, HAS_RM: tl.constexpr,
                 HAS_RV: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr,
                 BLOCK_P: tl.constexpr):
    # program (c, p): the channel's statistics from the P partials (every program combines them
    # the same way; program 0 stores them), then y over its chunk
    c = tl.program_id(0).to(tl.int64)
    p = tl.program_id(1).to(tl.int64)
    M = N.to(tl.int64) * S
    if TRAIN:
        q = tl.arange(0, BLOCK_P).to(tl.int64)
        mq = q < P
        cnt = tl.minimum(tl.maximum(M - q * chunk, 0), chunk).to(ACC)
        pm = tl.load(p1_ptr + c * P + q, mask=mq, other=0).to(ACC)
        pss = tl.load(p2_ptr + c * P + q, mask=mq, other=0).to(ACC)
        mean = tl.sum(cnt * pm, axis=0) / M
        dm = pm - mean
        ss = tl.sum(tl.where(mq, pss + cnt * dm * dm, 0.0), axis=0)
        invstd = _rsqrt(ss / M + eps, ACC)
        if p == 0:
            _bn_running(rm_ptr, rv_ptr, nrm_ptr, nrv_ptr, c, mean, ss, M, momentum, HAS_RM,
                        HAS_RV, ACC)
    else:
        mean = tl.load(rm_ptr + c).to(ACC)
        invstd = _rsqrt(tl.load(rv_ptr + c).to(ACC) + eps, ACC)
    if p == 0:
        tl.store(sm_ptr + c, mean.to(sm_ptr.dtype.element_ty))
        tl.store(si_ptr + c, invstd.to(si_ptr.dtype.element_ty))
    lo = p * chunk
    _bn_apply(x_ptr, w_ptr, b_ptr, y_ptr, c, C, S, lo, tl.minimum(lo + chunk, M), mean, invstd,
              HAS_W, HAS_B, ACC, BLOCK)


@triton.jit(do_not_specialize=["N", "C", "S", "chunk", "P"])
def bn_bwd_split(g_ptr, x_ptr, w_ptr, sm_ptr, si_ptr, dx_ptr, dw_ptr, db_ptr, p1_ptr, p2_ptr,
                 N, C, S, chunk, P, TRAIN: tl.constexpr, HAS_W: tl.constexpr,
                 NEED_DX: tl.constexpr, NEED_DW: tl.constexpr, NEED_DB: tl.constexpr,
                 ACC: tl.constexpr, BLOCK: tl.constexpr, BLOCK_P: tl.constexpr):
    # program (c, p): the channel's sums from the P partials (in one fixed order), program 0
    # stores dw/db, then dx over its chunk
    c = tl.program_id(0).to(tl.int64)
    p = tl.program_id(1).to(tl.int64)
    M = N.to(tl.int64) * S
    q = tl.arange(0, BLOCK_P).to(tl.int64)
    mq = q < P
    sum_g = tl.sum(tl.load(p1_ptr + c * P + q, mask=mq, other=0).to(ACC), axis=0)
    invstd = tl.load(si_ptr + c).to(ACC)
    sum_gxhat = tl.sum(tl.load(p2_ptr + c * P + q, mask=mq, other=0).to(ACC), axis=0) * invstd
    if p == 0:
        if NEED_DW:
            tl.store(dw_ptr + c, sum_gxhat.to(dw_ptr.dtype.element_ty))
        if NEED_DB:
            tl.store(db_ptr + c, sum_g.to(db_ptr.dtype.element_ty))
    if NEED_DX:
        mean = tl.load(sm_ptr + c).to(ACC)
        lo = p * chunk
        _bn_dx(g_ptr, x_ptr, w_ptr, dx_ptr, c, C, S, lo, tl.minimum(lo + chunk, M), M, mean,
               invstd, sum_g, sum_gxhat, TRAIN, HAS_W, ACC, BLOCK)


@triton.jit(do_not_specialize=["N", "eps"])
def layer_norm_fwd(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, N, eps,
                   HAS_W: tl.constexpr, HAS_B: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * N
    y_row = y_ptr + row * N
    cols = tl.arange(0, BLOCK)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        m = start + cols < N
        s += tl.load(x_row + start + cols, mask=m, other=0).to(tl.float32)
    mean = tl.sum(s, axis=0) / N
    v = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        m = start + cols < N
        d = tl.load(x_row + start + cols, mask=m, other=0).to(tl.float32) - mean
        v += tl.where(m, d * d, 0.0)
    rstd = 1.0 / tl.sqrt_rn(tl.sum(v, axis=0) / N + eps)
    for start in range(0, N, BLOCK):
        m = start + cols < N
        y = (tl.load(x_row + start + cols, mask=m, other=0).to(tl.float32) - mean) * rstd
        if HAS_W:
            y = y * tl.load(w_ptr + start + cols, mask=m, other=0).to(tl.float32)
        if HAS_B:
            y = y + tl.load(b_ptr + start + cols, mask=m, other=0).to(tl.float32)
        tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=m)
    tl.store(mean_ptr + row, mean.to(mean_ptr.dtype.element_ty))
    tl.store(rstd_ptr + row, rstd.to(rstd_ptr.dtype.element_ty))


@triton.jit(do_not_specialize=["M", "N", "ROWS"])
def layer_norm_bwd(g_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, M, N, ROWS,
                   HAS_W: tl.constexpr, BLOCK: tl.constexpr):
    # one program per ROWS rows (a whole row in registers): dx, and this program's partial sums
    # of g * xhat (weight grad) and g (bias grad), summed over programs by col_reduce after
    p = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    cm = cols < N
    if HAS_W:
        w = tl.load(w_ptr + cols, mask=cm, other=0).to(tl.float32)
    else:
        w = tl.full([BLOCK], 1.0, tl.float32)
    dw = tl.zeros([BLOCK], tl.float32)
    db = tl.zeros([BLOCK], tl.float32)
    for i in range(0, ROWS):
        row = p * ROWS + i
        m = cm & (row + cols * 0 < M)  # (a vector mask: the interpreter wants one)
        x = tl.load(x_ptr + row * N + cols, mask=m, other=0).to(tl.float32)
        g = tl.load(g_ptr + row * N + cols, mask=m, other=0).to(tl.float32)
        last = tl.minimum(row, M - 1)  # rows past the end read the last row's stats, unused
        mean = tl.load(mean_ptr + last).to(tl.float32)
        rstd = tl.load(rstd_ptr + last).to(tl.float32)
        xhat = tl.where(m, (x - mean) * rstd, 0.0)
        wg = g * w
        c1 = tl.sum(xhat * wg, axis=0) / N
        c2 = tl.sum(wg, axis=0) / N
        dx = (wg - (xhat * c1 + c2)) * rstd
        tl.store(dx_ptr + row * N + cols, dx.to(dx_ptr.dtype.element_ty), mask=m)
        dw += g * xhat
        db += g
    tl.store(dw_ptr + p * N + cols, dw, mask=cm)
    tl.store(db_ptr + p * N + cols, db, mask=cm)
