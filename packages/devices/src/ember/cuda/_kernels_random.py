"""Triton kernels for the random ops: Philox4x32-10 (tl.randint4x) at counter offset + i for
element i, four 32-bit words per element, mapped to each distribution in registers.

Scalar parameters arrive as the int64 bit patterns of float64 values (Triton passes Python floats
as fp32; float64 outputs need all their bits). Imported only when first needed.
"""
from __future__ import annotations

import triton
import triton.language as tl

# DIST codes (the _ops_random launcher uses the same numbers)
UNIFORM, NORMAL, EXPONENTIAL, CAUCHY, LOG_NORMAL, GEOMETRIC = 0, 1, 2, 3, 4, 5
BERNOULLI, RANDINT = 6, 7


@triton.jit
def _f64(bits):
    return bits.to(tl.int64).to(tl.float64, bitcast=True)


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
def _normal01(r0, r1, r2, r3, F64: tl.constexpr):
    """A standard normal by Box-Muller from two uniforms."""
    u1 = _u01_open(r0, r1, F64)
    u2 = _u01(r2, r3, F64, 24)
    return tl.sqrt(-2.0 * tl.log(u1)) * tl.cos(6.283185307179586 * u2)


@triton.jit(do_not_specialize=["n", "seed", "offset", "a", "b"])
def sample(out_ptr, pa_ptr, pb_ptr, n, seed, offset, a, b, DIST: tl.constexpr,
           F64: tl.constexpr, BITS: tl.constexpr, HAS_A: tl.constexpr, HAS_B: tl.constexpr,
           BLOCK: tl.constexpr):
    """out[i] = a sample of DIST with parameters a, b (float64 bit patterns; or per-element
    from pa/pb when HAS_A/HAS_B) for i < n, contiguous."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    r0, r1, r2, r3 = tl.randint4x(seed.to(tl.int64), offset.to(tl.int64) + i, 10)
    pa = _f64(a)
    pb = _f64(b)
    if not F64:
        pa = pa.to(tl.float32)
        pb = pb.to(tl.float32)
    if HAS_A:
        pa = tl.load(pa_ptr + i, mask=m, other=0).to(pa.dtype)
    if HAS_B:
        pb = tl.load(pb_ptr + i, mask=m, other=0).to(pb.dtype)
    if DIST == 0:    # uniform [a, b): a value rounding up to b becomes a (as PyTorch)
        v = pa + (pb - pa) * _u01(r0, r1, F64, BITS)
        o = v.to(out_ptr.dtype.element_ty)
        o = tl.where(o.to(pb.dtype) >= pb, pa.to(out_ptr.dtype.element_ty), o)
        tl.store(out_ptr + i, o, mask=m)
    else:
        if DIST == 1:    # normal: a + b z
            v = pa + pb * _normal01(r0, r1, r2, r3, F64)
        elif DIST == 2:  # exponential with rate a
            v = -tl.log(_u01_open(r0, r1, F64)) / pa
        elif DIST == 3:  # cauchy: median a, scale b
            t = 3.141592653589793 * (_u01_mid(r0, r1, F64) - 0.5)
            v = pa + pb * (tl.sin(t) / tl.cos(t))
        elif DIST == 4:  # log-normal: exp(a + b z)
            v = tl.exp(pa + pb * _normal01(r0, r1, r2, r3, F64))
        elif DIST == 5:  # geometric: a = log1p(-p) (from the host), u in (0, 1): v >= 1
            v = tl.ceil(tl.log(_u01_mid(r0, r1, F64)) / pa)
        else:            # bernoulli: a = p
            v = (_u01(r0, r1, F64, 24) < pa).to(pa.dtype)
        tl.store(out_ptr + i, v.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["n", "seed", "offset", "low", "rng"])
def randint(out_ptr, n, seed, offset, low, rng, WIDE: tl.constexpr, FULL: tl.constexpr,
            HALF: tl.constexpr, BLOCK: tl.constexpr):
    """out[i] = low + r mod rng, r a 32-bit (or 64-bit when WIDE) Philox word; FULL: the raw
    64-bit word (random_ over all of int64). rng is the range as a two's-complement int64."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    r0, r1, r2, r3 = tl.randint4x(seed.to(tl.int64), offset.to(tl.int64) + i, 10)
    if WIDE:
        r = (r0.to(tl.uint64) << 32) | r1.to(tl.uint64)
    else:
        r = r0.to(tl.uint64)
    if FULL:
        v = r.to(tl.int64, bitcast=True)
    else:
        v = (r % rng.to(tl.int64).to(tl.uint64, bitcast=True)).to(tl.int64) + low.to(tl.int64)
    if HALF:  # float16/bfloat16 through float32 (exact: the values are below 2**mantissa)
        v = v.to(tl.float32)
    tl.store(out_ptr + i, v.to(out_ptr.dtype.element_ty), mask=m)
