"""Triton kernels for pooling (max, average, adaptive; forward and backward) over
(planes, D, H, W) contiguous inputs, and the 2-D max pool of the CNN fast path.
Imported only when first needed (triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl

from .common_tl import lanes


# ---- pooling over (planes, D, H, W) contiguous (1-D and 2-D pools have D = H = 1 / D = 1) -------
@triton.jit
def _out_pos(offs, Do, Ho, Wo):
    # (plane, od, oh, ow) of flat output positions over (planes, Do, Ho, Wo)
    ow = offs % Wo
    t = offs // Wo
    oh = t % Ho
    t = t // Ho
    return t // Do, t % Do, oh, ow


@triton.jit
def _count(o, s, p, K: tl.constexpr, size, COUNT_PAD: tl.constexpr):
    start = o * s - p
    end = tl.minimum(start + K, size + p)
    if COUNT_PAD:
        return end - start
    return tl.minimum(end, size) - tl.maximum(start, 0)


@triton.jit
def _avg_div(od, oh, ow, D, H, W, sd, sh, sw, pd, ph, pw, divisor, KD: tl.constexpr,
             KH: tl.constexpr, KW: tl.constexpr, COUNT_PAD: tl.constexpr, HAS_DIV: tl.constexpr,
             ACC: tl.constexpr, BLOCK: tl.constexpr):
    # avg_pool's divisor of each output: divisor_override, else the window's element count
    # (count_include_pad: padding counts, the part past the padding never does)
    if HAS_DIV:
        div = tl.zeros([BLOCK], ACC) + divisor
    else:
        div = (_count(od, sd, pd, KD, D, COUNT_PAD) * _count(oh, sh, ph, KH, H, COUNT_PAD)
               * _count(ow, sw, pw, KW, W, COUNT_PAD)).to(ACC)
    return div


@triton.jit(do_not_specialize=["D", "H", "W", "Do", "Ho", "Wo", "total", "sd", "sh", "sw", "pd",
                               "ph", "pw", "dd", "dh", "dw", "divisor"])
def pool_fwd(x_ptr, y_ptr, i_ptr, D, H, W, Do, Ho, Wo, total, sd, sh, sw, pd, ph, pw, dd, dh, dw,
             divisor, KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, MAX: tl.constexpr,
             COUNT_PAD: tl.constexpr, HAS_DIV: tl.constexpr, ACC: tl.constexpr,
             BLOCK: tl.constexpr):
    # one output per lane. MAX: PyTorch's rule (the first max, the last NaN wins) and the flat
    # spatial index; else the average with PyTorch's divisor (avg_pool's count_include_pad rules)
    offs, m = lanes(total, BLOCK)
    plane, od, oh, ow = _out_pos(offs, Do, Ho, Wo)
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
        div = _avg_div(od, oh, ow, D, H, W, sd, sh, sw, pd, ph, pw, divisor, KD, KH, KW,
                       COUNT_PAD, HAS_DIV, ACC, BLOCK)
        tl.store(y_ptr + offs, (acc / div).to(y_ptr.dtype.element_ty), mask=m)




@triton.jit(do_not_specialize=["D", "H", "W", "Do", "Ho", "Wo", "total", "sd", "sh", "sw", "pd",
                               "ph", "pw", "divisor"])
def avg_pool_bwd(g_ptr, acc_ptr, D, H, W, Do, Ho, Wo, total, sd, sh, sw, pd, ph, pw, divisor,
                 KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, COUNT_PAD: tl.constexpr,
                 HAS_DIV: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    # acc (ACC) [window of output j] += g[j] / divisor[j]
    offs, m = lanes(total, BLOCK)
    plane, od, oh, ow = _out_pos(offs, Do, Ho, Wo)
    base = plane * D * H * W
    div = _avg_div(od, oh, ow, D, H, W, sd, sh, sw, pd, ph, pw, divisor, KD, KH, KW,
                   COUNT_PAD, HAS_DIV, ACC, BLOCK)
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
    offs, m = lanes(total, BLOCK)
    plane, od, oh, ow = _out_pos(offs, Do, Ho, Wo)
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
    offs, m = lanes(total, BLOCK)
    plane, od, oh, ow = _out_pos(offs, Do, Ho, Wo)
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


@triton.jit(do_not_specialize=["H", "W", "Ho", "Wo", "total", "sh", "sw", "ph", "pw", "dh", "dw"])
def max_pool2d_fwd(x_ptr, y_ptr, i_ptr, H, W, Ho, Wo, total, sh, sw, ph, pw, dh, dw,
                   KH: tl.constexpr, KW: tl.constexpr, BLOCK: tl.constexpr):
    # one output element per lane; PyTorch's rule: the first max, and a NaN always wins
    offs, m = lanes(total, BLOCK)
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
    offs, m = lanes(total, BLOCK)
    plane = offs // outs
    idx = tl.load(idx_ptr + offs, mask=m, other=0)
    g = tl.load(g_ptr + offs, mask=m, other=0).to(tl.float32)
    # indices outside the plane (only unchecked under CUDA-graph capture) write nothing
    m = m & (idx >= 0) & (idx < per)
    tl.atomic_add(acc_ptr + plane * per + idx, g, mask=m)
