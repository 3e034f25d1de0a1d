"""Ops handlers: one class per target implementing the primitives pointwise formulas use.

A formula like `lambda o, x: o.mul(x, o.sigmoid(x))` is evaluated with `o` = a handler. The numpy
handler below computes eagerly on arrays; the compiler's Triton and C++ handlers (other packages)
emit code for the same calls. Keep this set of primitives small and shared.
"""
from __future__ import annotations

import numpy as np

from .. import _dispatch
from . import _special

__all__ = ["PRIMITIVES", "NumpyOps"]

PRIMITIVES = (
    "add sub mul truediv floordiv remainder fmod pow neg abs sign reciprocal sqrt rsqrt "
    "exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan atan2 sinh cosh tanh "
    "asinh acosh atanh sigmoid erf erfc erfinv lgamma digamma floor ceil round trunc "
    "minimum maximum fmin fmax where eq ne lt le gt ge logical_and logical_or logical_xor "
    "logical_not bitwise_and bitwise_or bitwise_xor bitwise_not lshift rshift isnan isinf "
    "isfinite signbit copysign hypot nextafter cast"
).split()


def _rsqrt(x):
    return np.reciprocal(np.sqrt(x))


def _sigmoid(x):
    # 1/(1+exp(-x)) overflows exp for very negative x in float32; the clipped form is exact
    return np.reciprocal(1 + np.exp(-x))


def _floordiv(x, y):
    return np.floor_divide(x, y)


def _truediv(x, y):
    return np.true_divide(x, y)


def _cast(x, dtype):
    return np.asarray(x).astype(dtype.np, copy=False)


def _round(x, decimals=0):
    return np.round(x, decimals)


class NumpyOps:
    """Eager numpy implementations of the primitives (CPU kernels come from these)."""

    add = staticmethod(np.add)
    sub = staticmethod(np.subtract)
    mul = staticmethod(np.multiply)
    truediv = staticmethod(_truediv)
    floordiv = staticmethod(_floordiv)
    remainder = staticmethod(np.remainder)  # Python's sign convention, as torch.remainder
    fmod = staticmethod(np.fmod)
    pow = staticmethod(np.power)
    neg = staticmethod(np.negative)
    abs = staticmethod(np.abs)
    sign = staticmethod(np.sign)
    reciprocal = staticmethod(np.reciprocal)
    sqrt = staticmethod(np.sqrt)
    rsqrt = staticmethod(_rsqrt)
    exp = staticmethod(np.exp)
    exp2 = staticmethod(np.exp2)
    expm1 = staticmethod(np.expm1)
    log = staticmethod(np.log)
    log2 = staticmethod(np.log2)
    log10 = staticmethod(np.log10)
    log1p = staticmethod(np.log1p)
    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    tan = staticmethod(np.tan)
    asin = staticmethod(np.arcsin)
    acos = staticmethod(np.arccos)
    atan = staticmethod(np.arctan)
    atan2 = staticmethod(np.arctan2)
    sinh = staticmethod(np.sinh)
    cosh = staticmethod(np.cosh)
    tanh = staticmethod(np.tanh)
    asinh = staticmethod(np.arcsinh)
    acosh = staticmethod(np.arccosh)
    atanh = staticmethod(np.arctanh)
    sigmoid = staticmethod(_sigmoid)
    erf = staticmethod(_special.erf)
    erfc = staticmethod(_special.erfc)
    erfinv = staticmethod(_special.erfinv)
    lgamma = staticmethod(_special.lgamma)
    digamma = staticmethod(_special.digamma)
    floor = staticmethod(np.floor)
    ceil = staticmethod(np.ceil)
    round = staticmethod(_round)
    trunc = staticmethod(np.trunc)
    minimum = staticmethod(np.minimum)   # propagates NaN, as torch.minimum
    maximum = staticmethod(np.maximum)
    fmin = staticmethod(np.fmin)
    fmax = staticmethod(np.fmax)
    where = staticmethod(np.where)
    eq = staticmethod(np.equal)
    ne = staticmethod(np.not_equal)
    lt = staticmethod(np.less)
    le = staticmethod(np.less_equal)
    gt = staticmethod(np.greater)
    ge = staticmethod(np.greater_equal)
    logical_and = staticmethod(np.logical_and)
    logical_or = staticmethod(np.logical_or)
    logical_xor = staticmethod(np.logical_xor)
    logical_not = staticmethod(np.logical_not)
    bitwise_and = staticmethod(np.bitwise_and)
    bitwise_or = staticmethod(np.bitwise_or)
    bitwise_xor = staticmethod(np.bitwise_xor)
    bitwise_not = staticmethod(np.invert)
    lshift = staticmethod(np.left_shift)
    rshift = staticmethod(np.right_shift)
    isnan = staticmethod(np.isnan)
    isinf = staticmethod(np.isinf)
    isfinite = staticmethod(np.isfinite)
    signbit = staticmethod(np.signbit)
    copysign = staticmethod(np.copysign)
    hypot = staticmethod(np.hypot)
    nextafter = staticmethod(np.nextafter)
    cast = staticmethod(_cast)


_dispatch.NP = NumpyOps()
