"""GPU kernels: random ops from a counter-based (Philox4x32-10) generator.

Every op is one launch of `random_tl.sample` (or `.randint`) writing a contiguous result;
seed and first counter come from the generator (`_random`). Each 128-bit Philox counter gives 4
values (2 for float64 samples and integer ranges over 2**32): the generator's offset advances by
4 * ceil(n / values per counter) words a launch (see _random for what that means for splitting a
draw into several launches). poisson is one launch too; randperm and multinomial are a sampling
launch plus ember's GPU scans/sorts (argsort of random int64 keys; cumsum + a binary-search
launch, or Gumbel keys + topk).
Argument errors are core's own checks, so they match the CPU. Values differ from PyTorch's CUDA
stream; the distributions are the same.

`cuda_kernel` fills the op entries' cuda slots with kernels `f(backend, op, *args)`
(NotImplemented declines a call). HOST lists the ops of this family that still run their CPU
kernel on host copies, with the reason (test_cuda_opdb.py holds the backend to it)."""
from __future__ import annotations

import math
import struct

from ember._ops.registry import Tensor, torch_name
from ember._ops.registry import dtypes as D

from .._random import generator_for
from .base import _cont, _launch, _lazy, cuda_kernel
from .creation import factory_output

_BLOCK = 1024          # values a program writes (counters a program: _BLOCK / values a counter)
_BITS = {D.float16: 11, D.bfloat16: 8, D.float32: 24, D.float64: 53}
_FLOATS = tuple(_BITS)
_INTS = (D.bool, D.uint8, D.int8, D.int16, D.int32, D.int64)


def _bits(v: float) -> int:
    """A float64 parameter as its int64 bit pattern (Triton passes Python floats as fp32)."""
    return struct.unpack("<q", struct.pack("<d", float(v)))[0]


def _sample(be, out, gen, dist, a=0.0, b=0.0, pa=None, pb=None, f64=None):
    """Fill contiguous `out` with DIST samples drawn from gen; pa/pb: per-element parameters
    (contiguous, out's shape)."""
    n = out.numel()
    if n == 0:
        return out
    if f64 is None:
        f64 = out.dtype is D.float64
    vpc = 2 if f64 else 4
    seed, ctr = generator_for(gen, out.device).take(-(-n // vpc))
    K = _lazy("random_tl")
    bits = _BITS.get(out.dtype, 24)
    _launch(be, K.sample, (-(-n // _BLOCK),),
                   [out, out if pa is None else pa, out if pb is None else pb, n, seed, ctr,
                    _bits(a), _bits(b)], (),
                   {"DIST": dist, "F64": f64, "BITS": bits, "HAS_A": pa is not None,
                    "HAS_B": pb is not None, "VPC": vpc, "BLOCK": _BLOCK // vpc})
    return out


def _fill_inplace(be, x, fill):
    """Run fill(contiguous target) on x: in place when contiguous, else through a temporary."""
    if x.is_contiguous():
        fill(x)
    else:
        tmp = be._new(tuple(x.shape), x.dtype, x.device)
        fill(tmp)
        be._copy_into(x, tmp)
    return x


def _float_only(dt, kernel):
    if dt.is_complex:
        return False  # complex: the CPU kernel on host copies
    if dt not in _FLOATS:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{torch_name(dt)}'")
    return True


def _new_like_meta(be, op, args, like):
    """The output of a factory (like: a *_like op) on cuda from the op's meta, or None."""
    return factory_output(be, op, args, like)


def _finish(t, rg):
    if rg:
        t.requires_grad_(True)
    return t


# ---- factories ---------------------------------------------------------------------------------
def _rand_factory(dist, kernel, like):
    def f(be, op, *args):
        r = _new_like_meta(be, op, args, like)
        if r is None:
            return NotImplemented
        t, rg = r
        gen = args[1]
        if not _float_only(t.dtype, kernel):
            return NotImplemented
        _sample(be, t, gen, dist, 0.0, 1.0)
        return _finish(t, rg)
    return f


def _check_randint(low, high, dt):
    from ember._ops.registry import check_int_range
    return check_int_range(low, high, dt)


def _randint_into(be, out, low, high, gen):
    """out = integers uniform in [low, high) (checked), in out's dtype; contiguous out."""
    low, high = _check_randint(low, high, out.dtype)
    n = out.numel()
    if n == 0:
        return out
    rng = high - low
    full = rng >= 1 << 64
    wide = rng >= 1 << 32       # else 32-bit words scaled by umulhi (4 values a counter)
    rng &= (1 << 64) - 1
    vpc = 2 if wide else 4
    seed, ctr = generator_for(gen, out.device).take(-(-n // vpc))
    K = _lazy("random_tl")
    _launch(be, K.randint, (-(-n // _BLOCK),),
                   [out, n, seed, ctr, low, rng - (1 << 64) if rng >= 1 << 63 else rng], (),
                   {"WIDE": wide, "FULL": full,
                    "HALF": out.dtype in (D.float16, D.bfloat16), "BLOCK": _BLOCK // vpc})
    return out


def _randint_ok(dt):
    return dt in _FLOATS or dt in _INTS


@cuda_kernel("randint")
def _randint(be, op, high, size, gen, *rest):
    return _randint_low(be, op, 0, high, size, gen, *rest, _args=(high, size, gen, *rest))


@cuda_kernel("randint.low")
def _randint_low(be, op, low, high, size, gen, *rest, _args=None):
    return _randint_new(be, op, _args or (low, high, size, gen, *rest), False, low, high, gen)


def _randint_new(be, op, args, like, low, high, gen):
    r = _new_like_meta(be, op, args, like)
    if r is None:
        return NotImplemented
    t, rg = r
    if not _randint_ok(t.dtype):
        return NotImplemented
    return _finish(_randint_into(be, t, low, high, gen), rg)


@cuda_kernel("randint_like")
def _randint_like(be, op, x, high, gen, *rest):
    return _randint_like_low(be, op, x, 0, high, gen, *rest, _args=(x, high, gen, *rest))


@cuda_kernel("randint_like.low_dtype")
def _randint_like_low(be, op, x, low, high, gen, *rest, _args=None):
    return _randint_new(be, op, _args or (x, low, high, gen, *rest), True, low, high, gen)


# ---- in-place samplers -------------------------------------------------------------------------
def _sampler(dist, params=lambda *p: p):
    """x.<name>_(*params, generator=): the entry's meta checks the arguments, then one launch
    (complex: host copies)."""
    def f(be, op, x, *args):
        *ps, gen = args
        op.meta(x, *args)
        if x.dtype not in _FLOATS:
            return NotImplemented
        a, b = (list(params(*ps)) + [0.0, 0.0])[:2]
        return _fill_inplace(be, x, lambda t: _sample(be, t, gen, dist, a, b))
    return f


@cuda_kernel("random_", "random_.from", "random_.to")
def _random_(be, op, x, *args):
    """random_(), random_.to(to), random_.from(from, to): [from, to) with the dtype's own
    bounds when omitted (floats: [0, 2**mantissa])."""
    from ember._ops.registry import int_range
    if not _randint_ok(x.dtype):
        return NotImplemented
    *bounds, gen = args
    lo, hi = ([None, None] + bounds)[-2:]
    lo = 0 if lo is None else lo
    hi = int_range(x.dtype)[1] + 1 if hi is None else hi
    _check_randint(lo, hi, x.dtype)
    return _fill_inplace(be, x, lambda t: _randint_into(be, t, lo, hi, gen))


# ---- bernoulli -----------------------------------------------------------------------------------
def _expand_to(be, p, shape, dt):
    """p broadcast to shape, contiguous, in dtype dt (one copy launch unless it already is)."""
    if tuple(p.shape) == tuple(shape) and p.dtype is dt and p.is_contiguous():
        return p
    out = be._new(tuple(shape), dt, p.device)
    be._copy_into(out, p.expand(tuple(shape)) if tuple(p.shape) != tuple(shape) else p)
    return out


def _p_dtype(p):
    return D.float64 if p.dtype is D.float64 else D.float32


@cuda_kernel("bernoulli")
def _bernoulli(be, op, p, gen):
    """bernoulli(p): out ~ Bernoulli(p) elementwise, p's dtype. p outside [0, 1] is not
    checked (PyTorch's CUDA kernel asserts on the device; a host check would sync)."""
    if not (p.dtype in _FLOATS or p.dtype in _INTS):
        return NotImplemented
    out = be._new(tuple(p.shape), p.dtype, p.device)
    pc = _expand_to(be, p, tuple(p.shape), _p_dtype(p))
    return _sample(be, out, gen, 6, pa=pc, f64=p.dtype is D.float64)


@cuda_kernel("bernoulli.p")
def _bernoulli_p(be, op, x, p, gen):
    op.meta(x, p, gen)   # p in [0, 1]
    if not (x.dtype in _FLOATS or x.dtype in _INTS):
        return NotImplemented
    out = be._new(tuple(x.shape), x.dtype, x.device)
    return _sample(be, out, gen, 6, float(p), f64=True)


@cuda_kernel("bernoulli_.Tensor")
def _bernoulli_tensor_(be, op, x, p, gen):
    if not (x.dtype in _FLOATS or x.dtype in _INTS) or not isinstance(p, Tensor) or \
            p.device != x.device:
        return NotImplemented
    if not (p.dtype in _FLOATS or p.dtype in _INTS):
        return NotImplemented
    pc = _expand_to(be, p, tuple(x.shape), _p_dtype(p))  # errors on unbroadcastable p
    return _fill_inplace(be, x, lambda t: _sample(be, t, gen, 6, pa=pc,
                                                   f64=p.dtype is D.float64))


@cuda_kernel("bernoulli_.float")
def _bernoulli_float_(be, op, x, p, gen):
    op.meta(x, p, gen)   # p in [0, 1]
    if not (x.dtype in _FLOATS or x.dtype in _INTS):
        return NotImplemented
    return _fill_inplace(be, x, lambda t: _sample(be, t, gen, 6, float(p), f64=True))


# ---- normal(mean, std) ---------------------------------------------------------------------------
def _normal_out(be, op, args, mean, std, gen, dev):
    """normal with tensor or float mean/std: shape and dtype from core's meta. Tensor std < 0
    is not checked (PyTorch checks only CPU std: a check here would sync)."""
    m = op.meta(*args)   # a float std >= 0
    if not _float_only(m.dtype, "normal_kernel_cpu"):
        return NotImplemented
    out = be._new(tuple(m.shape), m.dtype, dev)
    pa = _expand_to(be, mean, tuple(m.shape), m.dtype) if isinstance(mean, Tensor) else None
    pb = _expand_to(be, std, tuple(m.shape), m.dtype) if isinstance(std, Tensor) else None
    return _sample(be, out, gen, 1, 0.0 if pa is not None else mean,
                   1.0 if pb is not None else std, pa, pb)


@cuda_kernel("normal.Tensor_Tensor")
def _normal_tt(be, op, mean, std, gen):
    if mean.device != std.device:
        return NotImplemented
    return _normal_out(be, op, (mean, std, gen), mean, std, gen, mean.device)


@cuda_kernel("normal.Tensor_float")
def _normal_tf(be, op, mean, std, gen):
    return _normal_out(be, op, (mean, std, gen), mean, float(std), gen, mean.device)


@cuda_kernel("normal.float_Tensor")
def _normal_ft(be, op, mean, std, gen):
    return _normal_out(be, op, (mean, std, gen), float(mean), std, gen, std.device)


@cuda_kernel("normal.float_float")
def _normal_ff(be, op, mean, std, size, gen, *rest):
    r = _new_like_meta(be, op, (mean, std, size, gen, *rest), False)  # the meta: std >= 0
    if r is None:
        return NotImplemented
    t, rg = r
    if not _float_only(t.dtype, "normal_kernel_cpu"):
        return NotImplemented
    return _finish(_sample(be, t, gen, 1, mean, std), rg)


# ---- randperm, multinomial, poisson ----------------------------------------------------------
@cuda_kernel("randperm")
def _randperm(be, op, n, gen, *rest):
    """randperm(n): the argsort of n random int64 keys (ember's GPU sort: a rank sort up to
    sorting.RANK_MAX keys; longer rows go through that family's own host fallback). Keys tie
    with probability < n**2 / 2**65; a tie is broken by position (stable sort)."""
    r = _new_like_meta(be, op, (n, gen, *rest), False)
    if r is None:
        return NotImplemented
    out, rg = r
    n = int(n)
    if n == 0:
        return _finish(out, rg)
    keys = be._new((n,), D.int64, out.device)
    _randint_into(be, keys, -(1 << 63), 1 << 63, generator_for(gen, out.device))
    idx = keys.sort(stable=True)[1]
    if out.dtype is D.int64:
        out = idx
    else:
        be._copy_into(out, idx)
    return _finish(out, rg)


_MN_BLOCK = 256
_PO_BLOCK = 256
_PO_MAXIT = 16       # Philox counters (4 uniforms each) an element at most: see the kernel


def _check_probs(rows, n, replacement):
    """PyTorch's checks of multinomial's Gumbel path, one host sync for all (PyTorch syncs
    there too)."""
    import ember
    bad = (~ember.isfinite(rows) | (rows < 0)).any()
    zero = (rows.sum(-1) <= 0).any()
    checks = [bad, zero] + ([] if replacement else [((rows > 0).sum(-1) < n).any()])
    flags = ember.stack(checks).tolist() + [False]
    if flags[0]:
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if flags[1]:
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    if flags[2]:
        raise RuntimeError("invalid multinomial distribution (with replacement=False, not "
                           "enough non-negative category to sample)")


@cuda_kernel("multinomial")
def _multinomial(be, op, p, n, replacement, gen):
    """multinomial on the GPU. Without replacement (or one sample): the Gumbel-top-k trick, as
    PyTorch: keys p / E with E ~ Exp(1) > 0 drawn in one launch, then topk (ember's GPU sort:
    rows up to sorting.RANK_MAX categories); the probability checks sync once, as PyTorch's.
    With replacement: inverse CDF, one launch of a binary search per sample over the float64
    running sums (cumsum) of each row; invalid rows are not checked there (PyTorch asserts on
    the device): they give an unspecified category in range."""
    shape = op.meta(p, n, replacement, gen).shape    # core's argument checks and errors
    if p.dtype not in _FLOATS:
        return NotImplemented
    g = generator_for(gen, p.device)
    C = p.shape[-1]
    R = p.numel() // C if C else 0
    n = int(n)
    rows = p.reshape((R, C))
    if not replacement or n == 1:
        kd = D.float64 if p.dtype is D.float64 else D.float32
        rows = _expand_to(be, rows, (R, C), kd)
        _check_probs(rows, n, replacement)
        keys = be._new((R, C), kd, p.device)
        _sample(be, keys, g, 8, pa=rows, f64=kd is D.float64)
        out = keys.topk(n, -1)[1]
    else:
        cdf = _expand_to(be, rows, (R, C), D.float64).cumsum(-1)
        out = be._new((R, n), D.int64, p.device)
        seed, ctr = g.take(R * n)
        K = _lazy("random_tl")
        _launch(be, K.multinomial_search, (-(-(R * n) // _MN_BLOCK),),
                       [_cont(be, cdf), out, C, n, R * n, seed, ctr], (),
                       {"STEPS": max(1, (C - 1).bit_length()), "BLOCK": _MN_BLOCK})
    return out.reshape(tuple(shape))


@cuda_kernel("poisson")
def _poisson(be, op, rates, gen):
    """poisson(rates): one launch, Knuth's method below rate 10, PTRS above (float64 inside).
    Negative rates are not checked (a check would sync): they give NaN."""
    if rates.dtype not in _FLOATS:
        return NotImplemented
    out = be._new(tuple(rates.shape), rates.dtype, rates.device)
    n = out.numel()
    if n == 0:
        return out
    x = _cont(be, rates)
    seed, ctr = generator_for(gen, rates.device).take(n)
    K = _lazy("random_tl")
    _launch(be, K.poisson, (-(-n // _PO_BLOCK),), [x, out, n, seed, ctr], (),
                   {"MAXIT": _PO_MAXIT, "BLOCK": _PO_BLOCK})
    return out


# ---- kernels made by the factories above ------------------------------------------------------
cuda_kernel("rand")(_rand_factory(0, "check_uniform_bounds", False))
cuda_kernel("randn")(_rand_factory(1, "normal_kernel_cpu", False))
cuda_kernel("rand_like")(_rand_factory(0, "check_uniform_bounds", True))
cuda_kernel("randn_like")(_rand_factory(1, "normal_kernel_cpu", True))
cuda_kernel("uniform_")(_sampler(0))
cuda_kernel("normal_")(_sampler(1))
cuda_kernel("exponential_")(_sampler(2, lambda lam: (lam,)))
cuda_kernel("cauchy_")(_sampler(3))
cuda_kernel("log_normal_")(_sampler(4))
cuda_kernel("geometric_")(_sampler(5, lambda p: (math.log1p(-p),)))

HOST: dict[str, str] = {}
