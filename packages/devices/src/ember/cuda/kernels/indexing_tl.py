"""Triton kernels for indexing, gather/scatter and masks (the indexing, scatter, nn, joining,
pool and sorting modules drive them).

Tensors of up to 6 dims are addressed through their strides: a flat position in the iteration
shape (padded in front to 6 dims with size 1) becomes coordinates, and each operand's offset is
coordinates . strides (a stride 0 broadcasts). Every gathered or scattered address is checked
against the span of its storage, so a bad index can never touch memory outside it (the host
checks the bounds too, to raise PyTorch's error). Imported only when first needed.
"""
from __future__ import annotations

import triton
import triton.language as tl

from .common_tl import lanes, positions


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
def _dot(c0, c1, c2, c3, c4, c5, t0, t1, t2, t3, t4, t5):
    return c0 * t0 + c1 * t1 + c2 * t2 + c3 * t3 + c4 * t4 + c5 * t5


@_jit
def gather_nd(out_ptr, src_ptr, idx_ptr, n, s1, s2, s3, s4, s5,
              a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5, SCALE, NSIZE, LIMIT,
              WRAP: tl.constexpr, NDIM: tl.constexpr, I64: tl.constexpr,
              BLOCK: tl.constexpr):
    # out (contiguous, the iteration shape)[c] = src[c . a + idx[c . b] * SCALE]
    offs = positions(BLOCK, I64)
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
    offs = positions(BLOCK, I64)
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
    offs = positions(BLOCK, I64)
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
    offs = positions(BLOCK, I64)
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
    offs, m = lanes(n * C, BLOCK)
    i = offs // C
    j = offs % C
    v = tl.load(x_ptr + i, mask=m, other=-1)
    tl.store(out_ptr + offs, (v == j).to(tl.int64), mask=m)


@_jit
def scatter_reduce_nd(dst_ptr, src_ptr, idx_ptr, n, s1, s2, s3, s4, s5,
                      a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5, d0, d1, d2, d3, d4, d5,
                      SCALE, NSIZE, LIMIT, OP: tl.constexpr, IT: tl.constexpr,
                      NDIM: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr):
    # dst[c . a + idx[c . b] * SCALE] (op)= src[c . d]: OP 1 max, 2 min (atomics), 3 prod (a
    # compare-and-swap loop on the bits, IT the same-width integer type; dst is float32/64 or
    # int32/64)
    offs = positions(BLOCK, I64)
    m = offs < n
    c0, c1, c2, c3, c4, c5 = _coords(offs, s1, s2, s3, s4, s5, NDIM)
    iv = tl.load(idx_ptr + _dot(c0, c1, c2, c3, c4, c5, b0, b1, b2, b3, b4, b5), mask=m,
                 other=0).to(tl.int64)
    iv = tl.where(iv < 0, iv + NSIZE, iv)
    at = _dot(c0, c1, c2, c3, c4, c5, a0, a1, a2, a3, a4, a5) + iv * SCALE
    ok = m & (at >= 0) & (at < LIMIT)
    v = tl.load(src_ptr + _dot(c0, c1, c2, c3, c4, c5, d0, d1, d2, d3, d4, d5), mask=m,
                other=0).to(dst_ptr.dtype.element_ty)
    if OP == 1:
        tl.atomic_max(dst_ptr + at, v, mask=ok)
    elif OP == 2:
        tl.atomic_min(dst_ptr + at, v, mask=ok)
    else:
        # lanes that are done (or masked) compare-and-swap their own last seen value with
        # itself at a valid address: a no-op whatever the memory holds
        p = dst_ptr + tl.where(ok, at, 0)
        ip = p.to(tl.pointer_type(IT), bitcast=True)
        cur = tl.load(p, mask=ok, other=0)
        todo = ok
        while tl.max(todo.to(tl.int32), axis=0) > 0:
            cb = cur.to(IT, bitcast=True)
            nb = tl.where(todo, (cur * v).to(IT, bitcast=True), cb)
            old = tl.atomic_cas(ip, cb, nb)
            todo = todo & (old != cb)
            cur = old.to(dst_ptr.dtype.element_ty, bitcast=True)


@_jit
def bincount(x_ptr, w_ptr, out_ptr, n, LIMIT, HAS_W: tl.constexpr, BLOCK: tl.constexpr):
    # out[x[i]] += w[i] (or 1); x contiguous, in [0, LIMIT) (checked by the host)
    offs, m = lanes(n, BLOCK)
    x = tl.load(x_ptr + offs, mask=m, other=0).to(tl.int64)
    ok = m & (x >= 0) & (x < LIMIT)
    if HAS_W:
        w = tl.load(w_ptr + offs, mask=m, other=0).to(out_ptr.dtype.element_ty)
    else:
        w = tl.full([BLOCK], 1, out_ptr.dtype.element_ty)
    tl.atomic_add(out_ptr + x, w, mask=ok)


@_jit
def histc(x_ptr, lohi_ptr, cnt_ptr, n, BINS, BLOCK: tl.constexpr):
    # cnt (int64) [bin of x[i]] += 1 for lo <= x[i] <= hi, in lohi's dtype (the CPU's opmath):
    # bin = int((x - lo) * bins / (hi - lo)), the last bin holding hi
    offs, m = lanes(n, BLOCK)
    lo = tl.load(lohi_ptr)
    hi = tl.load(lohi_ptr + 1)
    a = tl.load(x_ptr + offs, mask=m, other=0).to(lo.dtype)
    inr = m & (a >= lo) & (a <= hi)
    nb = tl.full([BLOCK], BINS, tl.int64).to(lo.dtype)
    pos = ((a - lo) * nb / (hi - lo)).to(tl.int64)
    pos = tl.minimum(tl.maximum(pos, 0), BINS - 1)
    tl.atomic_add(cnt_ptr + pos, tl.full([BLOCK], 1, tl.int64), mask=inr)


@_jit
def search(seq_ptr, sorter_ptr, val_ptr, out_ptr, n, INNER, L, SEQ_ROW, STEPS, ADD,
           RIGHT: tl.constexpr, HAS_SORTER: tl.constexpr, IOTA: tl.constexpr,
           BLOCK: tl.constexpr):
    # out[i] = ADD + the insertion point of v = val[i] (IOTA: v = i) in row i // INNER of seq
    # (rows SEQ_ROW apart, L long; through sorter when given): a binary search of STEPS steps.
    # NaN sorts last, as numpy's searchsorted.
    offs, m = lanes(n, BLOCK)
    if IOTA:
        v = offs
    else:
        v = tl.load(val_ptr + offs, mask=m, other=0)
    base = (offs // INNER) * SEQ_ROW
    lo = tl.zeros([BLOCK], tl.int64)
    hi = lo + L
    for _ in range(STEPS):
        act = m & (lo < hi)
        mid = (lo + hi) // 2
        p = base + mid
        if HAS_SORTER:
            p = base + tl.load(sorter_ptr + p, mask=act, other=0).to(tl.int64)
        s = tl.load(seq_ptr + p, mask=act, other=0)
        if RIGHT:
            go = ((v < s) | ((s != s) & (v == v))) == 0
        else:
            go = (s < v) | ((v != v) & (s == s))
        lo = tl.where(act & go, mid + 1, lo)
        hi = tl.where(act & (go == 0), mid, hi)
    tl.store(out_ptr + offs, (lo + ADD).to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def _pad_src(i, n, MODE: tl.constexpr):
    # the source index of padded position i (already shifted by the low pad) in a dim of n
    if MODE == 0:      # reflect
        period = 2 * (n - 1)
        r = tl.abs(i) % tl.maximum(period, 1)
        r = tl.where(r >= n, period - r, r)
        r = tl.where(period > 0, r, 0)
    elif MODE == 1:    # replicate
        r = tl.minimum(tl.maximum(i, 0), n - 1)
    else:              # circular
        r = ((i % n) + n) % n
    return r


@_jit
def pad_index(x_ptr, out_ptr, total, N1, N2, N3, O1, O2, O3, L1, L2, L3,
              MODE: tl.constexpr, BACKWARD: tl.constexpr, BLOCK: tl.constexpr):
    # x contiguous (M, N1, N2, N3), out contiguous (M, O1, O2, O3); each output position reads
    # x at its source position; BACKWARD: x is the output grad (M, O...) and out the input
    # grad (M, N...), accumulated with atomics
    offs, m = lanes(total, BLOCK)
    o3 = offs % O3
    r = offs // O3
    o2 = r % O2
    r = r // O2
    o1 = r % O1
    mm = r // O1
    i1 = _pad_src(o1 - L1, N1, MODE)
    i2 = _pad_src(o2 - L2, N2, MODE)
    i3 = _pad_src(o3 - L3, N3, MODE)
    src = ((mm * N1 + i1) * N2 + i2) * N3 + i3
    if BACKWARD:
        g = tl.load(x_ptr + offs, mask=m, other=0).to(out_ptr.dtype.element_ty)
        tl.atomic_add(out_ptr + src, g, mask=m)
    else:
        tl.store(out_ptr + offs, tl.load(x_ptr + src, mask=m), mask=m)


@_jit
def embedding_bag(w_ptr, idx_ptr, off_ptr, psw_ptr, out_ptr, bag_ptr, cnt_ptr, maxi_ptr,
                  D, NIDX, NOFF, PAD, MODE: tl.constexpr, HAS_PSW: tl.constexpr,
                  LAST: tl.constexpr, BLOCK: tl.constexpr):
    # one program per (bag, block of columns): the bag's indices [off[b], end) in order; rows
    # other than PAD sum (times psw), mean or max (first position of the max: maxi). The first
    # column block also writes the bag id of its positions and the bag's count.
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    cm = cols < D
    start = tl.load(off_ptr + b).to(tl.int64)
    if LAST:
        end = tl.load(off_ptr + b + 1).to(tl.int64)
    else:
        end = tl.where(b + 1 < NOFF, tl.load(off_ptr + tl.minimum(b + 1, NOFF - 1)).to(tl.int64),
                       NIDX)
    start = tl.minimum(tl.maximum(start, 0), NIDX)
    end = tl.minimum(tl.maximum(end, start), NIDX)
    acc = tl.zeros([BLOCK], out_ptr.dtype.element_ty)
    best = tl.full([BLOCK], -1, tl.int64)
    cnt = tl.zeros([], tl.int64)
    first = tl.program_id(1) == 0
    for k in range(start, end):
        i = tl.load(idx_ptr + k).to(tl.int64)
        valid = i != PAD
        vm = cols < tl.where(valid, D, 0)   # the row's columns, none for the padding index
        row = tl.load(w_ptr + i * D + cols, mask=vm, other=0).to(acc.dtype)
        if HAS_PSW:
            row = row * tl.load(psw_ptr + k).to(acc.dtype)
        if MODE == 2:
            take = vm & ((best < 0) | (row > acc))
            acc = tl.where(take, row, acc)
            best = tl.where(take, i, best)
        else:
            acc += row
        cnt += tl.where(valid, 1, 0).to(tl.int64)
        tl.store(bag_ptr + k, b, mask=first)
    if MODE == 1:
        acc = acc / tl.maximum(cnt, 1).to(acc.dtype)
    if MODE == 2:
        acc = tl.where(best >= 0, acc, 0)
        tl.store(maxi_ptr + b * D + cols, best, mask=cm)
    tl.store(out_ptr + b * D + cols, acc, mask=cm)
    tl.store(cnt_ptr + b, cnt, mask=first)


@_jit
def embedding_bag_bwd(g_ptr, w_ptr, idx_ptr, bag_ptr, cnt_ptr, psw_ptr, freq_ptr, gw_ptr,
                      gpsw_ptr, D, V, PAD, MEAN: tl.constexpr, HAS_PSW: tl.constexpr,
                      FREQ: tl.constexpr, BLOCK: tl.constexpr):
    # one program per index position k (sum / mean): gw[idx[k], :] += g[bag[k], :] * coef,
    # coef = psw[k] (or 1) / count[bag] (mean) / freq[idx[k]] (scale_grad_by_freq); with psw
    # also gpsw[k] = g[bag[k], :] . w[idx[k], :] (0 for padding or positions in no bag)
    k = tl.program_id(0).to(tl.int64)
    i = tl.load(idx_ptr + k).to(tl.int64)
    b = tl.load(bag_ptr + k).to(tl.int64)
    valid = (i != PAD) & (b >= 0) & (i >= 0) & (i < V)
    bb = tl.maximum(b, 0)
    coef = tl.full([], 1.0, gw_ptr.dtype.element_ty)
    if HAS_PSW:
        coef = coef * tl.load(psw_ptr + k).to(coef.dtype)
    if MEAN:
        coef = coef / tl.maximum(tl.load(cnt_ptr + bb), 1).to(coef.dtype)
    if FREQ:
        coef = coef / tl.maximum(tl.load(freq_ptr + tl.where(valid, i, 0)), 1).to(coef.dtype)
    dot = tl.zeros([BLOCK], gw_ptr.dtype.element_ty)
    for c0 in range(0, D, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        cm = cols < tl.where(valid, D, 0)
        g = tl.load(g_ptr + bb * D + cols, mask=cm, other=0).to(dot.dtype)
        tl.atomic_add(gw_ptr + i * D + cols, g * coef, mask=cm)
        if HAS_PSW:
            dot += g * tl.load(w_ptr + i * D + cols, mask=cm, other=0).to(dot.dtype)
    if HAS_PSW:
        tl.store(gpsw_ptr + k, tl.sum(dot, axis=0).to(gpsw_ptr.dtype.element_ty))


@_jit
def embedding_bag_bwd_max(g_ptr, maxi_ptr, gw_ptr, total, D, V, BLOCK: tl.constexpr):
    # gw[maxi[b, c], c] += g[b, c] where maxi >= 0
    offs, m = lanes(total, BLOCK)
    i = tl.load(maxi_ptr + offs, mask=m, other=-1).to(tl.int64)
    ok = m & (i >= 0) & (i < V)
    g = tl.load(g_ptr + offs, mask=ok, other=0).to(gw_ptr.dtype.element_ty)
    tl.atomic_add(gw_ptr + i * D + offs % D, g, mask=ok)


@_jit
def embedding_renorm(w_ptr, idx_ptr, claim_ptr, D, RS, max_norm, P,
                     NORM: tl.constexpr, BLOCK: tl.constexpr):
    # one program per index position: the first to claim its row (a compare-and-swap on
    # claim[row]) scales the row, in float64, to max_norm / (norm + 1e-7) when its p-norm
    # (NORM 0: p = 2, 1: p = 1, 2: inf, 3: general p > 0) is over max_norm
    k = tl.program_id(0).to(tl.int64)
    r = tl.load(idx_ptr + k).to(tl.int64)
    # (a scalar bool & a block of bools is not a bool block in the interpreter: masks compare
    # the columns against a bound that is 0 when the program has nothing to do)
    lim = tl.where(tl.atomic_cas(claim_ptr + r, 0, 1) == 0, D, 0)
    acc = tl.zeros([BLOCK], tl.float64)
    for c0 in range(0, D, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        cm = cols < lim
        a = tl.abs(tl.load(w_ptr + r * RS + cols, mask=cm, other=0).to(tl.float64))
        if NORM == 0:
            acc += a * a
        elif NORM == 1:
            acc += a
        elif NORM == 2:
            acc = tl.maximum(acc, a)
        else:
            acc += tl.where(a > 0, tl.exp(P * tl.log(tl.where(a > 0, a, 1.0))), 0.0)
    if NORM == 0:
        norm = tl.sqrt(tl.sum(acc, axis=0))
    elif NORM == 1:
        norm = tl.sum(acc, axis=0)
    elif NORM == 2:
        norm = tl.max(acc, axis=0)
    else:
        s = tl.sum(acc, axis=0)
        norm = tl.where(s > 0, tl.exp(tl.log(tl.where(s > 0, s, 1.0)) / P), 0.0)
    mn = max_norm + tl.zeros([], tl.float64)
    scale = tl.where(norm > mn, mn / (norm + 1e-7), 1.0)
    lim = tl.where(norm > mn, lim, 0)
    for c0 in range(0, D, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        cm = cols < lim
        a = tl.load(w_ptr + r * RS + cols, mask=cm, other=0).to(tl.float64)
        tl.store(w_ptr + r * RS + cols, (a * scale).to(w_ptr.dtype.element_ty), mask=cm)
