"""Pointwise arithmetic beyond the basics of pointwise.py: rounding, clamping, interpolation,
two-argument math (hypot, copysign, xlogy, logaddexp, ...) and float_power.

Each op is one formula over the ops handler `o`; vjps are written in ember ops.
"""
from __future__ import annotations

import math

from .. import _dtype as D
from .._dispatch import torch_name
from ._registry import FUNCTIONS, OPS, complex_vjp, defop

_F = FUNCTIONS  # looked up at call time: every family is registered by then


def _where(c, x, y):
    return _F["where"](c, x, y)


def _zeros(g):
    return _F["zeros_like"](g)


def _is_tensor(v) -> bool:
    return hasattr(v, "_storage")


# ---- identity-like and rounding ----------------------------------------------------------------
def _positive(x):
    if x.dtype is D.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return x._shape, x._stride, x._offset


defop("positive(Tensor(a) self) -> Tensor(a)", view=_positive, tags={"view"},
      vjp=lambda g, out, x: (g,))
@complex_vjp
def _sgn_vjp(g, out, x):
    # sgn(z) = z / |z|: only the part of g orthogonal to sgn turns it (0 for real x, whose
    # sign is piecewise constant); 0 at z = 0, as PyTorch's sgn_backward
    if not x.dtype.is_complex:
        return (_zeros(g),)
    a = x.abs()
    gi = (g - out * (g * out.conj()).real) / a
    return (FUNCTIONS["where"](a == 0, 0, gi),)


defop("sgn(Tensor self) -> Tensor", pointwise=lambda o, x: o.sign(x), vjp=_sgn_vjp)
for _name in ("floor", "ceil", "trunc"):
    defop(f"{_name}(Tensor self) -> Tensor", supports="if",
          pointwise=(lambda n: lambda o, x: getattr(o, n)(x))(_name),
          vjp=lambda g, out, x: (_zeros(g),), aliases=("fix",) if _name == "trunc" else ())
def _check_round(common, x, decimals):
    if decimals != 0 and common._cat == 1:
        raise NotImplementedError(f"\"round_cpu\" not implemented for '{torch_name(common)}'")


defop("round(Tensor self, *, int decimals=0) -> Tensor", supports="if", check=_check_round,
      pointwise=lambda o, x, decimals: o.round(x, decimals),
      vjp=lambda g, out, x, decimals: (_zeros(g),))
defop("frac(Tensor self) -> Tensor", supports="f", pointwise=lambda o, x: o.sub(x, o.trunc(x)),
      vjp=lambda g, out, x: (g,))
defop("deg2rad(Tensor self) -> Tensor", promote="int_to_float", supports="bif",
      pointwise=lambda o, x: o.mul(x, math.pi / 180),
      vjp=lambda g, out, x: (g * (math.pi / 180),))
defop("rad2deg(Tensor self) -> Tensor", promote="int_to_float", supports="bif",
      pointwise=lambda o, x: o.mul(x, 180 / math.pi),
      vjp=lambda g, out, x: (g * (180 / math.pi),))


def _logit(o, x, eps):
    if eps is not None:
        x = o.minimum(o.maximum(x, eps), 1 - eps)
    return o.log(o.truediv(x, o.sub(1, x)))


def _logit_vjp(g, out, x, eps):
    d = g / (x * (1 - x))
    if eps is None:
        return (d,)
    return (_where((x < eps) | (x > 1 - eps), 0.0, d),)


defop("logit(Tensor self, float? eps=None) -> Tensor", promote="int_to_float", supports="bif",
      pointwise=_logit, vjp=_logit_vjp)


# ---- polygamma: PyTorch's signature is polygamma(n, input); the table entry takes self first so
# that Tensor.polygamma(n) and Tensor.polygamma_(n) bind the usual way
def _check_polygamma(common, x, n):
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")


defop("polygamma(Tensor self, int n) -> Tensor", function=False, promote="int_to_float",
      supports="bif", check=_check_polygamma, pointwise=lambda o, x, n: o.polygamma(x, n),
      vjp=lambda g, out, x, n: (g * x.polygamma(n + 1),))


def polygamma(n, input, *, out=None):  # noqa: A002 - PyTorch's names
    """The n-th derivative of digamma.

    >>> import ember
    >>> round(ember.polygamma(1, ember.tensor([1.0])).item(), 6)  # pi^2 / 6
    1.644934
    """
    return OPS["polygamma"](input, n, out=out)


FUNCTIONS["polygamma"] = polygamma


# ---- clamp --------------------------------------------------------------------------------------
def _clamp(o, x, lo, hi):
    if lo is not None:
        x = o.maximum(x, lo)
    if hi is not None:
        x = o.minimum(x, hi)
    return x


def _check_clamp(common, x, lo, hi):
    if lo is None and hi is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")


def _clamp_vjp(g, out, x, lo, hi):
    # the result is x inside [lo, hi], lo below it, and hi above it or when lo > hi
    inside = None
    if lo is not None:
        inside = x >= lo
    if hi is not None:
        inside = (x <= hi) if inside is None else inside & (x <= hi)
    glo = ghi = None
    if _is_tensor(lo):
        glo = _where((x < lo) & (lo <= hi) if hi is not None else x < lo, g, 0.0)
    if _is_tensor(hi):
        ghi = _where((x > hi) | (lo > hi) if lo is not None else x > hi, g, 0.0)
    return _where(inside, g, 0.0), glo, ghi


defop("clamp(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", supports="if",
      promote_args=("self", "min", "max"), pointwise=_clamp, check=_check_clamp,
      vjp=_clamp_vjp, aliases=("clip",))
defop("clamp_min(Tensor self, Tensor min) -> Tensor", supports="bif",
      pointwise=lambda o, x, lo: o.maximum(x, lo),
      vjp=lambda g, out, x, lo: _clamp_vjp(g, out, x, lo, None)[:2])
defop("clamp_max(Tensor self, Tensor max) -> Tensor", supports="bif",
      pointwise=lambda o, x, hi: o.minimum(x, hi),
      vjp=lambda g, out, x, hi: _clamp_vjp(g, out, x, None, hi)[::2])


# ---- two-argument math ---------------------------------------------------------------------------
def _fminmax_vjp(g, x, y, x_wins):
    # fmin/fmax ignore a NaN operand: the gradient goes to the other one
    xw = x_wins | y.isnan() if _is_tensor(y) else x_wins
    return _where(xw, g, 0.0), _where(xw, 0.0, g)


defop("fmax(Tensor self, Tensor other) -> Tensor", supports="bif", inplace=False,
      pointwise=lambda o, x, y: o.fmax(x, y),
      vjp=lambda g, out, x, y: _fminmax_vjp(g, x, y, x >= y))
defop("fmin(Tensor self, Tensor other) -> Tensor", supports="bif", inplace=False,
      pointwise=lambda o, x, y: o.fmin(x, y),
      vjp=lambda g, out, x, y: _fminmax_vjp(g, x, y, x <= y))
defop("hypot(Tensor self, Tensor other) -> Tensor", supports="f",
      pointwise=lambda o, x, y: o.hypot(x, y),
      vjp=lambda g, out, x, y: (g * x / out, g * y / out))


def _copysign_vjp(g, out, x, y):
    ratio = _where(x == 0, 0.0, out / x)
    return g * ratio, _zeros(g)


defop("copysign(Tensor self, Tensor other) -> Tensor", promote="int_to_float", supports="bif",
      pointwise=lambda o, x, y: o.copysign(x, y), vjp=_copysign_vjp)
# PyTorch's derivative: identity in self (one ulp is below any finite difference), 0 in other
defop("nextafter(Tensor self, Tensor other) -> Tensor", supports="f",
      pointwise=lambda o, x, y: o.nextafter(x, y), vjp=lambda g, out, x, y: (g, _zeros(g)))


def _xlogy(o, x, y):
    # 0 * log(0) is 0, but a NaN y still gives NaN
    r = o.where(o.eq(x, 0), 0, o.mul(x, o.log(y)))
    return o.where(o.isnan(y), y, r)


def _xlogy_vjp(g, out, x, y):
    gx = _where((x == 0) & (y <= 0), 0.0, g * y.log()) if _is_tensor(y) else g * math.log(y)
    return gx, g * x / y


defop("xlogy(Tensor self, Tensor other) -> Tensor", promote="int_to_float", supports="bif",
      pointwise=_xlogy, vjp=_xlogy_vjp)


def _logaddexp(o, x, y, base2):
    m = o.maximum(x, y)
    d = o.neg(o.abs(o.sub(x, y)))
    r = o.add(m, o.mul(o.log1p(o.exp2(d)), 1 / math.log(2))) if base2 else o.add(
        m, o.log1p(o.exp(d)))
    # equal infinities: x - y is NaN, but the answer is that infinity
    return o.where(o.logical_and(o.isinf(m), o.eq(x, y)), m, r)


def _logaddexp_vjp(g, out, x, y, base2):
    fx = (y - x).exp2() if base2 else (y - x).exp()
    fy = (x - y).exp2() if base2 else (x - y).exp()
    return g / (fx + 1), g / (fy + 1)


defop("logaddexp(Tensor self, Tensor other) -> Tensor", supports="f", inplace=False,
      pointwise=lambda o, x, y: _logaddexp(o, x, y, False),
      vjp=lambda g, out, x, y: _logaddexp_vjp(g, out, x, y, False))
defop("logaddexp2(Tensor self, Tensor other) -> Tensor", supports="f", inplace=False,
      pointwise=lambda o, x, y: _logaddexp(o, x, y, True),
      vjp=lambda g, out, x, y: _logaddexp_vjp(g, out, x, y, True))


# ---- interpolation and fused multiply-add ------------------------------------------------------
_C_NAMES = {D.float32: "float", D.float64: "double", D.float16: "c10::Half",
            D.bfloat16: "c10::BFloat16", D.complex64: "c10::complex<float>",
            D.complex128: "c10::complex<double>"}


def _lerp(o, x, end, w):
    # two forms, each exact at its end (PyTorch's choice): w = 1 gives end exactly
    d = o.sub(end, x)
    return o.where(o.lt(o.abs(w), 0.5), o.add(x, o.mul(w, d)), o.sub(end, o.mul(d, o.sub(1, w))))


def _check_lerp(common, x, end, w):
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        kind = "tensor" if _is_tensor(w) else "scalar"
        raise NotImplementedError(f"\"lerp_kernel_{kind}\" not implemented for "
                                  f"'{torch_name(x.dtype)}'")
    for name, v in (("end", end), ("weight", w)):
        if _is_tensor(v) and v.dtype is not x.dtype:
            raise RuntimeError(f"expected dtype {_C_NAMES.get(x.dtype, x.dtype)} for `{name}` but "
                               f"got dtype {_C_NAMES.get(v.dtype, v.dtype)}")


def _lerp_vjp(g, out, x, end, w):
    gw = g * (end - x) if _is_tensor(w) else None
    return g * (1 - w), g * w, gw


defop("lerp(Tensor self, Tensor end, Tensor weight) -> Tensor", supports="fc",
      pointwise=_lerp, check=_check_lerp, vjp=_lerp_vjp)


def _check_addcdiv(common, x, t1, t2, value):
    if (not t1.dtype.is_floating_point and not t1.dtype.is_complex
            and not t2.dtype.is_floating_point and not t2.dtype.is_complex):
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future  release "
            "addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv "
            "behavior can be implemented as (input + value * torch.trunc(tensor1 / tensor2))"
            ".to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) for "
            "float inputs. The future addcdiv behavior is just the latter implementation: "
            "(input + value * tensor1 / tensor2), for all dtypes.")


def _check_addcmul(common, x, t1, t2, value):
    if isinstance(value, float) and common._cat <= 1:
        raise RuntimeError("For integral input tensors, argument value must not be a floating "
                           "point number.")


defop("addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
      pointwise=lambda o, x, a, b, value: o.add(x, o.mul(o.mul(a, b), value)),
      check=_check_addcmul, supports="ifc",
      vjp=lambda g, out, x, a, b, value: (g, g * b * value, g * a * value))
defop("addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
      pointwise=lambda o, x, a, b, value: o.add(x, o.mul(o.truediv(a, b), value)),
      check=_check_addcdiv,
      vjp=lambda g, out, x, a, b, value: (g, g * value / b, -g * value * a / (b * b)))


# ---- float_power: pow computed in double (or complex double) ----------------------------------
def _float_power_dtype(x, y):
    cplx = any(_is_tensor(v) and v.dtype.is_complex or isinstance(v, complex) for v in (x, y))
    return D.complex128 if cplx else D.float64


def _float_power(x, y):
    dt = _float_power_dtype(x, y)
    conv = complex if dt is D.complex128 else float
    return _F["pow"](*[v.to(dt) if _is_tensor(v) else conv(v) for v in (x, y)])


def _float_power_(x, y):
    dt = _float_power_dtype(x, y)
    if x.dtype is not dt:
        raise RuntimeError(f"the base given to float_power_ has dtype {torch_name(x.dtype)} but "
                           f"the operation's result requires dtype {torch_name(dt)}")
    # pow_ rather than copy_(pow(x, y)): pow saves x for backward, and copy_ would overwrite it
    return x.pow_(y.to(dt) if _is_tensor(y) else (complex if dt is D.complex128 else float)(y))


defop("float_power(Tensor self, Tensor exponent) -> Tensor", decomp=_float_power)
_float_power_fn = FUNCTIONS["float_power"]


def float_power(input, exponent, *, out=None):  # noqa: A002 - PyTorch's names
    """pow computed in float64 (complex128 for complex inputs); out= must have that dtype.

    >>> import ember
    >>> ember.float_power(ember.tensor([2]), 2)
    tensor([4.], dtype=ember.float64)
    """
    dt = _float_power_dtype(input, exponent)
    if out is not None and out.dtype is not dt:
        raise RuntimeError(f"the output given to float_power has dtype {torch_name(out.dtype)} "
                           f"but the operation's result requires dtype {torch_name(dt)}")
    return _float_power_fn(input, exponent, out=out)


FUNCTIONS["float_power"] = float_power
defop("float_power_(Tensor(a!) self, Tensor exponent) -> Tensor(a!)", function=False,
      decomp=_float_power_)
