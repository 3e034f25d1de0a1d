"""Triton kernels for _ops_sort: the remaining row reductions, max/min with indices, scans,
sorting and selection.

Callers lay the data out as contiguous rows (R, C) (reduced or sorted dim last) or, for scans
along a non-last dim, as (outer, n, inner) so that a program walks n with coalesced loads across
inner. Low-precision floats accumulate in float32, integers in int64 (the ACC constexpr).
Imported only when a kernel is first needed (triton is optional at import).
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def _isnan(v):
    return v != v


# ---- reductions over rows ---------------------------------------------------------------------
@triton.jit(do_not_specialize=["C", "DIVISOR", "P"])
def row_reduce2(x_ptr, out_ptr, C, DIVISOR, P, KIND: tl.constexpr, ACC: tl.constexpr,
                SQRT: tl.constexpr, BLOCK: tl.constexpr):
    # one program per row of a contiguous (R, C) matrix. KIND:
    # 0 var (two-pass; / DIVISOR = max(n - correction, 0); SQRT: std), 1 prod, 2 nansum,
    # 3 all, 4 any, 5 count_nonzero, 6 logsumexp,
    # 10 norm p=2, 11 p=1, 12 p=inf, 13 p=-inf, 14 p=0, 15 any other p (runtime P)
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * C
    cols = tl.arange(0, BLOCK)
    if KIND == 0:
        acc = tl.zeros([BLOCK], ACC)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            acc += tl.load(base + start + cols, mask=m, other=0).to(ACC)
        mean = tl.sum(acc, axis=0) / C
        ss = tl.zeros([BLOCK], ACC)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            v = tl.load(base + start + cols, mask=m, other=0).to(ACC)
            d = tl.where(m, v - mean, 0.0)
            ss += d * d
        r = tl.sum(ss, axis=0) / DIVISOR
        if SQRT:
            r = tl.sqrt(r)
    elif KIND == 1:
        acc = tl.full([BLOCK], 1, ACC)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            acc *= tl.load(base + start + cols, mask=m, other=1).to(ACC)
        r = tl.reduce(acc, 0, _mul)
    elif KIND == 2:
        acc = tl.zeros([BLOCK], ACC)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            v = tl.load(base + start + cols, mask=m, other=0).to(ACC)
            acc += tl.where(v != v, 0.0, v)
        r = tl.sum(acc, axis=0)
    elif KIND == 3 or KIND == 4 or KIND == 5:
        if KIND == 3:
            acc = tl.full([BLOCK], 1, tl.int32)
        else:
            acc = tl.zeros([BLOCK], tl.int32)
        cnt = tl.zeros([BLOCK], tl.int64)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            v = tl.load(base + start + cols, mask=m, other=0)
            nz = (v != 0).to(tl.int32)
            if KIND == 3:
                acc = tl.minimum(acc, tl.where(m, nz, 1))
            elif KIND == 4:
                acc = tl.maximum(acc, nz)
            else:
                cnt += nz.to(tl.int64)
        if KIND == 3:
            r = tl.min(acc, axis=0)
        elif KIND == 4:
            r = tl.max(acc, axis=0)
        else:
            r = tl.sum(cnt, axis=0)
    elif KIND == 6:
        mx = tl.full([BLOCK], float("-inf"), ACC)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            mx = tl.maximum(mx, tl.load(base + start + cols, mask=m, other=float("-inf"))
                            .to(ACC))
        mrow = tl.max(mx, axis=0)
        mrow = tl.where((mrow == float("inf")) | (mrow == float("-inf")), 0.0, mrow)
        s = tl.zeros([BLOCK], ACC)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            v = tl.load(base + start + cols, mask=m, other=float("-inf")).to(ACC)
            s += tl.where(m, tl.exp(v - mrow), 0.0)   # exp(NaN) keeps a NaN in the sum
        r = tl.log(tl.sum(s, axis=0)) + mrow
    else:  # vector norms of |x|
        if KIND == 12:
            acc = tl.zeros([BLOCK], ACC)                     # |x| >= 0
        elif KIND == 13:
            acc = tl.full([BLOCK], float("inf"), ACC)
        else:
            acc = tl.zeros([BLOCK], ACC)
        nan = tl.zeros([BLOCK], tl.int32)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            a = tl.abs(tl.load(base + start + cols, mask=m, other=0).to(ACC))
            if KIND == 10:
                acc += a * a
            elif KIND == 11:
                acc += a
            elif KIND == 12:
                acc = tl.maximum(acc, a)
                nan = nan | (a != a).to(tl.int32)
            elif KIND == 13:
                acc = tl.minimum(acc, tl.where(m, a, float("inf")))
                nan = nan | (a != a).to(tl.int32)
            elif KIND == 14:
                acc += (a != 0).to(ACC)
            else:
                acc += tl.where(m, tl.exp(P * tl.log(a)), 0.0)
        if KIND == 12:
            r = tl.where(tl.max(nan, axis=0) > 0, float("nan"), tl.max(acc, axis=0))
        elif KIND == 13:
            r = tl.where(tl.max(nan, axis=0) > 0, float("nan"), tl.min(acc, axis=0))
        elif KIND == 10:
            r = tl.sqrt(tl.sum(acc, axis=0))
        elif KIND == 15:
            r = tl.exp(tl.log(tl.sum(acc, axis=0)) / P)
        else:
            r = tl.sum(acc, axis=0)
    tl.store(out_ptr + row, r.to(out_ptr.dtype.element_ty))


@triton.jit(do_not_specialize=["C"])
def row_extreme(x_ptr, val_ptr, idx_ptr, C, MAX: tl.constexpr, ACC: tl.constexpr,
                BLOCK: tl.constexpr):
    # max.dim / min.dim of a contiguous (R, C) matrix (C >= 1): the value and its first index,
    # a NaN being the extreme (its first index), as PyTorch
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * C
    cols = tl.arange(0, BLOCK)
    first = tl.load(base).to(ACC)
    best = tl.zeros([BLOCK], ACC) + first
    bidx = tl.zeros([BLOCK], tl.int64)
    for start in range(0, C, BLOCK):
        m = start + cols < C
        v = tl.load(base + start + cols, mask=m, other=0).to(ACC)
        if MAX:
            better = v > best
        else:
            better = v < best
        take = m & (better | (_isnan(v) & ~_isnan(best)))
        best = tl.where(take, v, best)
        bidx = tl.where(take, start + cols, bidx)
    anynan = tl.max(_isnan(best).to(tl.int32), axis=0) > 0
    if MAX:
        top = tl.max(tl.where(_isnan(best), first, best), axis=0)
    else:
        top = tl.min(tl.where(_isnan(best), first, best), axis=0)
    hit = tl.where(anynan, _isnan(best), best == top)
    r = tl.min(tl.where(hit, bidx, 2**62), axis=0)
    tl.store(idx_ptr + row, r)
    tl.store(val_ptr + row, tl.load(base + r))


@triton.jit(do_not_specialize=["n", "C"])
def diag_sum(x_ptr, out_ptr, n, C, ACC: tl.constexpr, BLOCK: tl.constexpr):
    # trace of a contiguous (R, C) matrix: sum of x[i, i], i < n = min(R, C)
    cols = tl.arange(0, BLOCK).to(tl.int64)
    acc = tl.zeros([BLOCK], ACC)
    for start in range(0, n, BLOCK):
        i = start + cols
        acc += tl.load(x_ptr + i * (C + 1), mask=i < n, other=0).to(ACC)
    tl.store(out_ptr, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


# ---- scans: 0 cumsum, 1 cumprod, 2 logcumsumexp, 3 cummax, 4 cummin ----------------------------
@triton.jit
def _logaddexp(a, b):
    mx = tl.maximum(a, b)
    mn = tl.minimum(a, b)
    r = mx + tl.log(1.0 + tl.exp(mn - mx))
    r = tl.where((mn == float("-inf")) | (mx == float("inf")), mx, r)
    return tl.where(_isnan(a) | _isnan(b), float("nan"), r)


@triton.jit
def _cummax_comb(av, ai, bv, bi):
    # b comes later: it takes over when NaN, or not below a (ties move to the latest index)
    take = _isnan(bv) | (~_isnan(av) & (bv >= av))
    return tl.where(take, bv, av), tl.where(take, bi, ai)


@triton.jit
def _cummin_comb(av, ai, bv, bi):
    take = _isnan(bv) | (~_isnan(av) & (bv <= av))
    return tl.where(take, bv, av), tl.where(take, bi, ai)


@triton.jit
def _last(s, cols, last):
    # the element of s at position `last`, as a scalar
    return tl.sum(tl.where(cols == last, s, tl.zeros_like(s)), axis=0)


@triton.jit(do_not_specialize=["C"])
def row_scan(x_ptr, out_ptr, idx_ptr, C, KIND: tl.constexpr, ACC: tl.constexpr,
             BLOCK: tl.constexpr):
    # one program per contiguous row; each block is scanned in registers and the previous
    # blocks' result carried in
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * C
    obase = out_ptr + row * C
    cols = tl.arange(0, BLOCK)
    if KIND == 0:
        carry = tl.zeros([BLOCK], ACC)
    elif KIND == 1:
        carry = tl.full([BLOCK], 1, ACC)
    elif KIND == 2:
        carry = tl.full([BLOCK], float("-inf"), ACC)
    else:
        carry = tl.zeros([BLOCK], ACC) + tl.load(base).to(ACC)
    cidx = tl.zeros([BLOCK], tl.int64)
    for start in range(0, C, BLOCK):
        m = start + cols < C
        last = tl.minimum(C - start, BLOCK) - 1
        if KIND == 0:
            v = tl.load(base + start + cols, mask=m, other=0).to(ACC)
            s = tl.cumsum(v, axis=0) + carry
        elif KIND == 1:
            v = tl.load(base + start + cols, mask=m, other=1).to(ACC)
            s = tl.associative_scan(v, 0, _mul) * carry
        elif KIND == 2:
            v = tl.load(base + start + cols, mask=m, other=float("-inf")).to(ACC)
            s = _logaddexp(carry, tl.associative_scan(v, 0, _logaddexp))
        else:
            v = tl.load(base + start + cols, mask=m, other=0).to(ACC)
            ii = (start + cols).to(tl.int64)
            if KIND == 3:
                sv, si = tl.associative_scan((v, ii), 0, _cummax_comb)
                s, si = _cummax_comb(carry, cidx, sv, si)
            else:
                sv, si = tl.associative_scan((v, ii), 0, _cummin_comb)
                s, si = _cummin_comb(carry, cidx, sv, si)
            tl.store(idx_ptr + row * C + start + cols, si, mask=m)
            cidx = tl.zeros([BLOCK], tl.int64) + _last(si, cols, last)
        tl.store(obase + start + cols, s.to(out_ptr.dtype.element_ty), mask=m)
        carry = tl.zeros([BLOCK], ACC) + _last(s, cols, last)


@triton.jit(do_not_specialize=["n", "inner"])
def strided_scan(x_ptr, out_ptr, idx_ptr, n, inner, KIND: tl.constexpr, ACC: tl.constexpr,
                 BLOCK: tl.constexpr):
    # a scan along the middle dim of a contiguous (outer, n, inner): program (o, column block)
    # walks the n rows, its loads coalesced across inner
    o = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    cm = cols < inner
    base = o * n * inner + cols
    if KIND == 0:
        carry = tl.zeros([BLOCK], ACC)
    elif KIND == 1:
        carry = tl.full([BLOCK], 1, ACC)
    elif KIND == 2:
        carry = tl.full([BLOCK], float("-inf"), ACC)
    else:
        carry = tl.load(x_ptr + base, mask=cm, other=0).to(ACC)
    cidx = tl.zeros([BLOCK], tl.int64)
    for i in range(0, n):
        off = base + i * inner
        v = tl.load(x_ptr + off, mask=cm, other=0).to(ACC)
        if KIND == 0:
            carry = carry + v
        elif KIND == 1:
            carry = carry * v
        elif KIND == 2:
            carry = _logaddexp(carry, v)
        else:
            ii = tl.zeros([BLOCK], tl.int64) + i
            if KIND == 3:
                carry, cidx = _cummax_comb(carry, cidx, v, ii)
            else:
                carry, cidx = _cummin_comb(carry, cidx, v, ii)
            tl.store(idx_ptr + off, cidx, mask=cm)
        tl.store(out_ptr + off, carry.to(out_ptr.dtype.element_ty), mask=cm)


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
