"""Random ops: rand/randn/randint/randperm (+ _like), normal, bernoulli, multinomial, poisson and
the in-place samplers (uniform_, normal_, exponential_, ...). All tagged "random".

Kernels draw from the `generator=` argument's numpy generator, or the default one
(`ember._random`). Low-precision floats are sampled on their own grid (never rounding up to 1).
"""
from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._dispatch import TensorMeta, torch_name
from .._random import resolve
from .._size import broadcast_shapes
from ._registry import bind_overloads, defop
from .creation import _shape, to_dtype

_FACTORY_KW = ("ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
               "bool? pin_memory=False, bool requires_grad=False")
_LIKE_KW = _FACTORY_KW + ", MemoryFormat? memory_format=None"
_RANDOM = {"random"}
_MANTISSA = {D.float16: 11, D.bfloat16: 8, D.float32: 24, D.float64: 53}


def _edt(a):
    return D.from_numpy_dtype(a.dtype)


def _zeros_vjp(n):
    """Random ops pass no gradient to their tensor inputs (PyTorch returns zeros)."""
    def vjp(g, out, *args):
        import ember
        return (ember.zeros_like(g),) * n
    return vjp


def uniform01(g: np.random.Generator, shape, dt, kernel="check_uniform_bounds"):
    """Uniform [0, 1) samples of dtype dt: k * 2**-digits, exact in dt."""
    if dt.is_complex:
        r = uniform01(g, shape, dt.to_real(), kernel)
        return (r + 1j * uniform01(g, shape, dt.to_real(), kernel)).astype(dt.np)
    bits = _MANTISSA.get(dt)
    if bits is None:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{torch_name(dt)}'")
    if dt == D.float64:
        return g.random(shape)
    if dt == D.float32:
        return g.random(shape, dtype=np.float32)
    return (g.integers(0, 1 << bits, shape) * 2.0 ** -bits).astype(dt.np)


def standard_normal(g, shape, dt, kernel="normal_kernel_cpu"):
    if dt.is_complex:  # real and imaginary parts each of variance 1/2
        re, im = g.standard_normal(shape), g.standard_normal(shape)
        return ((re + 1j * im) / np.sqrt(2)).astype(dt.np)
    if not dt.is_floating_point or dt in D._FLOAT8:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{torch_name(dt)}'")
    if dt == D.float64:
        return g.standard_normal(shape)
    return g.standard_normal(shape, dtype=np.float32).astype(dt.np, copy=False)


# ---- factories ---------------------------------------------------------------------------------
def _factory_meta(size, generator, dtype, *_):
    return TensorMeta(_shape(size, "rand"), to_dtype(dtype))


defop(f"rand(SymInt[] size, *, Generator? generator=None, {_FACTORY_KW}) -> Tensor",
      method=False, tags=_RANDOM | {"factory"}, meta=_factory_meta,
      kernels={"cpu": lambda size, gen, dtype, *_: uniform01(
          resolve(gen), _shape(size, "rand"), to_dtype(dtype))})
defop(f"randn(SymInt[] size, *, Generator? generator=None, {_FACTORY_KW}) -> Tensor",
      method=False, tags=_RANDOM | {"factory"}, meta=_factory_meta,
      kernels={"cpu": lambda size, gen, dtype, *_: standard_normal(
          resolve(gen), _shape(size, "randn"), to_dtype(dtype))})


def _like_dtype(x, dtype):
    return to_dtype(dtype, x.dtype if isinstance(x.dtype, D.dtype) else _edt(x))


defop(f"rand_like(Tensor self, *, Generator? generator=None, {_LIKE_KW}) -> Tensor",
      method=False, tags=_RANDOM, differentiable=(),
      meta=lambda x, gen, dtype, *_: TensorMeta(tuple(x.shape), _like_dtype(x, dtype)),
      kernels={"cpu": lambda x, gen, dtype, *_: uniform01(resolve(gen), x.shape,
                                                           _like_dtype(x, dtype))})
defop(f"randn_like(Tensor self, *, Generator? generator=None, {_LIKE_KW}) -> Tensor",
      method=False, tags=_RANDOM, differentiable=(),
      meta=lambda x, gen, dtype, *_: TensorMeta(tuple(x.shape), _like_dtype(x, dtype)),
      kernels={"cpu": lambda x, gen, dtype, *_: standard_normal(resolve(gen), x.shape,
                                                                 _like_dtype(x, dtype))})


def _int_range(dt):
    """The [lo, hi] integer range random_ may produce for dtype dt."""
    if dt == D.bool:
        return 0, 1
    if dt.is_floating_point:
        return -(1 << _MANTISSA[dt]), 1 << _MANTISSA[dt]
    info = np.iinfo(dt.np)
    return int(info.min), int(info.max)


def check_int_range(low, high, dt) -> tuple[int, int]:
    """PyTorch's checks of an integer range [low, high) drawn as dtype dt (device backends too)."""
    low, high = int(low), int(high)
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= "
                           f"to={high}")
    lo, hi = _int_range(dt)
    if high - 1 > hi or low < lo:
        c = {D.uint8: "unsigned char", D.int8: "signed char", D.int16: "short", D.int32: "int",
             D.int64: "long", D.bool: "bool"}.get(dt, dt.name)
        raise RuntimeError(f"{'to - 1' if high - 1 > hi else 'from'} is out of bounds for {c}")
    return low, high


def randint_values(g, low, high, shape, dt):
    """Integers uniform in [low, high), as dtype dt, with PyTorch's range checks."""
    if dt in D._FLOAT8:
        raise NotImplementedError(f"\"random_update_from_to\" not implemented for "
                                  f"'{torch_name(dt)}'")
    low, high = check_int_range(low, high, dt)
    return g.integers(low, high, shape, dtype=np.int64).astype(dt.np)


def _randint_kernel(high, size, gen, dtype, *_):
    return randint_values(resolve(gen), 0, high, _shape(size, "randint"), to_dtype(dtype,
                                                                                   D.int64))


def _randint_low_kernel(low, high, size, gen, dtype, *_):
    return randint_values(resolve(gen), low, high, _shape(size, "randint"),
                          to_dtype(dtype, D.int64))


defop(f"randint(SymInt high, SymInt[] size, *, Generator? generator=None, {_FACTORY_KW}) -> "
      "Tensor", function=False, method=False, tags=_RANDOM | {"factory"},
      kernels={"cpu": _randint_kernel},
      meta=lambda high, size, gen, dtype, *_: TensorMeta(tuple(size), to_dtype(dtype, D.int64)))
defop(f"randint.low(SymInt low, SymInt high, SymInt[] size, *, Generator? generator=None, "
      f"{_FACTORY_KW}) -> Tensor", function=False, method=False, tags=_RANDOM | {"factory"},
      kernels={"cpu": _randint_low_kernel},
      meta=lambda lo, hi, size, gen, dtype, *_: TensorMeta(tuple(size), to_dtype(dtype,
                                                                                 D.int64)))


def _pick_randint(*args, **kw):
    n = len(args) + sum(k in kw for k in ("low", "high", "size"))
    return "randint.low" if n >= 3 or "low" in kw else "randint"


bind_overloads("randint", _pick_randint, method=False)

defop(f"randint_like(Tensor self, SymInt high, *, Generator? generator=None, {_LIKE_KW}) -> "
      "Tensor", function=False, method=False, tags=_RANDOM, differentiable=(),
      kernels={"cpu": lambda x, high, gen, dtype, *_: randint_values(
          resolve(gen), 0, high, x.shape, _like_dtype(x, dtype))},
      meta=lambda x, high, gen, dtype, *_: TensorMeta(tuple(x.shape), _like_dtype(x, dtype)))
defop(f"randint_like.low_dtype(Tensor self, SymInt low, SymInt high, *, "
      f"Generator? generator=None, {_LIKE_KW}) -> Tensor", function=False, method=False,
      tags=_RANDOM, differentiable=(),
      kernels={"cpu": lambda x, low, high, gen, dtype, *_: randint_values(
          resolve(gen), low, high, x.shape, _like_dtype(x, dtype))},
      meta=lambda x, lo, hi, gen, dtype, *_: TensorMeta(tuple(x.shape), _like_dtype(x, dtype)))
bind_overloads("randint_like", lambda *a, **kw: "randint_like.low_dtype" if (
    len(a) + ("low" in kw) + ("high" in kw) >= 3) else "randint_like", method=False)


def _randperm_kernel(n, gen, dtype, *_):
    _shape((n,), "randperm")
    return resolve(gen).permutation(n).astype(to_dtype(dtype, D.int64).np)


defop(f"randperm(SymInt n, *, Generator? generator=None, {_FACTORY_KW}) -> Tensor",
      method=False, tags=_RANDOM | {"factory"}, kernels={"cpu": _randperm_kernel},
      meta=lambda n, gen, dtype, *_: TensorMeta((n,), to_dtype(dtype, D.int64)))


# ---- normal --------------------------------------------------------------------------------------
def _check_std(std):
    if isinstance(std, np.ndarray):
        if (std < 0).any():
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")


def _normal(g, mean, std, shape, dt):
    _check_std(std)
    z = standard_normal(g, shape, dt)
    return (z * std + mean).astype(dt.np, copy=False)


def _normal_tt(mean, std, gen):
    shape = broadcast_shapes(mean.shape, std.shape)
    dt = D.promote_types(_edt(mean), _edt(std))
    return _normal(resolve(gen), mean, std, shape, dt)


_GEN = "*, Generator? generator=None"
defop(f"normal.Tensor_Tensor(Tensor mean, Tensor std, {_GEN}) -> Tensor", function=False,
      method=False, tags=_RANDOM, kernels={"cpu": _normal_tt}, vjp=_zeros_vjp(2),
      meta=lambda m, s, gen: TensorMeta(broadcast_shapes(tuple(m.shape), tuple(s.shape)),
                                        D.promote_types(m.dtype, s.dtype)))
defop(f"normal.Tensor_float(Tensor mean, float std=1., {_GEN}) -> Tensor", function=False,
      method=False, tags=_RANDOM, vjp=_zeros_vjp(1),
      kernels={"cpu": lambda m, s, gen: _normal(resolve(gen), m, s, m.shape, _edt(m))},
      meta=lambda m, s, gen: (_check_std(s), TensorMeta(tuple(m.shape), m.dtype))[1])
defop(f"normal.float_Tensor(float mean, Tensor std, {_GEN}) -> Tensor", function=False,
      method=False, tags=_RANDOM, vjp=_zeros_vjp(1),
      kernels={"cpu": lambda m, s, gen: _normal(resolve(gen), m, s, s.shape, _edt(s))},
      meta=lambda m, s, gen: TensorMeta(tuple(s.shape), s.dtype))
defop(f"normal.float_float(float mean, float std, SymInt[] size, {_GEN}, {_FACTORY_KW}) -> "
      "Tensor", function=False, method=False, tags=_RANDOM | {"factory"},
      kernels={"cpu": lambda m, s, size, gen, dtype, *_: _normal(
          resolve(gen), m, s, _shape(size, "normal"), to_dtype(dtype))},
      meta=lambda m, s, size, gen, dtype, *_: (_check_std(s),
                                               TensorMeta(tuple(size), to_dtype(dtype)))[1])


def _pick_normal(*args, **kw):
    from .._tensor import Tensor
    mean = args[0] if args else kw.get("mean")
    std = args[1] if len(args) > 1 else kw.get("std")
    if isinstance(mean, Tensor):
        return "normal.Tensor_Tensor" if isinstance(std, Tensor) else "normal.Tensor_float"
    return "normal.float_Tensor" if isinstance(std, Tensor) else "normal.float_float"


bind_overloads("normal", _pick_normal, method=False)


# ---- bernoulli, multinomial, poisson -------------------------------------------------------------
def _check_p(p, name="bernoulli_"):
    if not 0 <= p <= 1:
        raise RuntimeError(f"{name} expects p to be in [0, 1], but got p={p:g}")


def _bernoulli_tensor(p, gen):
    pf = p.astype(np.float64)
    if ((pf < 0) | (pf > 1)).any() or np.isnan(pf).any():
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    return (resolve(gen).random(p.shape) < pf).astype(p.dtype)


def _bernoulli_p(x, p, gen):
    _check_p(p)
    return (resolve(gen).random(x.shape) < p).astype(x.dtype)


def _same_meta(x, *_):
    return TensorMeta(tuple(x.shape), x.dtype)


defop(f"bernoulli(Tensor self, {_GEN}) -> Tensor", function=False, method=False, tags=_RANDOM,
      kernels={"cpu": _bernoulli_tensor}, meta=_same_meta, vjp=_zeros_vjp(1))
def _p_meta(x, p, gen):
    _check_p(p)
    return _same_meta(x)


defop(f"bernoulli.p(Tensor self, float p, {_GEN}) -> Tensor", function=False, method=False,
      tags=_RANDOM, kernels={"cpu": _bernoulli_p}, meta=_p_meta, vjp=_zeros_vjp(1))
bind_overloads("bernoulli", lambda *a, **kw: "bernoulli.p" if len(a) > 1 or "p" in kw
               else "bernoulli")


def _bernoulli_inplace_tensor(x, p, gen):
    pf = np.broadcast_to(p.astype(np.float64), x.shape)
    if ((pf < 0) | (pf > 1)).any():
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    x[...] = resolve(gen).random(x.shape) < pf


def _bernoulli_inplace_float(x, p, gen):
    _check_p(p)
    x[...] = resolve(gen).random(x.shape) < p


_INPLACE = _RANDOM | {"inplace"}
defop(f"bernoulli_.Tensor(Tensor(a!) self, Tensor p, {_GEN}) -> Tensor(a!)", function=False,
      method=False, tags=_INPLACE, kernels={"cpu": _bernoulli_inplace_tensor}, meta=_same_meta,
      vjp=_zeros_vjp(2))
defop(f"bernoulli_.float(Tensor(a!) self, float p=0.5, {_GEN}) -> Tensor(a!)", function=False,
      method=False, tags=_INPLACE, kernels={"cpu": _bernoulli_inplace_float}, meta=_p_meta,
      vjp=_zeros_vjp(1))


def _pick_bernoulli_(*a, **kw):
    from .._tensor import Tensor
    p = a[1] if len(a) > 1 else kw.get("p", 0.5)
    return "bernoulli_.Tensor" if isinstance(p, Tensor) else "bernoulli_.float"


bind_overloads("bernoulli_", _pick_bernoulli_, function=False)


def _multinomial_check(p, n, replacement):
    dt = p.dtype if isinstance(p.dtype, D.dtype) else _edt(p)
    if len(p.shape) not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not dt.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{torch_name(dt)}")
    if n <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and n > p.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    if p.shape[-1] > 1 << 24:
        raise RuntimeError("number of categories cannot exceed 2^24")
    return tuple(p.shape[:-1]) + (n,)


def _multinomial_kernel(p, n, replacement, gen):
    _multinomial_check(p, n, replacement)
    g = resolve(gen)
    rows = p.reshape((-1, p.shape[-1])).astype(np.float64)
    if not np.isfinite(rows).all() or (rows < 0).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    total = rows.sum(-1, keepdims=True)
    if (total <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    if replacement:  # inverse CDF of each row at uniform points
        cdf = np.cumsum(rows / total, -1)
        u = g.random((rows.shape[0], n))
        out = np.stack([np.searchsorted(c, x, side="right") for c, x in zip(cdf, u)])
        out = np.minimum(out, rows.shape[-1] - 1)
    else:  # p / Exp(1) keys, largest first: sampling without replacement (as PyTorch)
        if ((rows > 0).sum(-1) < n).any():
            raise RuntimeError("invalid multinomial distribution (with replacement=False, not "
                               "enough non-negative category to sample)")
        keys = rows / g.exponential(1.0, rows.shape)
        out = np.argsort(-keys, axis=-1, kind="stable")[:, :n]
    return out.reshape(tuple(p.shape[:-1]) + (n,)).astype(np.int64)


defop(f"multinomial(Tensor self, SymInt num_samples, bool replacement=False, {_GEN}) -> Tensor",
      tags=_RANDOM, kernels={"cpu": _multinomial_kernel}, differentiable=(),
      meta=lambda p, n, r, gen: TensorMeta(_multinomial_check(p, n, r), D.int64))


def _poisson_kernel(rates, gen):
    r = rates.astype(np.float64)
    if (r < 0).any():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return resolve(gen).poisson(r).astype(rates.dtype)


defop("poisson(Tensor self, Generator? generator=None) -> Tensor", method=False, tags=_RANDOM,
      kernels={"cpu": _poisson_kernel}, meta=_same_meta, vjp=_zeros_vjp(1))


# ---- in-place samplers ---------------------------------------------------------------------------
def _sampler(schema, draw, check=None, kernel="check_uniform_bounds"):
    """An in-place sampler `Tensor.<name>_(params..., generator=)` writing draw(g, shape, dt,
    *params) into self."""
    def k(x, *args):
        *params, gen = args
        dt = _edt(x)
        if not (dt.is_floating_point or dt.is_complex):
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{torch_name(dt)}'")
        if check:
            check(*params)
        x[...] = draw(resolve(gen), x.shape, dt, *params)

    def meta(x, *args):  # the checks of k, so every device raises them
        *params, gen = args
        if not (x.dtype.is_floating_point or x.dtype.is_complex):
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{torch_name(x.dtype)}'")
        if check:
            check(*params)
        return _same_meta(x)
    defop(schema, function=False, tags=_INPLACE, kernels={"cpu": k}, meta=meta,
          vjp=_zeros_vjp(1))


def _check_uniform(lo, hi):
    if lo > hi:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={lo:g}"
                           f" > to={hi:g}")


def _uniform(g, shape, dt, lo, hi):
    u = uniform01(g, shape, dt.to_real() if dt.is_complex else dt)
    return lo + (hi - lo) * u.astype(np.float64) if dt == D.float64 else lo + (hi - lo) * u


def _check_exponential(lam):
    if not lam > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lam:g}")


def _check_cauchy(median, sigma):
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma:g}")


def _check_log_normal(mean, std):
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")


def _check_geometric(p):
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")


_F = f"{_GEN}) -> Tensor(a!)"
_sampler(f"uniform_(Tensor(a!) self, float from_=0., float to=1., {_F}", _uniform,
         _check_uniform)
_sampler(f"normal_(Tensor(a!) self, float mean=0., float std=1., {_F}",
         lambda g, shape, dt, m, s: _normal(g, m, s, shape, dt), lambda m, s: _check_std(s),
         "normal_kernel_cpu")
_sampler(f"exponential_(Tensor(a!) self, float lambd=1., {_F}",
         lambda g, shape, dt, lam: g.exponential(1.0 / lam, shape), _check_exponential,
         "exponential_cpu")
_sampler(f"geometric_(Tensor(a!) self, float p, {_F}",
         lambda g, shape, dt, p: g.geometric(p, shape), _check_geometric, "geometric_cpu")
_sampler(f"log_normal_(Tensor(a!) self, float mean=1., float std=2., {_F}",
         lambda g, shape, dt, m, s: g.lognormal(m, s, shape), _check_log_normal,
         "log_normal_cpu")
_sampler(f"cauchy_(Tensor(a!) self, float median=0., float sigma=1., {_F}",
         lambda g, shape, dt, med, sig: med + sig * g.standard_cauchy(shape),
         _check_cauchy, "cauchy_cpu")


def _random_kernel(x, lo, hi, gen):
    """random_ over [lo, hi); None bounds are the dtype's own (2**mantissa for floats)."""
    dt = _edt(x)
    lo = 0 if lo is None else lo
    hi = _int_range(dt)[1] + 1 if hi is None else hi
    x[...] = randint_values(resolve(gen), lo, hi, x.shape, dt)


defop(f"random_.from(Tensor(a!) self, int from_, int? to, {_F}", function=False, method=False,
      tags=_INPLACE, meta=_same_meta, vjp=_zeros_vjp(1),
      kernels={"cpu": lambda x, lo, hi, gen: _random_kernel(x, lo, hi, gen)})
defop(f"random_.to(Tensor(a!) self, int to, {_F}", function=False, method=False,
      tags=_INPLACE, meta=_same_meta, vjp=_zeros_vjp(1),
      kernels={"cpu": lambda x, hi, gen: _random_kernel(x, None, hi, gen)})
defop(f"random_(Tensor(a!) self, {_F}", function=False, method=False, tags=_INPLACE,
      meta=_same_meta, vjp=_zeros_vjp(1),
      kernels={"cpu": lambda x, gen: _random_kernel(x, None, None, gen)})
bind_overloads("random_", lambda *a, **kw: (
    "random_.from" if len(a) >= 3 or "from_" in kw else
    "random_.to" if len(a) == 2 or "to" in kw else "random_"), function=False)
