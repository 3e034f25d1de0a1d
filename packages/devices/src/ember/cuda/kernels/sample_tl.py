"""Triton kernels for resampling: separable interpolation (upsample forward/backward) and
the 2-D grid_sampler. Imported only when first needed (triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl

from .common_tl import lanes


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


@triton.jit
def _resample_at(offs, In, Out, B, s_hi, s_lo, MODE: tl.constexpr, ALIGN: tl.constexpr,
                 ACC: tl.constexpr):
    # output positions (a, o, b) of an (A, Out, B) result: the input row a * In * B + b and the
    # taps (indices along In, weights) of o
    b = offs % B
    t = offs // B
    o = t % Out
    a = t // Out
    i0, i1, i2, i3, w0, w1, w2, w3 = _taps(o, In, s_hi, s_lo, MODE, ALIGN, ACC)
    return a * In * B + b, i0, i1, i2, i3, w0, w1, w2, w3


@triton.jit(do_not_specialize=["In", "Out", "B", "total", "s_hi", "s_lo"])
def resample_fwd(x_ptr, y_ptr, In, Out, B, total, s_hi, s_lo, MODE: tl.constexpr,
                 ALIGN: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    offs, m = lanes(total, BLOCK)
    row, i0, i1, i2, i3, w0, w1, w2, w3 = _resample_at(offs, In, Out, B, s_hi, s_lo, MODE,
                                                       ALIGN, ACC)
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
    offs, m = lanes(total, BLOCK)
    row, i0, i1, i2, i3, w0, w1, w2, w3 = _resample_at(offs, In, Out, B, s_hi, s_lo, MODE,
                                                       ALIGN, ACC)
    gv = tl.load(g_ptr + offs, mask=m, other=0).to(ACC)
    tl.atomic_add(acc_ptr + row + i0 * B, w0 * gv, mask=m)
    if MODE >= 2:
        tl.atomic_add(acc_ptr + row + i1 * B, w1 * gv, mask=m)
    if MODE == 3:
        tl.atomic_add(acc_ptr + row + i2 * B, w2 * gv, mask=m)
        tl.atomic_add(acc_ptr + row + i3 * B, w3 * gv, mask=m)


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


@triton.jit
def _nearest(ix, iy, H, W, m):
    # the nearest pixel of (ix, iy) in an (H, W) plane: (in bounds, flat index or 0)
    cx = _rint(ix)
    cy = _rint(iy)
    ok = m & (cx >= 0) & (cx < W) & (cy >= 0) & (cy < H)
    return ok, tl.where(ok, cy.to(tl.int64) * W + cx.to(tl.int64), 0)


@triton.jit
def _corners(ix, iy, H, W, m):
    # bilinear corners of (ix, iy): (x0, y0, x1, y1), then for corners 00, 10, 01, 11 (x, y)
    # whether each is in the plane and its flat index (0 where it is not)
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
    return x0, y0, x1, y1, k00, k10, k01, k11, i00, i10, i01, i11


@triton.jit(do_not_specialize=["C", "H", "W", "P", "total"])
def grid_fwd(x_ptr, g_ptr, y_ptr, C, H, W, P, total, NEAREST: tl.constexpr,
             ALIGN: tl.constexpr, BORDER: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    # x (N, C, H, W), grid (N, P, 2), y (N, C, P), all contiguous; core's corner order and sums
    offs, m = lanes(total, BLOCK)
    n = offs // P
    p = offs % P
    ix, _ = _grid_px(tl.load(g_ptr + offs * 2, mask=m, other=0).to(ACC), W, ALIGN, BORDER)
    iy, _ = _grid_px(tl.load(g_ptr + offs * 2 + 1, mask=m, other=0).to(ACC), H, ALIGN, BORDER)
    HW = H.to(tl.int64) * W
    xb = n * C * HW
    yb = n * C * P + p
    if NEAREST:
        ok, i0 = _nearest(ix, iy, H, W, m)
        for c in range(0, C):
            v = tl.load(x_ptr + xb + c * HW + i0, mask=ok, other=0).to(ACC)
            tl.store(y_ptr + yb + c * P, v.to(y_ptr.dtype.element_ty), mask=m)
    else:
        x0, y0, x1, y1, k00, k10, k01, k11, i00, i10, i01, i11 = _corners(ix, iy, H, W, m)
        w00 = tl.where(k00, (x1 - ix) * (y1 - iy), 0.0)
        w10 = tl.where(k10, (ix - x0) * (y1 - iy), 0.0)
        w01 = tl.where(k01, (x1 - ix) * (iy - y0), 0.0)
        w11 = tl.where(k11, (ix - x0) * (iy - y0), 0.0)
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
    offs, m = lanes(total, BLOCK)
    n = offs // P
    p = offs % P
    ix, sx = _grid_px(tl.load(g_ptr + offs * 2, mask=m, other=0).to(ACC), W, ALIGN, BORDER)
    iy, sy = _grid_px(tl.load(g_ptr + offs * 2 + 1, mask=m, other=0).to(ACC), H, ALIGN, BORDER)
    HW = H.to(tl.int64) * W
    xb = n * C * HW
    gb = n * C * P + p
    if NEAREST:
        ok, i0 = _nearest(ix, iy, H, W, m)
        if NEED_GI:
            for c in range(0, C):
                gv = tl.load(go_ptr + gb + c * P, mask=m, other=0).to(ACC)
                tl.atomic_add(gi_ptr + xb + c * HW + i0, gv, mask=ok)
        if NEED_GG:
            zero = tl.zeros([BLOCK], ACC)
            tl.store(gg_ptr + offs * 2, zero.to(gg_ptr.dtype.element_ty), mask=m)
            tl.store(gg_ptr + offs * 2 + 1, zero.to(gg_ptr.dtype.element_ty), mask=m)
    else:
        x0, y0, x1, y1, k00, k10, k01, k11, i00, i10, i01, i11 = _corners(ix, iy, H, W, m)
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
