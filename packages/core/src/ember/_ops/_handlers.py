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
    "add sub mul truediv floordiv truncdiv remainder fmod pow neg abs sign reciprocal sqrt rsqrt "
    "exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan atan2 sinh cosh tanh "
    "asinh acosh atanh sigmoid erf erfc erfinv lgamma digamma polygamma floor ceil round trunc "
    "minimum maximum fmin fmax where eq ne lt le gt ge logical_and logical_or logical_xor "
    "logical_not bitwise_and bitwise_or bitwise_xor bitwise_not lshift rshift isnan isinf "
    "isfinite signbit copysign hypot nextafter cast"
).split()


def _rsqrt(x):
    return np.reciprocal(np.sqrt(x))


def _sigmoid(x):
    # exp(-x) overflows to inf for very negative x and 1/(1+inf) is the exact limit 0
    return np.reciprocal(1 + np.exp(-x))


def _is_int(x) -> bool:
    return np.asarray(x).dtype.kind in "iub"


def _check_int_divisor(x, y):
    # integer division by zero is an error in PyTorch's CPU kernels; a float operand (a float
    # tensor divided by the Python int 0 included) makes it float division: inf/nan
    if _is_int(y) and _is_int(x) and not np.all(y):
        raise RuntimeError("ZeroDivisionError")


def _floordiv(x, y):
    _check_int_divisor(x, y)
    return np.floor_divide(x, y)


def _truncdiv(x, y):
    """Division rounding toward zero (C's integer `/`; trunc(x / y) for floats)."""
    if not _is_int(x) or not _is_int(y):
        return np.trunc(np.true_divide(x, y))
    _check_int_divisor(x, y)
    q = np.floor_divide(x, y)
    # floor and trunc differ when the signs differ and the division is inexact
    fix = (np.remainder(x, y) != 0) & ((x < 0) != (y < 0))
    return q + fix.astype(q.dtype)


def _remainder(x, y):
    _check_int_divisor(x, y)
    return np.remainder(x, y)  # Python's sign convention, as torch.remainder


def _fmod(x, y):
    _check_int_divisor(x, y)
    return np.fmod(x, y)


def _pow(x, y):
    if _is_int(x) and _is_int(y) and np.any(y < 0):
        # C-like integer powers: 1 ** -n = 1, (-1) ** -n = +-1, anything else truncates to 0
        x, y = np.broadcast_arrays(x, y)
        neg = y < 0
        r = np.power(x, np.where(neg, 0, y))
        odd = (y & 1).astype(bool)
        small = np.where(x == 1, 1, np.where(x == -1, np.where(odd, -1, 1), 0))
        return np.where(neg, small.astype(r.dtype), r)
    return np.power(x, y)


def _sign(x):
    x = np.asarray(x)
    return x.copy() if x.dtype == np.bool_ else np.sign(x)


def _truediv(x, y):
    return np.true_divide(x, y)


def _cast(x, dtype):
    return np.asarray(x).astype(dtype.np, copy=False)


def _round(x, decimals=0):
    if _is_int(x):
        return np.array(x, copy=True)
    return np.round(x, decimals)


def _shift(fn, x, y, bits_fill):
    # PyTorch defines shifts by >= the bit width (or negative amounts): 0, or the sign for >>
    x, y = np.asarray(x), np.asarray(y)
    width = x.dtype.itemsize * 8
    big = (y >= width) | (y < 0)
    r = fn(x, np.where(big, 0, y).astype(x.dtype, copy=False))
    if not np.any(big):
        return r
    fill = np.where(x < 0, -1, 0).astype(x.dtype) if bits_fill else np.zeros_like(r)
    return np.where(big, fill, r)


def _int_identity(fn):
    # floor/ceil/trunc of an integer is itself (a float round trip would lose int64 precision)
    def f(x):
        return np.array(x, copy=True) if _is_int(x) else fn(x)
    return f


def _int_const(fn, value):
    # isnan/isinf/isfinite/signbit of integers and bools: constant (signbit: x < 0)
    def f(x):
        if not _is_int(x):
            return fn(x)
        x = np.asarray(x)
        if fn is np.signbit and x.dtype.kind == "i":
            return x < 0
        return np.full(x.shape, value)
    return f


def _lshift(x, y):
    return _shift(np.left_shift, x, y, False)


def _rshift(x, y):
    return _shift(np.right_shift, x, y, True)


_CHUNK = 1 << 15  # elements per chunk: a formula's temporaries stay in L2 (the dispatcher
#                   chunks outputs from _dispatch.CHUNK_MIN elements on)


def chunked(formula, args):
    """formula(NumpyOps, *args) evaluated chunk by chunk when the array args are large, of one
    shape and C-contiguous (other cases, and results that are not elementwise, take one pass).
    A formula is a chain of numpy passes; on chunks each pass reads cache, not memory (2-3x)."""
    arrays = [i for i, a in enumerate(args) if type(a) is np.ndarray and a.ndim]
    shape = args[arrays[0]].shape if arrays else None
    if not arrays or any(args[i].shape != shape or not args[i].flags.c_contiguous
                         for i in arrays):
        return formula(_dispatch.NP, *args)
    flat = list(args)
    for i in arrays:
        flat[i] = args[i].reshape(-1)
    n = flat[arrays[0]].size
    out = None
    part = list(flat)
    for start in range(0, n, _CHUNK):
        for i in arrays:
            part[i] = flat[i][start:start + _CHUNK]
        if out is None:
            counter = _Counting()
            r = formula(counter, *part)
            # one or two passes gain nothing from chunking and would pay a copy
            if counter.n <= 2 or type(r) is not np.ndarray or r.shape != part[arrays[0]].shape:
                return formula(_dispatch.NP, *args)
            # allocated in the final shape: a reshaped view would make the caller copy it
            result = np.empty(shape, r.dtype)
            out = result.reshape(-1)
        else:
            r = formula(_dispatch.NP, *part)
        out[start:start + _CHUNK] = r
    return result


class _Counting:
    """The numpy handler, counting the primitives a formula calls."""

    def __init__(self):
        self.n = 0

    def __getattr__(self, name):
        self.n += 1
        return getattr(_dispatch.NP, name)


class NumpyOps:
    """Eager numpy implementations of the primitives (CPU kernels come from these)."""

    add = staticmethod(np.add)
    sub = staticmethod(np.subtract)
    mul = staticmethod(np.multiply)
    truediv = staticmethod(_truediv)
    floordiv = staticmethod(_floordiv)
    truncdiv = staticmethod(_truncdiv)
    remainder = staticmethod(_remainder)
    fmod = staticmethod(_fmod)
    pow = staticmethod(_pow)
    neg = staticmethod(np.negative)
    abs = staticmethod(np.abs)
    sign = staticmethod(_sign)
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
    polygamma = staticmethod(_special.polygamma)  # (x, n): n a Python int
    floor = staticmethod(_int_identity(np.floor))
    ceil = staticmethod(_int_identity(np.ceil))
    round = staticmethod(_round)
    trunc = staticmethod(_int_identity(np.trunc))
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
    lshift = staticmethod(_lshift)
    rshift = staticmethod(_rshift)
    isnan = staticmethod(_int_const(np.isnan, False))
    isinf = staticmethod(_int_const(np.isinf, False))
    isfinite = staticmethod(_int_const(np.isfinite, True))
    signbit = staticmethod(_int_const(np.signbit, False))
    copysign = staticmethod(np.copysign)
    hypot = staticmethod(np.hypot)
    nextafter = staticmethod(np.nextafter)
    cast = staticmethod(_cast)


_dispatch.NP = NumpyOps()
_dispatch.NP_CHUNKED = chunked
