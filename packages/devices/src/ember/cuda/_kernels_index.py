"""Triton kernels for indexing, gather/scatter and masks (ember.cuda._ops_index drives them).

Tensors of up to 6 dims are addressed through their strides: a flat position in the iteration
shape (padded in front to 6 dims with size 1) becomes coordinates, and each operand's offset is
coordinates . strides (a stride 0 broadcasts). Every gathered or scattered address is checked
against the span of its storage, so a bad index can never touch memory outside it (the host
checks the bounds too, to raise PyTorch's error). Imported only when first needed.
"""
from __future__ import annotations

import triton
import triton.language as tl


def _jit(fn):
    """triton.jit with no value specialization of the int arguments: Triton would compile a
    variant for ints equal to 1 and the launcher's cache key does not carry int values."""
    import inspect
    ns = [p for p, v in inspect.signature(fn).parameters.items()
          if not p.endswith("_ptr") and "constexpr" not in str(v.annotation)]
    return triton.jit(do_not_specialize=ns)(fn)


@triton.jit
def _coords(offs, s1, s2, s3, s4, s5, NDIM: tl.constexpr):
    # only the last NDIM coordinates vary (the rest are 0): 64-bit division is slow on GPUs
    z = offs * 0
    c0, c1, c2, c3, c4, c5 = z, z, z, z, z, offs
    if NDIM >= 2:
        c5 = offs % s5
        r = offs // s5
        c4 = r
        if NDIM >= 3:
            c4 = r % s4
            r = r // s4
            c3 = r
            if NDIM >= 4:
                c3 = r % s3
                r = r // s3
                c2 = r
                if NDIM >= 5:
                    c2 = r % s2
                    r = r // s2
                    c1 = r
                    if NDIM >= 6:
                        c1 = r % s1
                        c0 = r // s1
    return c0, c1, c2, c3, c4, c5


@triton.jit
def _positions(BLOCK: tl.constexpr, I64: tl.constexpr):
    # this program's block of flat positions: int32 arithmetic unless some offset needs 64 bits
    if I64:
        return tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    else:
        return tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)


@triton.jit
def _dot(c0, c1, c2, c3, c4, c5, t0, t1, t2, t3, t4, t5):
    return c0 * t0 + c1 * t1 + c2 * t2 + c3 * t3 + c4 * t4 + c5 * t5


@_jit
def gather_nd(out_ptr, src_ptr, idx_ptr, n, s1, s2, s3, s4, s5,
              a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5, SCALE, NSIZE, LIMIT,
              WRAP: tl.constexpr, NDIM: tl.constexpr, I64: tl.constexpr,
              BLOCK: tl.constexpr):
    # out (contiguous, the iteration shape)[c] = src[c . a + idx[c . b] * SCALE]
    offs = _positions(BLOCK, I64)
    m = offs < n
    c0, c1, c2, c3, c4, c5 = _coords(offs, s1, s2, s3, s4, s5, NDIM)
    iv = tl.load(idx_ptr + _dot(c0, c1, c2, c3, c4, c5, b0, b1, b2, b3, b4, b5), mask=m,
                 other=0).to(tl.int64)
    if WRAP:
        iv = tl.where(iv < 0, iv + NSIZE, iv)
    at = _dot(c0, c1, c2, c3, c4, c5, a0, a1, a2, a3, a4, a5) + iv * SCALE
    ok = m & (at >= 0) & (at < LIMIT)
    v = tl.load(src_ptr + at, mask=ok, other=0)
    tl.store(out_ptr + offs, v, mask=m)


@_jit
def scatter_nd(dst_ptr, src_ptr, idx_ptr, n, s1, s2, s3, s4, s5,
               a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5, d0, d1, d2, d3, d4, d5,
               SCALE, NSIZE, LIMIT, ACCUM: tl.constexpr, WRAP: tl.constexpr,
               NDIM: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr):
    # dst[c . a + idx[c . b] * SCALE] = (or +=) src[c . d] over the iteration shape
    offs = _positions(BLOCK, I64)
    m = offs < n
    c0, c1, c2, c3, c4, c5 = _coords(offs, s1, s2, s3, s4, s5, NDIM)
    iv = tl.load(idx_ptr + _dot(c0, c1, c2, c3, c4, c5, b0, b1, b2, b3, b4, b5), mask=m,
                 other=0).to(tl.int64)
    if WRAP:
        iv = tl.where(iv < 0, iv + NSIZE, iv)
    at = _dot(c0, c1, c2, c3, c4, c5, a0, a1, a2, a3, a4, a5) + iv * SCALE
    ok = m & (at >= 0) & (at < LIMIT)
    v = tl.load(src_ptr + _dot(c0, c1, c2, c3, c4, c5, d0, d1, d2, d3, d4, d5), mask=m,
                other=0).to(dst_ptr.dtype.element_ty)
    if ACCUM:
        tl.atomic_add(dst_ptr + at, v, mask=ok)
    else:
        tl.store(dst_ptr + at, v, mask=ok)


@_jit
def linear_offsets(off_ptr, idx_ptr, mm_ptr, n, s1, s2, s3, s4, s5, b0, b1, b2, b3, b4, b5,
                   SCALE, NSIZE, FIRST: tl.constexpr, NDIM: tl.constexpr,
                   I64: tl.constexpr, BLOCK: tl.constexpr):
    # off (contiguous) [c] (+)= wrap(idx[c . b]) * SCALE, and idx's min/max into mm[0], mm[1]
    # (the host checks them: one read for all index tensors of an op). Each program walks a
    # grid-strided range so the two same-address atomics happen once a program, few programs.
    big = 9223372036854775807
    lo = tl.full([BLOCK], big, tl.int64)
    hi = tl.full([BLOCK], -big - 1, tl.int64)
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    for base in range(tl.program_id(0).to(tl.int64) * BLOCK, n, step):
        offs = base + tl.arange(0, BLOCK)
        if not I64:
            offs = offs.to(tl.int32)
        m = offs < n
        c0, c1, c2, c3, c4, c5 = _coords(offs, s1, s2, s3, s4, s5, NDIM)
        iv = tl.load(idx_ptr + _dot(c0, c1, c2, c3, c4, c5, b0, b1, b2, b3, b4, b5), mask=m,
                     other=0).to(tl.int64)
        lo = tl.minimum(lo, tl.where(m, iv, big))
        hi = tl.maximum(hi, tl.where(m, iv, -big - 1))
        w = tl.where(iv < 0, iv + NSIZE, iv) * SCALE
        if not FIRST:
            w += tl.load(off_ptr + offs, mask=m, other=0)
        tl.store(off_ptr + offs, w, mask=m)
    tl.atomic_min(mm_ptr, tl.min(lo, axis=0))
    tl.atomic_max(mm_ptr + 1, tl.max(hi, axis=0))


@_jit
def minmax(x_ptr, mm_ptr, n, BLOCK: tl.constexpr):
    # mm[0] = min(mm[0], min x), mm[1] = max(mm[1], max x), x contiguous integers; a
    # grid-strided loop: one pair of same-address atomics per program
    big = 9223372036854775807
    lo = tl.full([BLOCK], big, tl.int64)
    hi = tl.full([BLOCK], -big - 1, tl.int64)
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    for base in range(tl.program_id(0).to(tl.int64) * BLOCK, n, step):
        offs = base + tl.arange(0, BLOCK)
        m = offs < n
        v = tl.load(x_ptr + offs, mask=m, other=0).to(tl.int64)
        lo = tl.minimum(lo, tl.where(m, v, big))
        hi = tl.maximum(hi, tl.where(m, v, -big - 1))
    tl.atomic_min(mm_ptr, tl.min(lo, axis=0))
    tl.atomic_max(mm_ptr + 1, tl.max(hi, axis=0))


@_jit
def count_nonzero_blocks(x_ptr, cnt_ptr, n, s1, s2, s3, s4, s5, a0, a1, a2, a3, a4, a5,
                         NDIM: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr):
    # cnt[program] = how many x[c . a] are nonzero in this program's block of positions
    offs = _positions(BLOCK, I64)
    m = offs < n
    c0, c1, c2, c3, c4, c5 = _coords(offs, s1, s2, s3, s4, s5, NDIM)
    v = tl.load(x_ptr + _dot(c0, c1, c2, c3, c4, c5, a0, a1, a2, a3, a4, a5), mask=m, other=0)
    f = (m & (v != 0)).to(tl.int64)
    tl.store(cnt_ptr + tl.program_id(0), tl.sum(f, axis=0))


@_jit
def exclusive_scan(cnt_ptr, nb, total_ptr, BLOCK: tl.constexpr):
    # one program: cnt[i] = sum(cnt[:i]) in place, total[0] = sum(cnt)
    carry = tl.zeros([], tl.int64)
    cols = tl.arange(0, BLOCK)
    for start in range(0, nb, BLOCK):
        m = start + cols < nb
        c = tl.load(cnt_ptr + start + cols, mask=m, other=0)
        inc = tl.cumsum(c, axis=0)
        tl.store(cnt_ptr + start + cols, carry + inc - c, mask=m)
        carry += tl.sum(c, axis=0)
    tl.store(total_ptr, carry)


@_jit
def compact(out_ptr, x_ptr, val_ptr, start_ptr, n, s1, s2, s3, s4, s5,
            a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5, LIMIT,
            MODE: tl.constexpr, NDIM: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr):
    # the k-th position c (in order) with x[c . a] != 0, at k = start[program] + rank in block:
    # MODE 0 (nonzero): out[k, :] = c's last NDIM coordinates
    # MODE 1 (masked_select): out[k] = val[c . b]
    # MODE 2 (masked_scatter): out[c . b] = val[k] (k < LIMIT: the source's size)
    offs = _positions(BLOCK, I64)
    m = offs < n
    c0, c1, c2, c3, c4, c5 = _coords(offs, s1, s2, s3, s4, s5, NDIM)
    v = tl.load(x_ptr + _dot(c0, c1, c2, c3, c4, c5, a0, a1, a2, a3, a4, a5), mask=m, other=0)
    f = (m & (v != 0)).to(tl.int64)
    k = tl.load(start_ptr + tl.program_id(0)) + tl.cumsum(f, axis=0) - f
    hit = f != 0
    if MODE == 0:
        row = out_ptr + k * NDIM
        if NDIM >= 6:
            tl.store(row + (NDIM - 6), c0, mask=hit)
        if NDIM >= 5:
            tl.store(row + (NDIM - 5), c1, mask=hit)
        if NDIM >= 4:
            tl.store(row + (NDIM - 4), c2, mask=hit)
        if NDIM >= 3:
            tl.store(row + (NDIM - 3), c3, mask=hit)
        if NDIM >= 2:
            tl.store(row + (NDIM - 2), c4, mask=hit)
        if NDIM >= 1:
            tl.store(row + (NDIM - 1), c5, mask=hit)
    elif MODE == 1:
        at = _dot(c0, c1, c2, c3, c4, c5, b0, b1, b2, b3, b4, b5)
        tl.store(out_ptr + k, tl.load(val_ptr + at, mask=hit), mask=hit)
    else:
        at = _dot(c0, c1, c2, c3, c4, c5, b0, b1, b2, b3, b4, b5)
        ok = hit & (k < LIMIT)
        tl.store(out_ptr + at, tl.load(val_ptr + k, mask=ok), mask=ok)


@_jit
def one_hot(x_ptr, out_ptr, n, C, BLOCK: tl.constexpr):
    # out (n, C) int64 = x[i] == j
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n * C
    i = offs // C
    j = offs % C
    v = tl.load(x_ptr + i, mask=m, other=-1)
    tl.store(out_ptr + offs, (v == j).to(tl.int64), mask=m)
