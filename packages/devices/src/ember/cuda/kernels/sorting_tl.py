"""Triton kernels for `sorting`: row sorts (packed keys, rank sort) and selection.

Callers lay the data out as contiguous rows (R, C), sorted dim last. Low-precision floats
accumulate in float32, integers in int64 (the ACC constexpr).
Imported only when a kernel is first needed (triton is optional at import).
"""
from __future__ import annotations

import triton
import triton.language as tl

from .reduction_tl import _isnan


# ---- sorting ----------------------------------------------------------------------------------
@triton.jit(do_not_specialize=["C", "OUTN", "CH"])
def row_sort_packed(x_ptr, val_ptr, idx_ptr, C, OUTN, CH, in_idx_ptr, DESC: tl.constexpr,
                    FLOAT: tl.constexpr, HAS_IDX: tl.constexpr, BLOCK: tl.constexpr):
    # stable sort of a row of <= 32-bit values (C <= BLOCK): each element becomes the int64
    # (order-preserving 32-bit key << 32 | index), one tl.sort of the padded block, then the
    # values are gathered by index. NaN sorts largest, -0.0 equals 0.0 (PyTorch's order).
    # Writes the first OUTN of the sorted row (topk). Program (row, c) sorts the chunk
    # [c * CH, (c + 1) * CH) of the row (CH <= BLOCK) into output row row * num_programs(1) + c
    # (topk's first stage on long rows); HAS_IDX: the row's elements carry the indices in_idx
    # (topk's second stage), which are written instead of their positions.
    row = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1).to(tl.int64)
    orow = row * tl.num_programs(1) + c
    lo = c * CH
    base = x_ptr + row * C + lo
    cols = tl.arange(0, BLOCK)
    m = (cols < CH) & (lo + cols < C)
    v = tl.load(base + cols, mask=m, other=0)
    if FLOAT:
        f = v.to(tl.float32)
        f = tl.where(f == 0, 0.0, f)
        bits = f.to(tl.int32, bitcast=True)
        bits = tl.where(f != f, 0x7FC00000, bits)
        key = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
    else:
        key = v.to(tl.int32)
    if DESC:
        key = ~key
    packed = (key.to(tl.int64) << 32) | cols.to(tl.int64)
    packed = tl.where(m, packed, 0x7FFFFFFFFFFFFFFF)
    s = tl.sort(packed, 0)
    idx = s & tl.full([BLOCK], 0xFFFFFFFF, tl.int64)
    om = (cols < OUTN) & (idx < CH) & (lo + idx < C)
    vals = tl.load(base + idx, mask=om)
    if HAS_IDX:
        gidx = tl.load(in_idx_ptr + row * C + lo + idx, mask=om)
    else:
        gidx = lo + idx
    tl.store(val_ptr + orow * OUTN + cols, vals, mask=om)
    tl.store(idx_ptr + orow * OUTN + cols, gidx, mask=om)


@triton.jit(do_not_specialize=["C", "OUTN"])
def row_sort_rank(x_ptr, val_ptr, idx_ptr, C, OUTN, DESC: tl.constexpr, ACC: tl.constexpr,
                  BI: tl.constexpr, BJ: tl.constexpr):
    # stable sort of any dtype by ranks: program (row, block of BI elements) counts, for each of
    # its elements, the row's elements ordered before it (and the equal ones at lower indices),
    # then writes it to that position (if < OUTN). O(C^2) compares a row: for rows that tl.sort's
    # packed key cannot hold (64-bit values) or that exceed its block.
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * C
    ii = tl.program_id(1) * BI + tl.arange(0, BI)
    im = ii < C
    xi = tl.load(base + ii, mask=im, other=0)
    ai = xi.to(ACC)
    ni = _isnan(ai)
    rank = tl.zeros([BI], tl.int64)
    jj0 = tl.arange(0, BJ)
    for start in range(0, C, BJ):
        jj = start + jj0
        jm = jj < C
        aj = tl.load(base + jj, mask=jm, other=0).to(ACC)
        nj = _isnan(aj)
        a = ai[:, None]
        b = aj[None, :]
        na = ni[:, None]
        nb = nj[None, :]
        if DESC:
            before = (b > a) | (nb & ~na)
        else:
            before = (b < a) | (na & ~nb)
        eq = (b == a) | (na & nb)
        hit = before | (eq & (jj[None, :] < ii[:, None]))
        hit = hit & jm[None, :]
        rank += tl.sum(hit.to(tl.int64), axis=1)
    om = im & (rank < OUTN)
    tl.store(val_ptr + row * OUTN + rank, xi, mask=om)
    tl.store(idx_ptr + row * OUTN + rank, ii.to(tl.int64), mask=om)


@triton.jit(do_not_specialize=["C", "POS"])
def row_pick(sv_ptr, si_ptr, val_ptr, idx_ptr, C, POS, MODE: tl.constexpr, ACC: tl.constexpr,
             BLOCK: tl.constexpr):
    # from ascending sorted rows (NaN last): the element at position POS (MODE 0), the median
    # (MODE 1: the lower median, or the first NaN when there is one), the median of the non-NaN
    # elements (MODE 2, nanmedian)
    row = tl.program_id(0).to(tl.int64)
    if MODE == 0:
        pos = POS.to(tl.int64)
    else:
        cols = tl.arange(0, BLOCK)
        cnt = tl.zeros([BLOCK], tl.int64)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            v = tl.load(sv_ptr + row * C + start + cols, mask=m, other=0).to(ACC)
            cnt += (m & (v == v)).to(tl.int64)
        valid = tl.sum(cnt, axis=0)
        if MODE == 1:
            pos = tl.where(valid < C, valid, (C - 1) // 2)
        else:
            pos = tl.maximum((valid - 1) // 2, 0)
    tl.store(val_ptr + row, tl.load(sv_ptr + row * C + pos))
    tl.store(idx_ptr + row, tl.load(si_ptr + row * C + pos))
