"""Triton kernels for ember.cuda._ops_nnx: batch/group norm, pooling, resampling.

Inputs are contiguous; statistics and sums accumulate in ACC (float32, float64 for float64).
Imported only when first needed (triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _rsqrt(v, ACC: tl.constexpr):
    # IEEE-rounded square root (sqrt_rn takes float32 only; float64's sqrt is exact already)
    if ACC == tl.float64:
        r = 1.0 / tl.sqrt(v)
    else:
        r = 1.0 / tl.sqrt_rn(v)
    return r


# ---- batch norm: x (N, C, S) contiguous, one program per channel ---------------------------------
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
        if HAS_RM:
            rm = tl.load(rm_ptr + c).to(ACC)
            tl.store(nrm_ptr + c, ((1 - momentum) * rm + momentum * mean).to(
                nrm_ptr.dtype.element_ty))
        if HAS_RV:
            rv = tl.load(rv_ptr + c).to(ACC)
            tl.store(nrv_ptr + c, ((1 - momentum) * rv + momentum * (ss / (M - 1))).to(
                nrv_ptr.dtype.element_ty))
    else:
        mean = tl.load(rm_ptr + c).to(ACC)
        invstd = _rsqrt(tl.load(rv_ptr + c).to(ACC) + eps, ACC)
    scale = invstd
    shift = -mean * invstd
    if HAS_W:
        wv = tl.load(w_ptr + c).to(ACC)
        scale = scale * wv
        shift = shift * wv
    if HAS_B:
        shift = shift + tl.load(b_ptr + c).to(ACC)
    for start in range(0, M, BLOCK):
        i = start + lanes
        m = i < M
        off = (i // S) * C * S + c * S + i % S
        xv = tl.load(x_ptr + off, mask=m, other=0).to(ACC)
        tl.store(y_ptr + off, (xv * scale + shift).to(y_ptr.dtype.element_ty), mask=m)
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
        wv = invstd
        if HAS_W:
            wv = wv * tl.load(w_ptr + c).to(ACC)
        for start in range(0, M, BLOCK):
            i = start + lanes
            m = i < M
            off = (i // S) * C * S + c * S + i % S
            gv = tl.load(g_ptr + off, mask=m, other=0).to(ACC)
            if TRAIN:
                xv = tl.load(x_ptr + off, mask=m, other=0).to(ACC)
                xhat = (xv - mean) * invstd
                gv = gv - sum_g / M - xhat * (sum_gxhat / M)
            tl.store(dx_ptr + off, (gv * wv).to(dx_ptr.dtype.element_ty), mask=m)


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


# ---- pooling over (planes, D, H, W) contiguous (1-D and 2-D pools have D = H = 1 / D = 1) -------
@triton.jit(do_not_specialize=["D", "H", "W", "Do", "Ho", "Wo", "total", "sd", "sh", "sw", "pd",
                               "ph", "pw", "dd", "dh", "dw", "divisor"])
def pool_fwd(x_ptr, y_ptr, i_ptr, D, H, W, Do, Ho, Wo, total, sd, sh, sw, pd, ph, pw, dd, dh, dw,
             divisor, KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, MAX: tl.constexpr,
             COUNT_PAD: tl.constexpr, HAS_DIV: tl.constexpr, ACC: tl.constexpr,
             BLOCK: tl.constexpr):
    # one output per lane. MAX: PyTorch's rule (the first max, the last NaN wins) and the flat
    # spatial index; else the average with PyTorch's divisor (avg_pool's count_include_pad rules)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < total
    ow = offs % Wo
    t = offs // Wo
    oh = t % Ho
    t = t // Ho
    od = t % Do
    plane = t // Do
    base = plane * D * H * W
    best = tl.full([BLOCK], float("-inf"), ACC)
    bidx = tl.full([BLOCK], -1, tl.int64)
    acc = tl.zeros([BLOCK], ACC)
    for a in tl.static_range(KD):
        d = od * sd - pd + a * dd
        for i in tl.static_range(KH):
            h = oh * sh - ph + i * dh
            for j in tl.static_range(KW):
                w = ow * sw - pw + j * dw
                ok = m & (d >= 0) & (d < D) & (h >= 0) & (h < H) & (w >= 0) & (w < W)
                v = tl.load(x_ptr + base + (d * H + h) * W + w, mask=ok, other=0).to(ACC)
                if MAX:
                    take = ok & ((bidx < 0) | (v > best) | (v != v))
                    best = tl.where(take, v, best)
                    bidx = tl.where(take, (d * H + h) * W + w, bidx)
                else:
                    acc += v
    if MAX:
        tl.store(y_ptr + offs, best.to(y_ptr.dtype.element_ty), mask=m)
        tl.store(i_ptr + offs, bidx, mask=m)
    else:
        if HAS_DIV:
            div = tl.zeros([BLOCK], ACC) + divisor
        else:
            div = (_count(od, sd, pd, KD, D, COUNT_PAD) * _count(oh, sh, ph, KH, H, COUNT_PAD)
                   * _count(ow, sw, pw, KW, W, COUNT_PAD)).to(ACC)
        tl.store(y_ptr + offs, (acc / div).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _count(o, s, p, K: tl.constexpr, size, COUNT_PAD: tl.constexpr):
    start = o * s - p
    end = tl.minimum(start + K, size + p)
    if COUNT_PAD:
        return end - start
    return tl.minimum(end, size) - tl.maximum(start, 0)


@triton.jit(do_not_specialize=["D", "H", "W", "Do", "Ho", "Wo", "total", "sd", "sh", "sw", "pd",
                               "ph", "pw", "divisor"])
def avg_pool_bwd(g_ptr, acc_ptr, D, H, W, Do, Ho, Wo, total, sd, sh, sw, pd, ph, pw, divisor,
                 KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, COUNT_PAD: tl.constexpr,
                 HAS_DIV: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    # acc (ACC) [window of output j] += g[j] / divisor[j]
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < total
    ow = offs % Wo
    t = offs // Wo
    oh = t % Ho
    t = t // Ho
    od = t % Do
    plane = t // Do
    base = plane * D * H * W
    if HAS_DIV:
        div = tl.zeros([BLOCK], ACC) + divisor
    else:
        div = (_count(od, sd, pd, KD, D, COUNT_PAD) * _count(oh, sh, ph, KH, H, COUNT_PAD)
               * _count(ow, sw, pw, KW, W, COUNT_PAD)).to(ACC)
    gv = tl.load(g_ptr + offs, mask=m, other=0).to(ACC) / div
    for a in tl.static_range(KD):
        d = od * sd - pd + a
        for i in tl.static_range(KH):
            h = oh * sh - ph + i
            for j in tl.static_range(KW):
                w = ow * sw - pw + j
                ok = m & (d >= 0) & (d < D) & (h >= 0) & (h < H) & (w >= 0) & (w < W)
                tl.atomic_add(acc_ptr + base + (d * H + h) * W + w, gv, mask=ok)


@triton.jit
def _arange_win(o, size, out):
    return (o * size) // out, ((o + 1) * size + out - 1) // out


@triton.jit(do_not_specialize=["D", "H", "W", "Do", "Ho", "Wo", "total", "KMD", "KMH", "KMW"])
def adaptive_fwd(x_ptr, y_ptr, i_ptr, D, H, W, Do, Ho, Wo, total, KMD, KMH, KMW,
                 MAX: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    # adaptive windows [floor(o*in/out), ceil((o+1)*in/out)); MAX: the first max (the first NaN)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < total
    ow = offs % Wo
    t = offs // Wo
    oh = t % Ho
    t = t // Ho
    od = t % Do
    plane = t // Do
    base = plane * D * H * W
    d0, d1 = _arange_win(od, D, Do)
    h0, h1 = _arange_win(oh, H, Ho)
    w0, w1 = _arange_win(ow, W, Wo)
    best = tl.full([BLOCK], float("-inf"), ACC)
    bidx = tl.full([BLOCK], -1, tl.int64)
    acc = tl.zeros([BLOCK], ACC)
    for a in range(0, KMD):
        d = d0 + a
        for i in range(0, KMH):
            h = h0 + i
            for j in range(0, KMW):
                w = w0 + j
                ok = m & (d < d1) & (h < h1) & (w < w1)
                v = tl.load(x_ptr + base + (d * H + h) * W + w, mask=ok, other=0).to(ACC)
                if MAX:
                    take = ok & ((bidx < 0) | (v > best) | ((v != v) & (best == best)))
                    best = tl.where(take, v, best)
                    bidx = tl.where(take, (d * H + h) * W + w, bidx)
                else:
                    acc += v
    if MAX:
        tl.store(y_ptr + offs, best.to(y_ptr.dtype.element_ty), mask=m)
        tl.store(i_ptr + offs, bidx, mask=m)
    else:
        cnt = ((d1 - d0) * (h1 - h0) * (w1 - w0)).to(ACC)
        tl.store(y_ptr + offs, (acc / cnt).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["D", "H", "W", "Do", "Ho", "Wo", "total", "KMD", "KMH", "KMW"])
def adaptive_avg_bwd(g_ptr, acc_ptr, D, H, W, Do, Ho, Wo, total, KMD, KMH, KMW,
                     ACC: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < total
    ow = offs % Wo
    t = offs // Wo
    oh = t % Ho
    t = t // Ho
    od = t % Do
    plane = t // Do
    base = plane * D * H * W
    d0, d1 = _arange_win(od, D, Do)
    h0, h1 = _arange_win(oh, H, Ho)
    w0, w1 = _arange_win(ow, W, Wo)
    cnt = ((d1 - d0) * (h1 - h0) * (w1 - w0)).to(ACC)
    gv = tl.load(g_ptr + offs, mask=m, other=0).to(ACC) / cnt
    for a in range(0, KMD):
        d = d0 + a
        for i in range(0, KMH):
            h = h0 + i
            for j in range(0, KMW):
                w = w0 + j
                ok = m & (d < d1) & (h < h1) & (w < w1)
                tl.atomic_add(acc_ptr + base + (d * H + h) * W + w, gv, mask=ok)


# ---- separable resampling: one dim at a time, x (A, In, B) -> y (A, Out, B) ---------------------
@triton.jit
def _taps(o, In, s_hi, s_lo, MODE: tl.constexpr, ALIGN: tl.constexpr, ACC: tl.constexpr):
    # source indices and weights of output position o (up to 4 taps; unused ones weigh 0)
    # MODE: 0 nearest, 1 nearest-exact, 2 linear, 3 cubic
    zero = tl.zeros(o.shape, ACC)
    scale = (zero + s_hi) + s_lo  # a float64 scale as two float32 halves
    if MODE <= 1:
        of = o.to(tl.float32)
        if MODE == 1:
            of = of + 0.5
        src = tl.floor(of * s_hi).to(tl.int64)
        i0 = tl.minimum(src, In - 1)
        return i0, i0, i0, i0, zero + 1.0, zero, zero, zero
    elif MODE == 2:
        of = o.to(ACC)
        if ALIGN:
            src = of * scale
        else:
            src = tl.maximum(scale * (of + 0.5) - 0.5, 0.0)
        i0 = tl.minimum(tl.floor(src).to(tl.int64), In - 1)
        i1 = tl.minimum(i0 + 1, In - 1)
        l1 = src - i0.to(ACC)
        return i0, i1, i0, i0, 1.0 - l1, l1, zero, zero
    else:
        of = o.to(ACC)
        if ALIGN:
            src = of * scale
        else:
            src = scale * (of + 0.5) - 0.5
        fl = tl.floor(src)
        i = fl.to(tl.int64)
        t = src - fl
        A = -0.75
        x0 = t + 1.0
        w0 = ((A * x0 - 5 * A) * x0 + 8 * A) * x0 - 4 * A
        w1 = ((A + 2) * t - (A + 3)) * t * t + 1
        x2 = 1.0 - t
        w2 = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1
        x3 = 2.0 - t
        w3 = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A
        i0 = tl.minimum(tl.maximum(i - 1, 0), In - 1)
        i1 = tl.minimum(tl.maximum(i, 0), In - 1)
        i2 = tl.minimum(tl.maximum(i + 1, 0), In - 1)
        i3 = tl.minimum(tl.maximum(i + 2, 0), In - 1)
        return i0, i1, i2, i3, w0, w1, w2, w3


@triton.jit(do_not_specialize=["In", "Out", "B", "total", "s_hi", "s_lo"])
def resample_fwd(x_ptr, y_ptr, In, Out, B, total, s_hi, s_lo, MODE: tl.constexpr,
                 ALIGN: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < total
    b = offs % B
    t = offs // B
    o = t % Out
    a = t // Out
    i0, i1, i2, i3, w0, w1, w2, w3 = _taps(o, In, s_hi, s_lo, MODE, ALIGN, ACC)
    row = a * In * B + b
    v = w0 * tl.load(x_ptr + row + i0 * B, mask=m, other=0).to(ACC)
    if MODE >= 2:
        v += w1 * tl.load(x_ptr + row + i1 * B, mask=m, other=0).to(ACC)
    if MODE == 3:
        v += w2 * tl.load(x_ptr + row + i2 * B, mask=m, other=0).to(ACC)
        v += w3 * tl.load(x_ptr + row + i3 * B, mask=m, other=0).to(ACC)
    tl.store(y_ptr + offs, v.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["In", "Out", "B", "total", "s_hi", "s_lo"])
def resample_bwd(g_ptr, acc_ptr, In, Out, B, total, s_hi, s_lo, MODE: tl.constexpr,
                 ALIGN: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    # acc (A, In, B) [taps of o] += w * g (A, Out, B): the transpose of resample_fwd
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < total
    b = offs % B
    t = offs // B
    o = t % Out
    a = t // Out
    i0, i1, i2, i3, w0, w1, w2, w3 = _taps(o, In, s_hi, s_lo, MODE, ALIGN, ACC)
    row = a * In * B + b
    gv = tl.load(g_ptr + offs, mask=m, other=0).to(ACC)
    tl.atomic_add(acc_ptr + row + i0 * B, w0 * gv, mask=m)
    if MODE >= 2:
        tl.atomic_add(acc_ptr + row + i1 * B, w1 * gv, mask=m)
    if MODE == 3:
        tl.atomic_add(acc_ptr + row + i2 * B, w2 * gv, mask=m)
        tl.atomic_add(acc_ptr + row + i3 * B, w3 * gv, mask=m)


# ---- convolution columns: 1-D/2-D/3-D as (D, H, W) with leading unit dims ------------------------
@triton.jit(do_not_specialize=["N", "Cg", "D", "H", "W", "Do", "Ho", "Wo", "KD", "KH", "KW",
                               "sxn", "sxc", "sxd", "sxh", "sxw", "sd", "sh", "sw", "pd", "ph",
                               "pw", "dd", "dh", "dw", "total"])
def im2col_k(x_ptr, out_ptr, N, Cg, D, H, W, Do, Ho, Wo, KD, KH, KW, sxn, sxc, sxd, sxh, sxw,
             sd, sh, sw, pd, ph, pw, dd, dh, dw, total, CONV: tl.constexpr, BIG: tl.constexpr,
             BLOCK: tl.constexpr):
    # out contiguous, one element per lane, read from x (any strides) with the zero padding as
    # masks. CONV: out is (G, N, L, Cg, K) (the matmul's (G, N*L, Cg*K)); else (N, Cg, K, L)
    # (F.unfold, G = 1). L = Do*Ho*Wo, K = KD*KH*KW.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if BIG:
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    m = offs < total
    L = Do * Ho * Wo
    KP = KD * KH * KW
    if CONV:
        k = offs % KP
        t = offs // KP
        c = t % Cg
        t = t // Cg
        lo = t % L
        t = t // L
        n = t % N
        ch = (t // N) * Cg + c
    else:
        lo = offs % L
        t = offs // L
        k = t % KP
        t = t // KP
        ch = t % Cg
        n = t // Cg
    ow = lo % Wo
    t = lo // Wo
    oh = t % Ho
    od = t // Ho
    kw = k % KW
    t = k // KW
    kh = t % KH
    kd = t // KH
    d = od * sd - pd + kd * dd
    h = oh * sh - ph + kh * dh
    w = ow * sw - pw + kw * dw
    ok = m & (d >= 0) & (d < D) & (h >= 0) & (h < H) & (w >= 0) & (w < W)
    v = tl.load(x_ptr + n * sxn + ch * sxc + d * sxd + h * sxh + w * sxw, mask=ok, other=0)
    tl.store(out_ptr + offs, v, mask=m)


@triton.jit(do_not_specialize=["C", "Cg", "D", "H", "W", "Do", "Ho", "Wo", "KD", "KH", "KW",
                               "scg", "scn", "scl", "scc", "sck", "sd", "sh", "sw", "pd", "ph",
                               "pw", "dd", "dh", "dw", "total"])
def col2im_k(c_ptr, out_ptr, C, Cg, D, H, W, Do, Ho, Wo, KD, KH, KW, scg, scn, scl, scc, sck,
             sd, sh, sw, pd, ph, pw, dd, dh, dw, total, ACC: tl.constexpr, BIG: tl.constexpr,
             BLOCK: tl.constexpr):
    # out (N, C, D, H, W) contiguous, one element per lane: the sum, in kernel-position order,
    # of the column entries (g, n, l, c, k) (element strides scg, scn, scl, scc, sck; l the flat
    # output position) that read it. A gather: no atomics, the same sum every run.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if BIG:
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    m = offs < total
    w = offs % W
    t = offs // W
    h = t % H
    t = t // H
    d = t % D
    t = t // D
    ch = t % C
    n = t // C
    base = (ch // Cg) * scg + n * scn + (ch % Cg) * scc
    td0 = d + pd
    th0 = h + ph
    tw0 = w + pw
    acc = tl.zeros([BLOCK], ACC)
    for kd in range(0, KD):
        td = td0 - kd * dd
        od = td // sd
        okd = m & (td >= 0) & (od * sd == td) & (od < Do)
        for kh in range(0, KH):
            th = th0 - kh * dh
            oh = th // sh
            okh = okd & (th >= 0) & (oh * sh == th) & (oh < Ho)
            for kw in range(0, KW):
                tw = tw0 - kw * dw
                ow = tw // sw
                ok = okh & (tw >= 0) & (ow * sw == tw) & (ow < Wo)
                k = (kd * KH + kh) * KW + kw
                v = tl.load(c_ptr + base + ((od * Ho + oh) * Wo + ow) * scl + k * sck, mask=ok,
                            other=0)
                acc += v.to(ACC)
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=m)


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
            if HAS_RM:
                rm = tl.load(rm_ptr + c).to(ACC)
                tl.store(nrm_ptr + c, ((1 - momentum) * rm + momentum * mean).to(
                    nrm_ptr.dtype.element_ty))
            if HAS_RV:
                rv = tl.load(rv_ptr + c).to(ACC)
                tl.store(nrv_ptr + c, ((1 - momentum) * rv + momentum * (ss / (M - 1))).to(
                    nrv_ptr.dtype.element_ty))
    else:
        mean = tl.load(rm_ptr + c).to(ACC)
        invstd = _rsqrt(tl.load(rv_ptr + c).to(ACC) + eps, ACC)
    if p == 0:
        tl.store(sm_ptr + c, mean.to(sm_ptr.dtype.element_ty))
        tl.store(si_ptr + c, invstd.to(si_ptr.dtype.element_ty))
    scale = invstd
    shift = -mean * invstd
    if HAS_W:
        wv = tl.load(w_ptr + c).to(ACC)
        scale = scale * wv
        shift = shift * wv
    if HAS_B:
        shift = shift + tl.load(b_ptr + c).to(ACC)
    lo = p * chunk
    hi = tl.minimum(lo + chunk, M)
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    for start in range(lo, hi, BLOCK):
        i = start + lanes
        m = i < hi
        off = (i // S) * C * S + c * S + i % S
        xv = tl.load(x_ptr + off, mask=m, other=0).to(ACC)
        tl.store(y_ptr + off, (xv * scale + shift).to(y_ptr.dtype.element_ty), mask=m)


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
        wv = invstd
        if HAS_W:
            wv = wv * tl.load(w_ptr + c).to(ACC)
        lo = p * chunk
        hi = tl.minimum(lo + chunk, M)
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


# ---- grid_sampler (2-D): lanes over the N*P sampled points, a loop over the channels ------------
@triton.jit
def _grid_px(gv, size, ALIGN: tl.constexpr, BORDER: tl.constexpr):
    # a normalized coordinate in pixels, and d pixel / d coordinate (0 where border clips)
    if ALIGN:
        pix = (gv + 1) / 2 * (size - 1)
        sc = (size - 1) / 2
    else:
        pix = ((gv + 1) * size - 1) / 2
        sc = size / 2
    scale = tl.zeros(gv.shape, gv.dtype) + sc
    if BORDER:
        scale = tl.where((pix > 0) & (pix < size - 1), scale, 0.0)
        pix = tl.minimum(tl.maximum(pix, 0.0), size - 1)
    return pix, scale


@triton.jit
def _rint(v):
    # round half to even (nearbyint), exactly
    f = tl.floor(v)
    d = v - f
    odd = (f - 2 * tl.floor(f * 0.5)) != 0
    return tl.where((d > 0.5) | ((d == 0.5) & odd), f + 1, f)


@triton.jit(do_not_specialize=["C", "H", "W", "P", "total"])
def grid_fwd(x_ptr, g_ptr, y_ptr, C, H, W, P, total, NEAREST: tl.constexpr,
             ALIGN: tl.constexpr, BORDER: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    # x (N, C, H, W), grid (N, P, 2), y (N, C, P), all contiguous; core's corner order and sums
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < total
    n = offs // P
    p = offs % P
    ix, _ = _grid_px(tl.load(g_ptr + offs * 2, mask=m, other=0).to(ACC), W, ALIGN, BORDER)
    iy, _ = _grid_px(tl.load(g_ptr + offs * 2 + 1, mask=m, other=0).to(ACC), H, ALIGN, BORDER)
    HW = H.to(tl.int64) * W
    xb = n * C * HW
    yb = n * C * P + p
    if NEAREST:
        cx = _rint(ix)
        cy = _rint(iy)
        ok = m & (cx >= 0) & (cx < W) & (cy >= 0) & (cy < H)
        i0 = tl.where(ok, cy.to(tl.int64) * W + cx.to(tl.int64), 0)
        for c in range(0, C):
            v = tl.load(x_ptr + xb + c * HW + i0, mask=ok, other=0).to(ACC)
            tl.store(y_ptr + yb + c * P, v.to(y_ptr.dtype.element_ty), mask=m)
    else:
        x0 = tl.floor(ix)
        y0 = tl.floor(iy)
        x1 = x0 + 1
        y1 = y0 + 1
        okx0 = (x0 >= 0) & (x0 < W)
        okx1 = (x1 >= 0) & (x1 < W)
        oky0 = (y0 >= 0) & (y0 < H)
        oky1 = (y1 >= 0) & (y1 < H)
        k00 = m & okx0 & oky0
        k10 = m & okx1 & oky0
        k01 = m & okx0 & oky1
        k11 = m & okx1 & oky1
        w00 = tl.where(k00, (x1 - ix) * (y1 - iy), 0.0)
        w10 = tl.where(k10, (ix - x0) * (y1 - iy), 0.0)
        w01 = tl.where(k01, (x1 - ix) * (iy - y0), 0.0)
        w11 = tl.where(k11, (ix - x0) * (iy - y0), 0.0)
        xi0 = x0.to(tl.int64)
        yi0 = y0.to(tl.int64)
        i00 = tl.where(k00, yi0 * W + xi0, 0)
        i10 = tl.where(k10, yi0 * W + xi0 + 1, 0)
        i01 = tl.where(k01, (yi0 + 1) * W + xi0, 0)
        i11 = tl.where(k11, (yi0 + 1) * W + xi0 + 1, 0)
        for c in range(0, C):
            base = x_ptr + xb + c * HW
            acc = tl.load(base + i00, mask=k00, other=0).to(ACC) * w00
            acc += tl.load(base + i10, mask=k10, other=0).to(ACC) * w10
            acc += tl.load(base + i01, mask=k01, other=0).to(ACC) * w01
            acc += tl.load(base + i11, mask=k11, other=0).to(ACC) * w11
            tl.store(y_ptr + yb + c * P, acc.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["C", "H", "W", "P", "total"])
def grid_bwd(go_ptr, x_ptr, g_ptr, gi_ptr, gg_ptr, C, H, W, P, total, NEAREST: tl.constexpr,
             ALIGN: tl.constexpr, BORDER: tl.constexpr, NEED_GI: tl.constexpr,
             NEED_GG: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    # gi (N, C, H, W) in ACC, zeroed: += w * gout at each corner (atomics: corners are shared);
    # gg (N, P, 2): bilinear only, sum over corners of <x at corner, gout> * dw/d(ix, iy) * scale
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < total
    n = offs // P
    p = offs % P
    ix, sx = _grid_px(tl.load(g_ptr + offs * 2, mask=m, other=0).to(ACC), W, ALIGN, BORDER)
    iy, sy = _grid_px(tl.load(g_ptr + offs * 2 + 1, mask=m, other=0).to(ACC), H, ALIGN, BORDER)
    HW = H.to(tl.int64) * W
    xb = n * C * HW
    gb = n * C * P + p
    if NEAREST:
        cx = _rint(ix)
        cy = _rint(iy)
        ok = m & (cx >= 0) & (cx < W) & (cy >= 0) & (cy < H)
        i0 = tl.where(ok, cy.to(tl.int64) * W + cx.to(tl.int64), 0)
        if NEED_GI:
            for c in range(0, C):
                gv = tl.load(go_ptr + gb + c * P, mask=m, other=0).to(ACC)
                tl.atomic_add(gi_ptr + xb + c * HW + i0, gv, mask=ok)
        if NEED_GG:
            zero = tl.zeros([BLOCK], ACC)
            tl.store(gg_ptr + offs * 2, zero.to(gg_ptr.dtype.element_ty), mask=m)
            tl.store(gg_ptr + offs * 2 + 1, zero.to(gg_ptr.dtype.element_ty), mask=m)
    else:
        x0 = tl.floor(ix)
        y0 = tl.floor(iy)
        x1 = x0 + 1
        y1 = y0 + 1
        okx0 = (x0 >= 0) & (x0 < W)
        okx1 = (x1 >= 0) & (x1 < W)
        oky0 = (y0 >= 0) & (y0 < H)
        oky1 = (y1 >= 0) & (y1 < H)
        k00 = m & okx0 & oky0
        k10 = m & okx1 & oky0
        k01 = m & okx0 & oky1
        k11 = m & okx1 & oky1
        xi0 = x0.to(tl.int64)
        yi0 = y0.to(tl.int64)
        i00 = tl.where(k00, yi0 * W + xi0, 0)
        i10 = tl.where(k10, yi0 * W + xi0 + 1, 0)
        i01 = tl.where(k01, (yi0 + 1) * W + xi0, 0)
        i11 = tl.where(k11, (yi0 + 1) * W + xi0 + 1, 0)
        w00 = (x1 - ix) * (y1 - iy)
        w10 = (ix - x0) * (y1 - iy)
        w01 = (x1 - ix) * (iy - y0)
        w11 = (ix - x0) * (iy - y0)
        s00 = tl.zeros([BLOCK], ACC)
        s10 = tl.zeros([BLOCK], ACC)
        s01 = tl.zeros([BLOCK], ACC)
        s11 = tl.zeros([BLOCK], ACC)
        for c in range(0, C):
            gv = tl.load(go_ptr + gb + c * P, mask=m, other=0).to(ACC)
            base = xb + c * HW
            if NEED_GI:
                tl.atomic_add(gi_ptr + base + i00, gv * w00, mask=k00)
                tl.atomic_add(gi_ptr + base + i10, gv * w10, mask=k10)
                tl.atomic_add(gi_ptr + base + i01, gv * w01, mask=k01)
                tl.atomic_add(gi_ptr + base + i11, gv * w11, mask=k11)
            if NEED_GG:
                s00 += tl.load(x_ptr + base + i00, mask=k00, other=0).to(ACC) * gv
                s10 += tl.load(x_ptr + base + i10, mask=k10, other=0).to(ACC) * gv
                s01 += tl.load(x_ptr + base + i01, mask=k01, other=0).to(ACC) * gv
                s11 += tl.load(x_ptr + base + i11, mask=k11, other=0).to(ACC) * gv
        if NEED_GG:
            ggx = s00 * (-(y1 - iy)) + s10 * (y1 - iy) + s01 * (-(iy - y0)) + s11 * (iy - y0)
            ggy = s00 * (-(x1 - ix)) + s10 * (-(ix - x0)) + s01 * (x1 - ix) + s11 * (ix - x0)
            tl.store(gg_ptr + offs * 2, (ggx * sx).to(gg_ptr.dtype.element_ty), mask=m)
            tl.store(gg_ptr + offs * 2 + 1, (ggy * sy).to(gg_ptr.dtype.element_ty), mask=m)


# ---- cdist: a (B, R, M), b (B, Q, M) contiguous -> out (B, R, Q) --------------------------------
@triton.jit(do_not_specialize=["rows", "M"])
def sqnorm_rows(x_ptr, out_ptr, rows, M, ACC: tl.constexpr, BLOCK: tl.constexpr):
    # out[r] = sum_k x[r, k]^2, one row per lane
    r = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = r < rows
    acc = tl.zeros([BLOCK], ACC)
    for k in range(0, M):
        v = tl.load(x_ptr + r * M + k, mask=m, other=0).to(ACC)
        acc += v * v
    tl.store(out_ptr + r, acc, mask=m)


@triton.jit(do_not_specialize=["R", "Q"])
def cdist_mm_fin(ab_ptr, na_ptr, nb_ptr, out_ptr, R, Q, ACC: tl.constexpr,
                 BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # out = sqrt(max(|a_i|^2 + |b_j|^2 - 2 a_i.b_j, 0)), ab the (B, R, Q) products
    bt = tl.program_id(0).to(tl.int64)
    i = tl.program_id(1).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    j = tl.program_id(2).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    mi = i < R
    mj = j < Q
    m = mi[:, None] & mj[None, :]
    na = tl.load(na_ptr + bt * R + i, mask=mi, other=0).to(ACC)
    nb = tl.load(nb_ptr + bt * Q + j, mask=mj, other=0).to(ACC)
    off = bt * R * Q + i[:, None] * Q + j[None, :]
    ab = tl.load(ab_ptr + off, mask=m, other=0).to(ACC)
    d2 = (na[:, None] + nb[None, :]) - 2 * ab
    tl.store(out_ptr + off, tl.sqrt(tl.maximum(d2, 0.0)).to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def _pow(v, e, LIBDEVICE: tl.constexpr):
    # v ** e for v > 0: libdevice's pow on the GPU; Triton's interpreter has no libdevice
    if LIBDEVICE:
        r = libdevice.pow(v, e)
    else:
        r = tl.exp2(tl.log2(v) * e)
    return r


@triton.jit(do_not_specialize=["R", "Q", "M", "p_hi", "p_lo"])
def cdist_direct(a_ptr, b_ptr, out_ptr, R, Q, M, p_hi, p_lo, MODE: tl.constexpr, ACC: tl.constexpr,
                 LIBDEVICE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # a (BLOCK_R x BLOCK_C) tile of distances, a loop over the M coordinates. MODE: 0 p == 0
    # (count of differing coordinates), 1 p == 1, 2 p == 2, 3 p == inf, 4 any other p (a float64
    # p as two float32 halves)
    p = (tl.zeros([BLOCK_R, BLOCK_C], ACC) + p_hi) + p_lo
    bt = tl.program_id(0).to(tl.int64)
    i = tl.program_id(1).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    j = tl.program_id(2).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    mi = i < R
    mj = j < Q
    acc = tl.zeros([BLOCK_R, BLOCK_C], ACC)
    pa = a_ptr + bt * R * M + i * M
    pb = b_ptr + bt * Q * M + j * M
    for k in range(0, M):
        av = tl.load(pa + k, mask=mi, other=0).to(ACC)
        bv = tl.load(pb + k, mask=mj, other=0).to(ACC)
        d = tl.abs(av[:, None] - bv[None, :])
        if MODE == 0:
            acc += tl.where(d != 0, 1.0, 0.0)
        elif MODE == 1:
            acc += d
        elif MODE == 2:
            acc += d * d
        elif MODE == 3:
            acc = tl.maximum(acc, d)
        else:
            acc += tl.where(d == 0, 0.0, _pow(tl.where(d == 0, 1.0, d), p, LIBDEVICE))
    if MODE == 2:
        acc = tl.sqrt(acc)
    elif MODE == 4:
        acc = tl.where(acc == 0, 0.0, _pow(tl.where(acc == 0, 1.0, acc), 1.0 / p, LIBDEVICE))
    off = bt * R * Q + i[:, None] * Q + j[None, :]
    tl.store(out_ptr + off, acc.to(out_ptr.dtype.element_ty), mask=mi[:, None] & mj[None, :])
