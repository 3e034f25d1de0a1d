"""Hand-written Triton kernels over contiguous rows: reductions, softmax, log_softmax.

Callers move the reduced dims last and make the input contiguous (one copy kernel), so each
kernel sees an (R, C) row-major matrix and one program reduces one row, accumulating in float32
(float64 for float64, int64 for integers, as PyTorch's CUDA reductions).
Imported only when a kernel is first needed (triton is optional at import).
"""
from __future__ import annotations

import triton
import triton.language as tl


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


@triton.jit(do_not_specialize=["n", "start", "step"])
def arange_fill(out_ptr, n, start, step, HALF: tl.constexpr, BLOCK: tl.constexpr):
    # integer start/step (arange(T), the common case): exact in int64, then cast (16-bit
    # floats through float32, which holds every value they can)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    v = start + offs * step
    if HALF:
        v = v.to(tl.float32)
    tl.store(out_ptr + offs, v.to(out_ptr.dtype.element_ty), mask=offs < n)


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
