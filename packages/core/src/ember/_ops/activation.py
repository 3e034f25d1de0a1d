"""Activation functions as pointwise ops (relu, gelu and silu live in pointwise.py).

Schemas are the `ember.nn.functional` signatures; `functional_inplace=True` adds PyTorch's
trailing `inplace=False` argument there. Most exist only in nn.functional (function=False).
"""
from __future__ import annotations

from .. import _dtype as D
from ._registry import FUNCTIONS, NN_FUNCTIONAL, OPS, defop

_F = FUNCTIONS
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _where(c, x, y):
    return _F["where"](c, x, y)


def _fonly(schema, **kw):
    """An activation bound only as ember.nn.functional.<name> (as in PyTorch)."""
    name = schema[:schema.index("(")]
    kw.setdefault("supports", "f")
    return defop(schema, function=False, method=False, functional=name, **kw)


def _check_threshold(common, x, threshold, value):
    if common._cat == 1:  # integer: the value must fit the dtype
        lo, hi = D.iinfo(common).min, D.iinfo(common).max
        if not lo <= value <= hi:
            cname = {D.uint8: "uint8_t", D.int8: "int8_t", D.int16: "int16_t",
                     D.int32: "int", D.int64: "int64_t"}[common]
            raise RuntimeError(f"value cannot be converted to type {cname} without overflow")


def _clamp(o, x, lo, hi):
    return o.minimum(o.maximum(x, lo), hi)


def _check_hardtanh(common, x, *scalars):
    if x.dtype is D.bool:
        raise RuntimeError("Bool inputs not supported for hardtanh")


# relu6 / hardtanh / threshold keep the input's dtype: their scalars are cast to it
_fonly("relu6(Tensor self) -> Tensor", functional_inplace=True, supports="bif",
       promote_args=("self",), check=_check_hardtanh,
       pointwise=lambda o, x: _clamp(o, x, 0, 6),
       vjp=lambda g, out, x: (_where((x > 0) & (x < 6), g, 0.0),))
_fonly("hardtanh(Tensor self, Scalar min_val=-1.0, Scalar max_val=1.0) -> Tensor",
       functional_inplace=True, supports="bif", promote_args=("self",), check=_check_hardtanh,
       pointwise=lambda o, x, lo, hi: _clamp(o, x, lo, hi),
       vjp=lambda g, out, x, lo, hi: (_where((x > lo) & (x < hi), g, 0.0),))
_fonly("elu(Tensor self, Scalar alpha=1.0) -> Tensor", functional_inplace=True,
       pointwise=lambda o, x, a: o.where(o.gt(x, 0), x, o.mul(o.expm1(x), a)),
       vjp=lambda g, out, x, a: (_where(x > 0, g, g * (out + a)),))
defop("selu(Tensor self) -> Tensor", method=False, functional="selu", functional_inplace=True,
      supports="f",
      pointwise=lambda o, x: o.mul(o.where(o.gt(x, 0), x, o.mul(o.expm1(x), _SELU_ALPHA)),
                                   _SELU_SCALE),
      vjp=lambda g, out, x: (_where(x > 0, g * _SELU_SCALE,
                                    g * (out + _SELU_SCALE * _SELU_ALPHA)),))
defop("celu(Tensor self, Scalar alpha=1.0) -> Tensor", method=False, functional="celu",
      functional_inplace=True, supports="f",
      pointwise=lambda o, x, a: o.where(o.gt(x, 0), x, o.mul(o.expm1(o.truediv(x, a)), a)),
      vjp=lambda g, out, x, a: (_where(x > 0, g, g * (out / a + 1)),))
_fonly("leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor", functional_inplace=True,
       pointwise=lambda o, x, s: o.where(o.gt(x, 0), x, o.mul(x, s)),
       vjp=lambda g, out, x, s: (_where(x > 0, g, g * s),))
_fonly("hardsigmoid(Tensor self) -> Tensor", functional_inplace=True,
       pointwise=lambda o, x: o.truediv(_clamp(o, o.add(x, 3), 0, 6), 6),
       vjp=lambda g, out, x: (_where((x > -3) & (x < 3), g / 6, 0.0),))
_fonly("hardswish(Tensor self) -> Tensor", functional_inplace=True,
       pointwise=lambda o, x: o.mul(x, o.truediv(_clamp(o, o.add(x, 3), 0, 6), 6)),
       vjp=lambda g, out, x: (_where(x < -3, 0.0, _where(x <= 3, g * (x / 3 + 0.5), g)),))
defop("hardshrink(Tensor self, Scalar lambd=0.5) -> Tensor", functional="hardshrink",
      supports="f", inplace=False,
      pointwise=lambda o, x, lam: o.where(o.logical_and(o.ge(x, -lam), o.le(x, lam)), 0, x),
      vjp=lambda g, out, x, lam: (_where((x >= -lam) & (x <= lam), 0.0, g),))
_fonly("softshrink(Tensor self, Scalar lambd=0.5) -> Tensor", inplace=False,
       pointwise=lambda o, x, lam: o.where(o.gt(x, lam), o.sub(x, lam),
                                           o.where(o.lt(x, -lam), o.add(x, lam), 0)),
       vjp=lambda g, out, x, lam: (_where(x.abs() > lam, g, 0.0),))
_fonly("tanhshrink(Tensor self) -> Tensor", inplace=False, supports="if", promote="int_to_float",
       pointwise=lambda o, x: o.sub(x, o.tanh(x)),
       vjp=lambda g, out, x: (g * x.tanh() * x.tanh(),))
defop("threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor", method=False,
      functional="threshold", functional_inplace=True, supports="if", promote_args=("self",),
      check=_check_threshold,
      pointwise=lambda o, x, th, v: o.where(o.gt(x, th), x, v),
      vjp=lambda g, out, x, th, v: (OPS["threshold_backward"](g, x, th),))
_fonly("logsigmoid(Tensor self) -> Tensor", inplace=False,
       # min(x, 0) - log1p(exp(-|x|)): no overflow on either side
       pointwise=lambda o, x: o.sub(o.minimum(x, 0), o.log1p(o.exp(o.neg(o.abs(x))))),
       vjp=lambda g, out, x: (g * (-x).sigmoid(),))
_fonly("softsign(Tensor self) -> Tensor", inplace=False, supports="if", promote="int_to_float",
       pointwise=lambda o, x: o.truediv(x, o.add(o.abs(x), 1)),
       vjp=lambda g, out, x: (g / ((x.abs() + 1) * (x.abs() + 1)),))


def _softplus(o, x, beta, threshold):
    # linear above the threshold, where log1p(exp(.)) would overflow or round to x anyway
    bx = o.mul(x, beta)
    return o.where(o.gt(bx, threshold), x, o.truediv(o.log1p(o.exp(bx)), beta))


_fonly("softplus(Tensor self, Scalar beta=1.0, Scalar threshold=20.0) -> Tensor", inplace=False,
       pointwise=_softplus,
       vjp=lambda g, out, x, beta, th: (_where(x * beta > th, g, g * (x * beta).sigmoid()),))


def _mish_vjp(g, out, x):
    t = (x.exp().log1p()).tanh()
    return (g * (t + x * (1 - t * t) * x.sigmoid()),)


_fonly("mish(Tensor self) -> Tensor", functional_inplace=True,
       pointwise=lambda o, x: o.mul(x, o.tanh(o.log1p(o.exp(x)))), vjp=_mish_vjp)

# deprecated nn.functional spellings of table ops
NN_FUNCTIONAL["tanh"] = _F["tanh"]
