"""Triton kernels for convolution's columns: im2col and col2im (1-D/2-D/3-D).
Imported only when first needed (triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl

from .common_tl import positions


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
    offs = positions(BLOCK, BIG)
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
    offs = positions(BLOCK, BIG)
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
