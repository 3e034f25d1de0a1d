"""Pointwise ops: each one formula over an ops handler (`o`), promotion kind and dtype support.

The numpy kernel, the Triton kernel and the compiler's fused code all come from the formula.
"""
from __future__ import annotations

import math

from ._registry import defop

# ---- arithmetic -------------------------------------------------------------------------------


def _add(o, x, y, alpha):
    return o.add(x, y if alpha == 1 else o.mul(y, alpha))


def _sub(o, x, y, alpha):
    return o.sub(x, y if alpha == 1 else o.mul(y, alpha))


defop("add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", pointwise=_add)
defop("sub(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", pointwise=_sub,
      aliases=("subtract",))
defop("mul(Tensor self, Tensor other) -> Tensor", pointwise=lambda o, x, y: o.mul(x, y),
      aliases=("multiply",))
defop("rsub(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", inplace=False,
      pointwise=lambda o, x, y, alpha: _sub(o, y, x, alpha))


def _div(o, x, y, rounding_mode):
    q = o.truediv(x, y)
    if rounding_mode == "trunc":
        return o.trunc(q)
    if rounding_mode == "floor":
        return o.floordiv(x, y)
    return q


def _div_promote(args):
    return "int_to_float"


defop("div(Tensor self, Tensor other, *, str? rounding_mode=None) -> Tensor", pointwise=_div,
      promote="int_to_float", aliases=("divide", "true_divide"))
defop("floor_divide(Tensor self, Tensor other) -> Tensor", supports="ifb",
      pointwise=lambda o, x, y: o.floordiv(x, y))
defop("remainder(Tensor self, Tensor other) -> Tensor", supports="if",
      pointwise=lambda o, x, y: o.remainder(x, y))
defop("fmod(Tensor self, Tensor other) -> Tensor", supports="if",
      pointwise=lambda o, x, y: o.fmod(x, y))
defop("pow(Tensor self, Tensor exponent) -> Tensor", pointwise=lambda o, x, y: o.pow(x, y),
      promote_args=("self", "exponent"))
defop("neg(Tensor self) -> Tensor", supports="ifc", pointwise=lambda o, x: o.neg(x),
      aliases=("negative",))
defop("abs(Tensor self) -> Tensor", pointwise=lambda o, x: o.abs(x), promote="complex_to_float",
      aliases=("absolute",))
defop("sign(Tensor self) -> Tensor", supports="bif", pointwise=lambda o, x: o.sign(x))
defop("reciprocal(Tensor self) -> Tensor", promote="int_to_float",
      pointwise=lambda o, x: o.reciprocal(x))
defop("square(Tensor self) -> Tensor", pointwise=lambda o, x: o.mul(x, x))

# ---- exp / log / powers ------------------------------------------------------------------------
for _name in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin",
              "cos", "tan", "sinh", "cosh", "tanh", "erf", "erfc", "erfinv", "lgamma",
              "digamma"):
    defop(f"{_name}(Tensor self) -> Tensor", promote="int_to_float",
          pointwise=(lambda n: lambda o, x: getattr(o, n)(x))(_name))
for _name, _prim in (("asin", "asin"), ("acos", "acos"), ("atan", "atan"), ("asinh", "asinh"),
                     ("acosh", "acosh"), ("atanh", "atanh")):
    defop(f"{_name}(Tensor self) -> Tensor", promote="int_to_float",
          pointwise=(lambda n: lambda o, x: getattr(o, n)(x))(_prim),
          aliases=("arc" + _name[1:],))
defop("sigmoid(Tensor self) -> Tensor", promote="int_to_float",
      pointwise=lambda o, x: o.sigmoid(x))
defop("atan2(Tensor self, Tensor other) -> Tensor", promote="int_to_float",
      pointwise=lambda o, x, y: o.atan2(x, y), aliases=("arctan2",))

# ---- activations ---------------------------------------------------------------------------------
defop("relu(Tensor self) -> Tensor", supports="if", functional="relu",
      pointwise=lambda o, x: o.maximum(x, 0))


def _gelu(o, x, approximate):
    if approximate == "tanh":
        inner = o.mul(math.sqrt(2 / math.pi), o.add(x, o.mul(0.044715, o.mul(x, o.mul(x, x)))))
        return o.mul(o.mul(0.5, x), o.add(1, o.tanh(inner)))
    return o.mul(o.mul(0.5, x), o.add(1, o.erf(o.mul(x, 1 / math.sqrt(2)))))


defop("gelu(Tensor self, *, str approximate='none') -> Tensor", supports="f",
      functional="gelu", pointwise=_gelu)
defop("silu(Tensor self) -> Tensor", supports="f", functional="silu", method=False,
      pointwise=lambda o, x: o.mul(x, o.sigmoid(x)))

# ---- comparison ------------------------------------------------------------------------------------
for _name, _alias in (("eq", None), ("ne", "not_equal"), ("lt", "less"), ("le", "less_equal"),
                      ("gt", "greater"), ("ge", "greater_equal")):
    defop(f"{_name}(Tensor self, Tensor other) -> Tensor", promote="bool",
          pointwise=(lambda n: lambda o, x, y: getattr(o, n)(x, y))(_name),
          aliases=(_alias,) if _alias else ())

# ---- selection --------------------------------------------------------------------------------------
defop("where(Tensor condition, Tensor self, Tensor other) -> Tensor", method=False,
      promote_args=("self", "other"), inplace=False,
      pointwise=lambda o, c, x, y: o.where(c, x, y))
defop("maximum(Tensor self, Tensor other) -> Tensor", supports="bif",
      pointwise=lambda o, x, y: o.maximum(x, y))
defop("minimum(Tensor self, Tensor other) -> Tensor", supports="bif",
      pointwise=lambda o, x, y: o.minimum(x, y))
