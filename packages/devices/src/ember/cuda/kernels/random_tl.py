"""Triton kernels for the random ops: Philox4x32-10 (tl.randint4x / tl.philox), mapped to each
distribution in registers. Imported only when first needed.

Counters: a launch owns counters ctr, ctr + 1, ... (from the generator, see _random). Counter c
gives four 32-bit words and every word is used: program p draws counters p*BLOCK + j (j < BLOCK)
and writes the VPC values of counter c to elements VPC*c .. VPC*c + VPC - 1 (interleaved with
tl.join + tl.reshape, so each thread stores VPC consecutive values). VPC is 4 for 32-bit draws
(float16/bfloat16/float32 samples, integer ranges up to 2**32) and 2 for 64-bit ones (float64
samples, wider integer ranges): a float64 value takes two words, a Box-Muller pair of normals
takes four words (float64) or two (float32), and both normals of a pair are kept.

Scalar parameters arrive as the int64 bit patterns of float64 values (Triton passes Python floats
as fp32; float64 outputs need all their bits).
"""
from __future__ import annotations

import triton
import triton.language as tl

from .common_tl import lanes

# DIST codes (kernels.random uses the same numbers)
UNIFORM, NORMAL, EXPONENTIAL, CAUCHY, LOG_NORMAL, GEOMETRIC = 0, 1, 2, 3, 4, 5
BERNOULLI, GUMBEL_KEY = 6, 8   # GUMBEL_KEY: p / Exp(1) with Exp(1) > 0 (multinomial keys)


@triton.jit
def _f64(bits):
    return bits.to(tl.int64).to(tl.float64, bitcast=True)


@triton.jit
def _narrow(v, ty: tl.constexpr):
    """float64 values to store as ty: through float32 unless ty is float64 (a direct float64 ->
    bfloat16 conversion is wrong in Triton's interpreter)."""
    if ty != tl.float64:
        if v.dtype == tl.float64:
            v = v.to(tl.float32)
    return v.to(ty)


@triton.jit
def _two(a, b, BLOCK: tl.constexpr):
    """(BLOCK,), (BLOCK,) -> (2*BLOCK,): a[j] at 2j, b[j] at 2j + 1."""
    return tl.reshape(tl.join(a, b), (2 * BLOCK,))


@triton.jit
def _four(a, b, c, d, BLOCK: tl.constexpr):
    """Four (BLOCK,) blocks -> (4*BLOCK,): a[j], b[j], c[j], d[j] at 4j .. 4j + 3."""
    return tl.reshape(tl.join(tl.join(a, b), tl.join(c, d)), (4 * BLOCK,))


@triton.jit
def _u01(a, b, F64: tl.constexpr, BITS: tl.constexpr):
    """Uniform [0, 1): k * 2**-BITS (exact in the output dtype: never rounds up to 1)."""
    if F64:
        k = (a.to(tl.uint64) << 21) | (b >> 11).to(tl.uint64)
        u = k.to(tl.float64) * 1.1102230246251565e-16             # 2**-53
    else:
        u = (a >> (32 - BITS)).to(tl.float32) * (1.0 / (1 << BITS))
    return u


@triton.jit
def _u01_open(a, b, F64: tl.constexpr):
    """Uniform (0, 1]: never 0, so its log is finite."""
    if F64:
        k = (a.to(tl.uint64) << 21) | (b >> 11).to(tl.uint64)
        u = (k + 1).to(tl.float64) * 1.1102230246251565e-16
    else:
        u = ((a >> 8) + 1).to(tl.float32) * 5.960464477539063e-08   # 2**-24
    return u


@triton.jit
def _u01_mid(a, b, F64: tl.constexpr):
    """Uniform (0, 1), both ends excluded: (k + 1/2) * 2**-bits."""
    if F64:
        k = (a.to(tl.uint64) << 20) | (b >> 12).to(tl.uint64)
        u = (k.to(tl.float64) + 0.5) * 2.220446049250313e-16      # 2**-52
    else:
        u = ((a >> 9).to(tl.float32) + 0.5) * 1.1920928955078125e-07  # 2**-23
    return u


@triton.jit
def _normals(r0, r1, r2, r3, F64: tl.constexpr, BLOCK: tl.constexpr):
    """Standard normals by Box-Muller, both of each pair kept: (VPC*BLOCK,) values."""
    if F64:
        rad = tl.sqrt(-2.0 * tl.log(_u01_open(r0, r1, F64)))
        th = 6.283185307179586 * _u01(r2, r3, F64, 53)
        z = _two(rad * tl.cos(th), rad * tl.sin(th), BLOCK)
    else:
        rad0 = tl.sqrt(-2.0 * tl.log(_u01_open(r0, r0, F64)))
        th0 = 6.283185307179586 * _u01(r1, r1, F64, 24)
        rad1 = tl.sqrt(-2.0 * tl.log(_u01_open(r2, r2, F64)))
        th1 = 6.283185307179586 * _u01(r3, r3, F64, 24)
        z = _four(rad0 * tl.cos(th0), rad0 * tl.sin(th0), rad1 * tl.cos(th1),
                  rad1 * tl.sin(th1), BLOCK)
    return z


@triton.jit(do_not_specialize=["n", "seed", "ctr", "a", "b"])
def sample(out_ptr, pa_ptr, pb_ptr, n, seed, ctr, a, b, DIST: tl.constexpr,
           F64: tl.constexpr, BITS: tl.constexpr, HAS_A: tl.constexpr, HAS_B: tl.constexpr,
           VPC: tl.constexpr, BLOCK: tl.constexpr):
    """out[i] = a sample of DIST with parameters a, b (float64 bit patterns; or per-element
    from pa/pb when HAS_A/HAS_B) for i < n, contiguous. BLOCK counters a program, each giving
    VPC = 2 (F64) or 4 values."""
    pid = tl.program_id(0).to(tl.int64)
    c = pid * BLOCK + tl.arange(0, BLOCK)
    r0, r1, r2, r3 = tl.randint4x(seed.to(tl.int64), ctr.to(tl.int64) + c, 10)
    i = pid * (VPC * BLOCK) + tl.arange(0, VPC * BLOCK)
    m = i < n
    pa = _f64(a)
    pb = _f64(b)
    if not F64:
        pa = pa.to(tl.float32)
        pb = pb.to(tl.float32)
    if HAS_A:
        pa = tl.load(pa_ptr + i, mask=m, other=0).to(pa.dtype)
    if HAS_B:
        pb = tl.load(pb_ptr + i, mask=m, other=0).to(pb.dtype)
    if DIST == 1 or DIST == 4:
        z = _normals(r0, r1, r2, r3, F64, BLOCK)
        if DIST == 1:    # normal: a + b z
            v = pa + pb * z
        else:            # log-normal: exp(a + b z)
            v = tl.exp(pa + pb * z)
        tl.store(out_ptr + i, v.to(out_ptr.dtype.element_ty), mask=m)
    else:
        if F64:          # value 2j from words (r0, r1) of counter j, 2j + 1 from (r2, r3)
            wa = _two(r0, r2, BLOCK)
            wb = _two(r1, r3, BLOCK)
        else:            # value 4j + k from word k of counter j
            wa = _four(r0, r1, r2, r3, BLOCK)
            wb = wa
        if DIST == 0:    # uniform [a, b): a value rounding up to b becomes a (as PyTorch)
            v = pa + (pb - pa) * _u01(wa, wb, F64, BITS)
            o = v.to(out_ptr.dtype.element_ty)
            o = tl.where(o.to(pb.dtype) >= pb, pa.to(out_ptr.dtype.element_ty), o)
            tl.store(out_ptr + i, o, mask=m)
        else:
            if DIST == 2:    # exponential with rate a
                v = -tl.log(_u01_open(wa, wb, F64)) / pa
            elif DIST == 3:  # cauchy: median a, scale b
                t = 3.141592653589793 * (_u01_mid(wa, wb, F64) - 0.5)
                v = pa + pb * (tl.sin(t) / tl.cos(t))
            elif DIST == 5:  # geometric: a = log1p(-p) (from the host), u in (0, 1): v >= 1
                v = tl.ceil(tl.log(_u01_mid(wa, wb, F64)) / pa)
            elif DIST == 6:  # bernoulli: a = p
                v = (_u01(wa, wb, F64, 24) < pa).to(pa.dtype)
            else:            # gumbel key: a / Exp(1), the Exp(1) draw strictly positive
                v = pa / -tl.log(_u01_mid(wa, wb, F64))
            tl.store(out_ptr + i, _narrow(v, out_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["n", "seed", "ctr", "low", "rng"])
def randint(out_ptr, n, seed, ctr, low, rng, WIDE: tl.constexpr, FULL: tl.constexpr,
            HALF: tl.constexpr, BLOCK: tl.constexpr):
    """out[i] = low + r scaled to [0, rng): r a 32-bit word (4 values a counter) through
    umulhi(r, rng) when rng < 2**32, else (WIDE) a 64-bit word (2 values a counter) mod rng;
    FULL: the raw 64-bit word (random_ over all of int64). rng: the range as a two's-complement
    int64."""
    pid = tl.program_id(0).to(tl.int64)
    c = pid * BLOCK + tl.arange(0, BLOCK)
    r0, r1, r2, r3 = tl.randint4x(seed.to(tl.int64), ctr.to(tl.int64) + c, 10)
    if WIDE:
        i = pid * (2 * BLOCK) + tl.arange(0, 2 * BLOCK)
        r = _two((r0.to(tl.uint64) << 32) | r1.to(tl.uint64),
                 (r2.to(tl.uint64) << 32) | r3.to(tl.uint64), BLOCK)
        if FULL:
            v = r.to(tl.int64, bitcast=True)
        else:
            v = (r % rng.to(tl.int64).to(tl.uint64, bitcast=True)).to(tl.int64) + \
                low.to(tl.int64)
    else:
        i = pid * (4 * BLOCK) + tl.arange(0, 4 * BLOCK)
        r = _four(r0, r1, r2, r3, BLOCK)
        v = tl.umulhi(r, rng.to(tl.int64).to(tl.uint32)).to(tl.int64) + low.to(tl.int64)
    m = i < n
    if HALF:  # float16/bfloat16 through float32 (exact: the values are below 2**mantissa)
        v = v.to(tl.float32)
    tl.store(out_ptr + i, v.to(out_ptr.dtype.element_ty), mask=m)


# ---- poisson ------------------------------------------------------------------------------------
@triton.jit
def _loggam(x):
    """log Gamma(x) for integer-valued x >= 1 (float64): Stirling's series at x + n >= 7, less
    log(x) + ... + log(x + n - 1) (numpy's random_loggam)."""
    nn = tl.maximum(7.0 - tl.floor(x), 0.0)
    x0 = x + nn
    x2 = 1.0 / (x0 * x0)
    g = -1.39243221690590e+00
    g = g * x2 + 1.796443723688307e-01
    g = g * x2 - 2.955065359477124e-02
    g = g * x2 + 6.410256410256410e-03
    g = g * x2 - 1.917526917526918e-03
    g = g * x2 + 8.417508417508418e-04
    g = g * x2 - 5.952380952380952e-04
    g = g * x2 + 7.936507936507937e-04
    g = g * x2 - 2.777777777777778e-03
    g = g * x2 + 8.333333333333333e-02
    gl = g / x0 + 0.9189385332046727 + (x0 - 0.5) * tl.log(x0) - x0
    for j in tl.static_range(1, 7):
        gl -= tl.where(nn >= j, tl.log(tl.maximum(x0 - j, 1.0)), 0.0)
    return gl


@triton.jit
def _u32(w):
    """A 32-bit word -> uniform (0, 1) in float64: (w + 1/2) * 2**-32."""
    return (w.to(tl.float64) + 0.5) * 2.3283064365386963e-10


@triton.jit
def _ptrs(u, v, lam, loglam, a, b, invalpha, vr):
    """One try of Hormann's PTRS (transformed rejection with squeeze) for lam >= 10:
    (k, accepted)."""
    uu = u - 0.5
    us = 0.5 - tl.abs(uu)
    k = tl.floor((2.0 * a / us + b) * uu + lam + 0.43)
    quick = (us >= 0.07) & (v <= vr)
    rej = (k < 0) | ((us < 0.013) & (v > us))
    lhs = tl.log(v) + tl.log(invalpha) - tl.log(a / (us * us) + b)
    rhs = -lam + k * loglam - _loggam(tl.maximum(k, 0.0) + 1.0)
    return k, quick | (~rej & (lhs <= rhs))


@triton.jit
def _knuth(u, small, enlam, prod, cnt, res, done):
    """One step of Knuth's method on the elements still running (small & ~done)."""
    act = small & ~done
    prod = tl.where(act, prod * u, prod)
    stop = act & (prod <= enlam)
    res = tl.where(stop, cnt, res)
    cnt = tl.where(act & ~stop, cnt + 1.0, cnt)
    return prod, cnt, res, done | stop


@triton.jit(do_not_specialize=["n", "seed", "ctr"])
def poisson(x_ptr, out_ptr, n, seed, ctr, MAXIT: tl.constexpr, BLOCK: tl.constexpr):
    """out[i] ~ Poisson(x[i]): Knuth's product of uniforms for rates < 10, PTRS for larger ones
    (numpy's algorithms), in float64. Element i draws Philox counter (ctr + i, iteration): four
    uniforms an iteration (four Knuth steps, or two PTRS tries), MAXIT iterations at most
    (an unfinished element, probability < 1e-25 at MAXIT 16, keeps floor(rate)). Negative or NaN
    rates give NaN."""
    i, m = lanes(n, BLOCK)
    lam = tl.load(x_ptr + i, mask=m, other=0).to(tl.float64)
    big = lam >= 10.0
    small = ~big & (lam > 0.0)
    enlam = tl.exp(-tl.where(small, lam, 0.0))
    L = tl.maximum(lam, 10.0)
    slam = tl.sqrt(L)
    loglam = tl.log(L)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    invalpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2.0)
    done = ~(big | small)                      # rate 0 (or negative / NaN: fixed below)
    res = tl.zeros([BLOCK], dtype=tl.float64)
    prod = tl.full([BLOCK], 1.0, tl.float64)
    cnt = tl.zeros([BLOCK], dtype=tl.float64)
    cc = ctr.to(tl.int64) + i
    lo = cc.to(tl.uint32)
    hi = (cc >> 32).to(tl.uint32)
    zero = lo * 0
    itc = zero
    for _ in range(MAXIT):
        w0, w1, w2, w3 = tl.philox(seed.to(tl.int64), lo, hi, itc, zero, 10)
        itc = itc + 1
        u0 = _u32(w0)
        u1 = _u32(w1)
        u2 = _u32(w2)
        u3 = _u32(w3)
        # Knuth: X = the number of uniforms whose running product stays above exp(-lam)
        prod, cnt, res, done = _knuth(u0, small, enlam, prod, cnt, res, done)
        prod, cnt, res, done = _knuth(u1, small, enlam, prod, cnt, res, done)
        prod, cnt, res, done = _knuth(u2, small, enlam, prod, cnt, res, done)
        prod, cnt, res, done = _knuth(u3, small, enlam, prod, cnt, res, done)
        # PTRS: two tries
        k, ok = _ptrs(u0, u1, L, loglam, a, b, invalpha, vr)
        take = big & ~done & ok
        res = tl.where(take, k, res)
        done = done | take
        k, ok = _ptrs(u2, u3, L, loglam, a, b, invalpha, vr)
        take = big & ~done & ok
        res = tl.where(take, k, res)
        done = done | take
    res = tl.where(done, res, tl.floor(lam))
    res = tl.where((lam < 0.0) | (lam != lam), float("nan"), res)
    tl.store(out_ptr + i, _narrow(res, out_ptr.dtype.element_ty), mask=m)


# ---- multinomial with replacement ---------------------------------------------------------------
@triton.jit(do_not_specialize=["C", "S", "n", "seed", "ctr"])
def multinomial_search(cdf_ptr, out_ptr, C, S, n, seed, ctr, STEPS: tl.constexpr,
                       BLOCK: tl.constexpr):
    """out[r, s] = the first j with cdf[r, j] > u * cdf[r, C-1] (u uniform [0, 1) in float64 from
    counter ctr + r*S + s): inverse-CDF sampling by a binary search of STEPS >= log2(C) halvings
    over the running sums (float64, (R, C) contiguous) of a row's probabilities. A zero-probability
    category is never picked (its running sum equals its predecessor's)."""
    j, m = lanes(n, BLOCK)
    r0, r1, r2, r3 = tl.randint4x(seed.to(tl.int64), ctr.to(tl.int64) + j, 10)
    u = _u01(r0, r1, True, 53)
    base = (j // S) * C
    total = tl.load(cdf_ptr + base + C - 1, mask=m, other=1.0)
    t = u * total
    strict = t < total       # else (rounding): the first category reaching the total
    lo = tl.zeros([BLOCK], dtype=tl.int64)
    hi = tl.zeros([BLOCK], dtype=tl.int64) + (C - 1)
    for _ in range(STEPS):
        mid = (lo + hi) // 2
        v = tl.load(cdf_ptr + base + mid, mask=m, other=0.0)
        ok = tl.where(strict, v > t, v >= total)
        hi = tl.where(ok, mid, hi)
        lo = tl.where(ok, lo, mid + 1)
    tl.store(out_ptr + j, tl.minimum(lo, C - 1), mask=m)
