"""Hand-written Triton kernels over contiguous rows: reductions (also with indices and over
columns), scans, softmax, log_softmax.

Callers move the reduced dims last and make the input contiguous (one copy kernel), so each
kernel sees an (R, C) row-major matrix and one program reduces one row, accumulating in float32
(float64 for float64, int64 for integers, as PyTorch's CUDA reductions).
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


@triton.jit(do_not_specialize=["C", "DIVISOR"])
def row_reduce(x_ptr, out_ptr, C, DIVISOR, KIND: tl.constexpr, ACC: tl.constexpr,
               SCALE_MEAN: tl.constexpr, BLOCK: tl.constexpr):
    # KIND 0 sum, 1 max, 2 min, 3 argmax, 4 argmin
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * C
    cols = tl.arange(0, BLOCK)
    if KIND == 0:
        acc = tl.zeros([BLOCK], ACC)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            acc += tl.load(base + start + cols, mask=m, other=0).to(ACC)
        r = tl.sum(acc, axis=0)
        if SCALE_MEAN:
            r = r / DIVISOR
        tl.store(out_ptr + row, r)
    elif KIND == 1 or KIND == 2:
        if KIND == 1:
            acc = tl.full([BLOCK], float("-inf"), ACC)
        else:
            acc = tl.full([BLOCK], float("inf"), ACC)
        nan = tl.zeros([BLOCK], tl.int1)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            if KIND == 1:
                v = tl.load(base + start + cols, mask=m, other=float("-inf")).to(ACC)
                acc = tl.maximum(acc, v)
            else:
                v = tl.load(base + start + cols, mask=m, other=float("inf")).to(ACC)
                acc = tl.minimum(acc, v)
            nan = nan | (v != v)
        if KIND == 1:
            r = tl.max(acc, axis=0)
        else:
            r = tl.min(acc, axis=0)
        r = tl.where(tl.max(nan.to(tl.int32), axis=0) > 0, float("nan"), r)
        tl.store(out_ptr + row, r)
    else:
        best = tl.full([BLOCK], float("-inf") if KIND == 3 else float("inf"), ACC)
        bidx = tl.zeros([BLOCK], tl.int64)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            v = tl.load(base + start + cols, mask=m, other=0).to(ACC)
            v = tl.where(m, v, float("-inf") if KIND == 3 else float("inf"))
            isn = v != v
            if KIND == 3:
                take = ((v > best) | isn) & (best == best)
            else:
                take = ((v < best) | isn) & (best == best)
            best = tl.where(take, v, best)
            bidx = tl.where(take, start + cols, bidx)
        # first index of the best (NaN counts as the extreme, as PyTorch)
        anynan = tl.max((best != best).to(tl.int32), axis=0) > 0
        if KIND == 3:
            top = tl.max(tl.where(best != best, float("-inf"), best), axis=0)
        else:
            top = tl.min(tl.where(best != best, float("inf"), best), axis=0)
        hit = tl.where(anynan, best != best, best == top)
        big = tl.full([BLOCK], 2**62, tl.int64)
        r = tl.min(tl.where(hit, bidx, big), axis=0)
        tl.store(out_ptr + row, r)


@triton.jit(do_not_specialize=["C"])
def row_softmax(x_ptr, out_ptr, C, LOG: tl.constexpr, BLOCK: tl.constexpr,
                ONE: tl.constexpr = False):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * C
    obase = out_ptr + row * C
    cols = tl.arange(0, BLOCK)
    if ONE:  # the row fits one tile: one read, one write (attention rows)
        m = cols < C
        v = tl.load(base + cols, mask=m, other=float("-inf")).to(tl.float32)
        rmax = tl.max(v, axis=0)
        e = tl.where(m, tl.exp(v - rmax), 0.0)
        tot = tl.sum(e, axis=0)
        if LOG:
            r = v - rmax - tl.log(tot)
        else:
            r = e / tot
        tl.store(obase + cols, r.to(out_ptr.dtype.element_ty), mask=m)
    else:
        mx = tl.full([BLOCK], float("-inf"), tl.float32)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            mx = tl.maximum(mx, tl.load(base + start + cols, mask=m, other=float("-inf"))
                            .to(tl.float32))
        rmax = tl.max(mx, axis=0)
        s = tl.zeros([BLOCK], tl.float32)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            v = tl.load(base + start + cols, mask=m, other=float("-inf")).to(tl.float32)
            s += tl.where(m, tl.exp(v - rmax), 0.0)
        tot = tl.sum(s, axis=0)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            v = tl.load(base + start + cols, mask=m, other=0).to(tl.float32)
            if LOG:
                r = v - rmax - tl.log(tot)
            else:
                r = tl.exp(v - rmax) / tot
            tl.store(obase + start + cols, r.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["C"])
def row_softmax_backward(g_ptr, y_ptr, out_ptr, C, LOG: tl.constexpr, BLOCK: tl.constexpr,
                         ONE: tl.constexpr = False):
    """One row of _softmax_backward_data, y * (g - sum(g * y)), or of
    _log_softmax_backward_data, g - exp(y) * sum(g): the sum, then the pointwise pass."""
    row = tl.program_id(0).to(tl.int64)
    gb, yb, ob = g_ptr + row * C, y_ptr + row * C, out_ptr + row * C
    cols = tl.arange(0, BLOCK)
    if ONE:  # the row fits one tile: each element read once
        m = cols < C
        g = tl.load(gb + cols, mask=m, other=0).to(tl.float32)
        y = tl.load(yb + cols, mask=m, other=0).to(tl.float32)
        if LOG:
            r = g - tl.exp(y) * tl.sum(g, axis=0)
        else:
            r = y * (g - tl.sum(g * y, axis=0))
        tl.store(ob + cols, r.to(out_ptr.dtype.element_ty), mask=m)
    else:
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            g = tl.load(gb + start + cols, mask=m, other=0).to(tl.float32)
            if LOG:
                acc += g
            else:
                acc += g * tl.load(yb + start + cols, mask=m, other=0).to(tl.float32)
        tot = tl.sum(acc, axis=0)
        for start in range(0, C, BLOCK):
            m = start + cols < C
            g = tl.load(gb + start + cols, mask=m, other=0).to(tl.float32)
            y = tl.load(yb + start + cols, mask=m, other=0).to(tl.float32)
            if LOG:
                r = g - tl.exp(y) * tot
            else:
                r = y * (g - tot)
            tl.store(ob + start + cols, r.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["C", "CHUNK"])
def row_partial(x_ptr, out_ptr, C, CHUNK, KIND: tl.constexpr, ACC: tl.constexpr,
                BLOCK: tl.constexpr):
    # first stage of a long-row reduction: program (r, p) reduces row r's chunk p
    # (KIND 0 sum, 1 max, 2 min; NaN propagates through max/min)
    row = tl.program_id(0).to(tl.int64)
    p = tl.program_id(1)
    P = tl.num_programs(1)
    base = x_ptr + row * C
    cols = tl.arange(0, BLOCK)
    lo = p.to(tl.int64) * CHUNK
    if KIND == 0:
        acc = tl.zeros([BLOCK], ACC)
        for start in range(0, CHUNK, BLOCK):
            idx = lo + start + cols
            m = (idx < C) & (start + cols < CHUNK)
            acc += tl.load(base + idx, mask=m, other=0).to(ACC)
        r = tl.sum(acc, axis=0)
    else:
        fill = float("-inf") if KIND == 1 else float("inf")
        acc = tl.full([BLOCK], fill, ACC)
        nan = tl.zeros([BLOCK], tl.int1)
        for start in range(0, CHUNK, BLOCK):
            idx = lo + start + cols
            m = (idx < C) & (start + cols < CHUNK)
            v = tl.load(base + idx, mask=m, other=fill).to(ACC)
            if KIND == 1:
                acc = tl.maximum(acc, v)
            else:
                acc = tl.minimum(acc, v)
            nan = nan | (v != v)
        if KIND == 1:
            r = tl.max(acc, axis=0)
        else:
            r = tl.min(acc, axis=0)
        r = tl.where(tl.max(nan.to(tl.int32), axis=0) > 0, float("nan"), r)
    tl.store(out_ptr + row * P + p, r)


@triton.jit(do_not_specialize=["R", "C", "RPER", "DIVISOR"])
def col_reduce(x_ptr, out_ptr, R, C, RPER, DIVISOR, ACC: tl.constexpr, SCALE_MEAN: tl.constexpr,
               BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # sum over the leading dims of a contiguous (R, C) tensor, coalesced along C: program
    # (column block, p) sums rows [p * RPER, (p + 1) * RPER) into out[p, cols] (a second launch
    # with one p sums the partials), instead of a transposing copy and a row reduction
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    p = tl.program_id(1).to(tl.int64)
    cm = cols < C
    rows = tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_R, BLOCK_C], ACC)
    for start in range(0, RPER, BLOCK_R):
        r = p * RPER + start + rows
        m = ((r < R) & (start + rows < RPER))[:, None] & cm[None, :]
        acc += tl.load(x_ptr + r[:, None] * C + cols[None, :], mask=m, other=0).to(ACC)
    s = tl.sum(acc, axis=0)
    if SCALE_MEAN:
        s = s / DIVISOR
    tl.store(out_ptr + p * C + cols, s.to(out_ptr.dtype.element_ty), mask=cm)


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
