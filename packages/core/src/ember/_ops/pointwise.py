"""Pointwise ops: each one formula over an ops handler (`o`), promotion kind and dtype support.

The numpy kernel, the Triton kernel and the compiler's fused code all come from the formula.
"""
from __future__ import annotations

import math

from .. import _dtype as D
from ._registry import FUNCTIONS, complex_vjp, defop


def _where(c, x, y):
    return FUNCTIONS["where"](c, x, y)


def _zeros_like(g):
    return FUNCTIONS["zeros_like"](g)


# ---- arithmetic -------------------------------------------------------------------------------


def _add(o, x, y, alpha):
    return o.add(x, y if alpha == 1 else o.mul(y, alpha))


def _sub(o, x, y, alpha):
    return o.sub(x, y if alpha == 1 else o.mul(y, alpha))


def _check_alpha(common, alpha):
    if isinstance(alpha, bool) and common is not D.bool:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if isinstance(alpha, float) and not (common.is_floating_point or common.is_complex):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating "
                           "point number.")


def _check_add(common, x, y, alpha):
    if alpha.__class__ is not int:  # the hot path: add(x, y) with alpha=1 costs one test
        _check_alpha(common, alpha)


def _is_bool(v) -> bool:
    return getattr(v, "dtype", None) is D.bool or isinstance(v, bool)


def _check_sub(common, x, y, alpha):
    if common is not D.bool and alpha.__class__ is int and x.__class__ is y.__class__ and \
            getattr(x, "dtype", None) is common and y.dtype is not D.bool:
        return  # the hot path: two tensors, neither bool (x of the non-bool common dtype)
    if _is_bool(x) and _is_bool(y):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if _is_bool(x) or _is_bool(y):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")
    _check_alpha(common, alpha)


# vjps: (grad, result, *args) -> one grad per tensor arg; the engine undoes broadcasting
defop("add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", pointwise=_add,
      check=_check_add,
      vjp=lambda g, out, x, y, alpha: (g, g if alpha == 1 else g * alpha))
defop("sub(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", pointwise=_sub,
      check=_check_sub,
      vjp=lambda g, out, x, y, alpha: (g, -g if alpha == 1 else g * -alpha),
      aliases=("subtract",))
def _is_tensor(v) -> bool:
    from .._tensor import Tensor
    return isinstance(v, Tensor)


def _wants_grad(v) -> bool:
    return _is_tensor(v) and v.requires_grad


# only operands that require grad get one: `att * scale` computes g * scale, not g * att
defop("mul(Tensor self, Tensor other) -> Tensor", pointwise=lambda o, x, y: o.mul(x, y),
      vjp=lambda g, out, x, y: (g * y if _wants_grad(x) else None,
                                g * x if _wants_grad(y) else None), aliases=("multiply",))
defop("rsub(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", inplace=False,
      pointwise=lambda o, x, y, alpha: _sub(o, y, x, alpha), check=_check_sub,
      vjp=lambda g, out, x, y, alpha: (-g if alpha == 1 else g * -alpha, g))


def _div(o, x, y, rounding_mode):
    if rounding_mode == "trunc":
        return o.truncdiv(x, y)
    if rounding_mode == "floor":
        return o.floordiv(x, y)
    return o.truediv(x, y)


def _div_promote(x, y, rounding_mode):
    # true division makes integers float; trunc / floor division keeps the common dtype
    return "int_to_float" if rounding_mode is None else "default"


def _check_div(common, x, y, rounding_mode):
    if rounding_mode not in (None, "trunc", "floor"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{rounding_mode}'")
    if rounding_mode is not None and common is D.bool:
        raise NotImplementedError(f"\"div_{rounding_mode}_cpu\" not implemented for 'Bool'")


def _div_vjp(g, out, x, y, rounding_mode):
    if rounding_mode is not None:  # floor / trunc division is piecewise constant
        return _zeros_like(g), _zeros_like(g)
    return g / y, (-g * x / (y * y) if _is_tensor(y) else None)


def _pow_vjp(g, out, x, y):
    from .._tensor import Tensor
    gx = gy = None
    if isinstance(x, Tensor) and x.requires_grad:
        gx = _where(y == 0, 0.0, g * y * x ** (y - 1)) if isinstance(y, Tensor) else (
            _zeros_like(g) if y == 0 else g * y * x ** (y - 1))
    if isinstance(y, Tensor) and y.requires_grad:
        # 0 ** y with y >= 0 has gradient 0 w.r.t. y (log 0 would give nan)
        safe = out * FUNCTIONS["log"](x)
        gy = g * _where(x == 0, _where(y >= 0, 0.0, safe), safe)
    return gx, gy


defop("div(Tensor self, Tensor other, *, str? rounding_mode=None) -> Tensor", pointwise=_div,
      promote=_div_promote, check=_check_div, vjp=_div_vjp, aliases=("divide",))
defop("true_divide(Tensor self, Tensor other) -> Tensor", promote="int_to_float",
      pointwise=lambda o, x, y: o.truediv(x, y),
      vjp=lambda g, out, x, y: _div_vjp(g, out, x, y, None))
defop("floor_divide(Tensor self, Tensor other) -> Tensor", supports="if",
      pointwise=lambda o, x, y: o.floordiv(x, y),
      vjp=lambda g, out, x, y: (_zeros_like(g), _zeros_like(g)))
defop("remainder(Tensor self, Tensor other) -> Tensor", supports="if",
      pointwise=lambda o, x, y: o.remainder(x, y),
      vjp=lambda g, out, x, y: (g, -g * FUNCTIONS["floor_divide"](x, y)))
defop("fmod(Tensor self, Tensor other) -> Tensor", supports="if",
      pointwise=lambda o, x, y: o.fmod(x, y),
      vjp=lambda g, out, x, y: (g, -g * FUNCTIONS["div"](x, y, rounding_mode="trunc")))
def _check_pow(common, x, y):
    # only a Python negative integer exponent is refused; elementwise it truncates
    if common._cat <= 1 and isinstance(y, int) and y < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if common is D.bool and hasattr(y, "dtype"):  # bool ** True is fine, bool ** tensor is not
        raise NotImplementedError("\"pow\" not implemented for 'Bool'")


defop("pow(Tensor self, Tensor exponent) -> Tensor", pointwise=lambda o, x, y: o.pow(x, y),
      promote_args=("self", "exponent"), check=_check_pow, vjp=_pow_vjp)
def _check_neg(common, x):
    if common is D.bool:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you "
                           "are trying to invert a mask, use the `~` or `logical_not()` operator "
                           "instead.")


defop("neg(Tensor self) -> Tensor", check=_check_neg, pointwise=lambda o, x: o.neg(x),
      vjp=lambda g, out, x: (-g,), aliases=("negative",))
defop("abs(Tensor self) -> Tensor", pointwise=lambda o, x: o.abs(x), promote="complex_to_float",
      supports="ifc",
      vjp=complex_vjp(lambda g, out, x: (g * x.sgn(),)), aliases=("absolute",))
defop("sign(Tensor self) -> Tensor", supports="bif", pointwise=lambda o, x: o.sign(x),
      vjp=lambda g, out, x: (_zeros_like(g),))
defop("reciprocal(Tensor self) -> Tensor", promote="int_to_float",
      pointwise=lambda o, x: o.reciprocal(x), vjp=lambda g, out, x: (-g * out * out,))
# square is pow(x, 2): a bool tensor squares to int64, as in PyTorch
defop("square(Tensor self) -> Tensor", decomp=lambda x: FUNCTIONS["pow"](x, 2), inplace=True)

# ---- exp / log / powers ------------------------------------------------------------------------
_LN2, _LN10 = math.log(2.0), math.log(10.0)
_UNARY_VJP = {  # name -> vjp(g, out, x) -> (grad,)
    "exp": lambda g, out, x: (g * out,),
    "exp2": lambda g, out, x: (g * out * _LN2,),
    "expm1": lambda g, out, x: (g * (out + 1),),
    "log": lambda g, out, x: (g / x,),
    "log2": lambda g, out, x: (g / (x * _LN2),),
    "log10": lambda g, out, x: (g / (x * _LN10),),
    "log1p": lambda g, out, x: (g / (x + 1),),
    "sqrt": lambda g, out, x: (g / (out * 2),),
    "rsqrt": lambda g, out, x: (g * out * out * out * -0.5,),
    "sin": lambda g, out, x: (g * x.cos(),),
    "cos": lambda g, out, x: (g * -x.sin(),),
    "tan": lambda g, out, x: (g * (out * out + 1),),
    "sinh": lambda g, out, x: (g * x.cosh(),),
    "cosh": lambda g, out, x: (g * x.sinh(),),
    "tanh": lambda g, out, x: (g * (1 - out * out),),
    "erf": lambda g, out, x: (g * (-x * x).exp() * (2 / math.sqrt(math.pi)),),
    "erfc": lambda g, out, x: (g * (-x * x).exp() * (-2 / math.sqrt(math.pi)),),
    "erfinv": lambda g, out, x: (g * (out * out).exp() * (math.sqrt(math.pi) / 2),),
    "lgamma": lambda g, out, x: (g * x.digamma(),),
    "digamma": lambda g, out, x: (g * x.polygamma(1),),
    "asin": lambda g, out, x: (g * (1 - x * x).rsqrt(),),
    "acos": lambda g, out, x: (g * -(1 - x * x).rsqrt(),),
    "atan": lambda g, out, x: (g / (x * x + 1),),
    "asinh": lambda g, out, x: (g * (x * x + 1).rsqrt(),),
    "acosh": lambda g, out, x: (g * ((x - 1) * (x + 1)).rsqrt(),),
    "atanh": lambda g, out, x: (g / (1 - x * x),),
}
for _name in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin",
              "cos", "tan", "sinh", "cosh", "tanh", "erf", "erfc", "erfinv", "lgamma",
              "digamma"):
    defop(f"{_name}(Tensor self) -> Tensor", promote="int_to_float", vjp=_UNARY_VJP.get(_name),
          pointwise=(lambda n: lambda o, x: getattr(o, n)(x))(_name))
for _name, _prim in (("asin", "asin"), ("acos", "acos"), ("atan", "atan"), ("asinh", "asinh"),
                     ("acosh", "acosh"), ("atanh", "atanh")):
    defop(f"{_name}(Tensor self) -> Tensor", promote="int_to_float", vjp=_UNARY_VJP[_name],
          pointwise=(lambda n: lambda o, x: getattr(o, n)(x))(_prim),
          aliases=("arc" + _name[1:],))
defop("sigmoid(Tensor self) -> Tensor", promote="int_to_float", functional="sigmoid",
      pointwise=lambda o, x: o.sigmoid(x), vjp=lambda g, out, x: (g * out * (1 - out),))


def _atan2_vjp(g, out, x, y):
    d = x * x + y * y
    return g * y / d, g * -x / d


defop("atan2(Tensor self, Tensor other) -> Tensor", promote="int_to_float",
      pointwise=lambda o, x, y: o.atan2(x, y), vjp=_atan2_vjp, aliases=("arctan2",))

# ---- activations ---------------------------------------------------------------------------------
# relu's (and threshold's) backward as one pass, PyTorch's threshold_backward: 0 where
# self <= threshold (a NaN passes the gradient through), else grad_output
threshold_backward = defop(
    "threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor",
    function=False, method=False, inplace=False, out=False, differentiable=("grad_output",),
    pointwise=lambda o, g, x, th: o.where(o.le(x, th), 0, g),
    vjp=lambda gg, out, g, x, th: (threshold_backward(gg, x, th),))
defop("relu(Tensor self) -> Tensor", supports="if", functional="relu", functional_inplace=True,
      pointwise=lambda o, x: o.maximum(x, 0),
      vjp=lambda g, out, x: (threshold_backward(g, out, 0),))


def _gelu(o, x, approximate):
    if approximate == "tanh":
        inner = o.mul(math.sqrt(2 / math.pi), o.add(x, o.mul(0.044715, o.mul(x, o.mul(x, x)))))
        return o.mul(o.mul(0.5, x), o.add(1, o.tanh(inner)))
    return o.mul(o.mul(0.5, x), o.add(1, o.erf(o.mul(x, 1 / math.sqrt(2)))))


def _gelu_vjp(g, out, x, approximate):
    if approximate == "tanh":
        k, c = math.sqrt(2 / math.pi), 0.044715
        t = ((x + x * x * x * c) * k).tanh()
        return (g * ((t + 1) * 0.5 + x * 0.5 * (1 - t * t) * k * (x * x * (3 * c) + 1)),)
    # one fused op (PyTorch's gelu_backward): its formula runs in cache-sized chunks
    return (_gelu_backward(g, x, approximate),)


_SQRT1_2 = 1 / math.sqrt(2)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


def _gelu_bwd(o, g, x, approximate):
    """g * (cdf(x) + x * pdf(x)), the derivative of gelu(approximate='none')."""
    cdf = o.mul(o.add(o.erf(o.mul(x, _SQRT1_2)), 1), 0.5)
    pdf = o.mul(o.exp(o.mul(o.mul(x, x), -0.5)), _INV_SQRT_2PI)
    return o.mul(g, o.add(cdf, o.mul(x, pdf)))


def _gelu_bwd_vjp(gg, out, g, x, approximate):
    cdf = ((x * _SQRT1_2).erf() + 1) * 0.5
    pdf = (x * x * -0.5).exp() * _INV_SQRT_2PI
    # d/dx (cdf + x * pdf) = 2 * pdf - x^2 * pdf
    return gg * (cdf + x * pdf), gg * g * pdf * (2 - x * x)


def _check_gelu_bwd(common, g, x, approximate):
    if approximate != "none":  # the tanh form differentiates through gelu's own vjp formula
        raise RuntimeError(f"gelu_backward: approximate='{approximate}' is not fused")


def _silu_vjp(g, out, x):
    s = x.sigmoid()
    return (g * s * (x * (1 - s) + 1),)


defop("gelu(Tensor self, *, str approximate='none') -> Tensor", supports="f",
      functional="gelu", pointwise=_gelu, vjp=_gelu_vjp)
_gelu_backward = defop("gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none')"
                       " -> Tensor", supports="f", function=False, method=False, inplace=False,
                       out=False, pointwise=_gelu_bwd, check=_check_gelu_bwd, vjp=_gelu_bwd_vjp)
defop("silu(Tensor self) -> Tensor", supports="f", functional="silu", method=False,
      functional_inplace=True, function=False,
      pointwise=lambda o, x: o.mul(x, o.sigmoid(x)), vjp=_silu_vjp)

# ---- comparison ----------------------------------------------------------------------------------
for _name, _alias in (("eq", None), ("ne", "not_equal"), ("lt", "less"), ("le", "less_equal"),
                      ("gt", "greater"), ("ge", "greater_equal")):
    defop(f"{_name}(Tensor self, Tensor other) -> Tensor", promote="bool",
          pointwise=(lambda n: lambda o, x, y: getattr(o, n)(x, y))(_name),
          aliases=(_alias,) if _alias else ())

# ---- selection -----------------------------------------------------------------------------------
def _check_where(common, c, x, y):
    if getattr(c, "dtype", D.bool) is not D.bool:
        from .._dispatch import torch_name
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {torch_name(c.dtype)}")


defop("where(Tensor condition, Tensor self, Tensor other) -> Tensor", method=False,
      check=_check_where,
      promote_args=("self", "other"), inplace=False, differentiable=("self", "other"),
      pointwise=lambda o, c, x, y: o.where(c, x, y),
      vjp=lambda g, out, c, x, y: (_where(c, g, 0.0), _where(c, 0.0, g)))


def _minmax_vjp(g, x, y, x_wins):
    # ties split the gradient evenly, as PyTorch does
    half = g * 0.5
    return (_where(x == y, half, _where(x_wins, g, 0.0)),
            _where(x == y, half, _where(x_wins, 0.0, g)))


defop("maximum(Tensor self, Tensor other) -> Tensor", supports="bif", inplace=False,
      pointwise=lambda o, x, y: o.maximum(x, y),
      vjp=lambda g, out, x, y: _minmax_vjp(g, x, y, x > y))
defop("minimum(Tensor self, Tensor other) -> Tensor", supports="bif", inplace=False,
      pointwise=lambda o, x, y: o.minimum(x, y),
      vjp=lambda g, out, x, y: _minmax_vjp(g, x, y, x < y))

# the rest of the pointwise family, one file each
from . import activation, arith, logical  # noqa: E402,F401
