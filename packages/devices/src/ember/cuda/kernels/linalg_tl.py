"""Triton kernels for cdist (squared row norms, the matmul form's finish, the direct form).
Imported only when first needed (triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

from .common_tl import lanes


# ---- cdist: a (B, R, M), b (B, Q, M) contiguous -> out (B, R, Q) --------------------------------
@triton.jit(do_not_specialize=["rows", "M"])
def sqnorm_rows(x_ptr, out_ptr, rows, M, ACC: tl.constexpr, BLOCK: tl.constexpr):
    # out[r] = sum_k x[r, k]^2, one row per lane
    r, m = lanes(rows, BLOCK)
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
