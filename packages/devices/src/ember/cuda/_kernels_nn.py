"""Triton kernels for the nn ops a model needs every step: embedding (gather rows / scatter-add
rows), nll_loss forward/backward, layer_norm forward. Rows are contiguous; statistics in float32.
Imported only when first needed (triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["D"])
def gather_rows(w_ptr, idx_ptr, out_ptr, D, BLOCK: tl.constexpr):
    n = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < D
    i = tl.load(idx_ptr + n).to(tl.int64)
    tl.store(out_ptr + n * D + cols, tl.load(w_ptr + i * D + cols, mask=m), mask=m)


@triton.jit(do_not_specialize=["D", "PAD"])
def scatter_add_rows(g_ptr, idx_ptr, out_ptr, D, PAD, BLOCK: tl.constexpr):
    # out (float32) [idx[n], :] += g[n, :], skipping the padding index
    n = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    i = tl.load(idx_ptr + n).to(tl.int64)
    m = cols < D
    if i != PAD:
        v = tl.load(g_ptr + n * D + cols, mask=m, other=0).to(tl.float32)
        tl.atomic_add(out_ptr + i * D + cols, v, mask=m)


@triton.jit(do_not_specialize=["C", "IGNORE"])
def nll_rows(x_ptr, t_ptr, w_ptr, loss_ptr, wt_ptr, C, IGNORE, HAS_W: tl.constexpr):
    n = tl.program_id(0).to(tl.int64)
    t = tl.load(t_ptr + n).to(tl.int64)
    keep = t != IGNORE
    ts = tl.where(keep, t, 0)
    w = tl.full([], 1.0, tl.float32)
    if HAS_W:
        w = tl.load(w_ptr + ts).to(tl.float32)
    w = tl.where(keep, w, 0.0)
    v = tl.load(x_ptr + n * C + ts).to(tl.float32)
    tl.store(loss_ptr + n, -v * w)
    tl.store(wt_ptr + n, w)


@triton.jit(do_not_specialize=["C", "IGNORE"])
def nll_back_rows(g_ptr, t_ptr, w_ptr, tw_ptr, gx_ptr, C, IGNORE, HAS_W: tl.constexpr,
                  MODE: tl.constexpr):
    # MODE: 0 none (one grad per row), 1 mean (divide by the total weight), 2 sum
    n = tl.program_id(0).to(tl.int64)
    t = tl.load(t_ptr + n).to(tl.int64)
    keep = t != IGNORE
    ts = tl.where(keep, t, 0)
    w = tl.full([], 1.0, tl.float32)
    if HAS_W:
        w = tl.load(w_ptr + ts).to(tl.float32)
    if MODE == 0:
        g = tl.load(g_ptr + n).to(tl.float32)
    else:
        g = tl.load(g_ptr).to(tl.float32)
    if MODE == 1:
        g = g / tl.load(tw_ptr).to(tl.float32)
    tl.store(gx_ptr + n * C + ts, (-w * g).to(gx_ptr.dtype.element_ty), mask=keep)


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


@triton.jit(do_not_specialize=["R", "C", "DIAG"])
def tri_rows(x_ptr, out_ptr, R, C, DIAG, UPPER: tl.constexpr, BLOCK: tl.constexpr):
    # tril / triu over contiguous (..., R, C): program (b*R + r, column block)
    br = tl.program_id(0).to(tl.int64)
    r = br % R
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < C
    v = tl.load(x_ptr + br * C + cols, mask=m)
    if UPPER:
        keep = cols - r >= DIAG
    else:
        keep = cols - r <= DIAG
    tl.store(out_ptr + br * C + cols, tl.where(keep, v, tl.zeros_like(v)), mask=m)


@triton.jit(do_not_specialize=["H", "W", "Ho", "Wo", "total", "sh", "sw", "ph", "pw", "dh", "dw"])
def max_pool2d_fwd(x_ptr, y_ptr, i_ptr, H, W, Ho, Wo, total, sh, sw, ph, pw, dh, dw,
                   KH: tl.constexpr, KW: tl.constexpr, BLOCK: tl.constexpr):
    # one output element per lane; PyTorch's rule: the first max, and a NaN always wins
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < total
    ow = offs % Wo
    t = offs // Wo
    oh = t % Ho
    plane = t // Ho
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    bidx = tl.full([BLOCK], -1, tl.int64)
    for i in tl.static_range(KH):
        for j in tl.static_range(KW):
            h = oh * sh - ph + i * dh
            w = ow * sw - pw + j * dw
            ok = m & (h >= 0) & (h < H) & (w >= 0) & (w < W)
            v = tl.load(x_ptr + plane * H * W + h * W + w, mask=ok, other=float("-inf"))
            v = v.to(tl.float32)
            take = ok & ((bidx < 0) | (v > best) | (v != v))
            best = tl.where(take, v, best)
            bidx = tl.where(take, h * W + w, bidx)
    tl.store(y_ptr + offs, best.to(y_ptr.dtype.element_ty), mask=m)
    tl.store(i_ptr + offs, bidx, mask=m)


@triton.jit(do_not_specialize=["outs", "per", "total"])
def pool_scatter(g_ptr, idx_ptr, acc_ptr, outs, per, total, BLOCK: tl.constexpr):
    # acc (float32) [plane, idx[plane, j]] += g[plane, j]: the max-pool backward
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < total
    plane = offs // outs
    idx = tl.load(idx_ptr + offs, mask=m, other=0)
    g = tl.load(g_ptr + offs, mask=m, other=0).to(tl.float32)
    tl.atomic_add(acc_ptr + plane * per + idx, g, mask=m)


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
