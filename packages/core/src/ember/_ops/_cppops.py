"""The C++ ops handler: pointwise formulas evaluated with it emit C++ code for one element.

`CppOps` implements `_handlers.PRIMITIVES` on symbolic values. Each primitive call appends one
line (`float t3 = ...;`) and returns a `Var` naming the result and knowing its ember dtype, so a
formula evaluated on Vars for its inputs becomes the loop body of a kernel (`_cpujit` wraps it).

The semantics are the numpy handler's (`_handlers.NumpyOps`), which the C++ kernels replace on
large tensors: numpy's promotion with Python scalars as weak values (NEP 50), numpy's floor
division / remainder algorithm, C-like integer powers, shifts past the bit width, NaN-propagating
minimum / maximum. Integer division by zero sets the kernel's `bad` flag (the caller raises).

Runtime scalar arguments are `Sym`s: Python-level arithmetic on them (`-lam`, `1 - eps`) builds
C++ expressions, and Python-level decisions (`alpha == 1`, `float(v)`) are answered from the
current value and recorded as guards, so one kernel serves every value that decides the same way.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .. import _dtype as D

__all__ = ["CppOps", "Var", "Sym", "NeedsConstant", "Unsupported", "CT", "PRELUDE", "literal"]

CT = {D.bool: "bool", D.uint8: "uint8_t", D.int8: "int8_t", D.int16: "int16_t",
      D.int32: "int32_t", D.int64: "int64_t", D.float32: "float", D.float64: "double"}
_NATURAL = {bool: D.bool, int: D.int64, float: D.float64}


class NeedsConstant(Exception):
    """A formula branched on a tensor element: no kernel (the numpy handler runs it)."""


class Unsupported(Exception):
    """No C++ code for this primitive / dtype: the numpy handler runs the op."""


class Var:
    """A value in the generated loop body: C++ code, ember dtype; `weak` is the Python type of a
    weakly typed scalar (a literal or a Python scalar argument), None for typed values."""

    __slots__ = ("code", "dtype", "weak")

    def __init__(self, code: str, dtype, weak=None):
        self.code, self.dtype, self.weak = code, dtype, weak

    def _dyn(self, *a):
        raise NeedsConstant(self.code)

    __bool__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _dyn
    __neg__ = __pos__ = __abs__ = __float__ = __int__ = __index__ = _dyn
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _dyn
    __truediv__ = __rtruediv__ = __pow__ = __rpow__ = _dyn
    __hash__ = object.__hash__

    def __repr__(self):
        return f"Var({self.code}: {self.dtype})"


def _val(x, args):
    return x.ev(args) if isinstance(x, Sym) else x


class Sym(Var):
    """A scalar kernel argument. `value` is this call's value, `ev(args)` recomputes it from any
    call's arguments (for guards), `guards` is the trace's shared list of (predicate, outcome)."""

    __slots__ = ("value", "ev", "guards")

    def __init__(self, code, dtype, weak, value, ev, guards):
        super().__init__(code, dtype, weak)
        self.value, self.ev, self.guards = value, ev, guards

    def _decide(self, fn, other):
        out = fn(self.value, other.value if isinstance(other, Sym) else other)
        self.guards.append((lambda a, s=self.ev, o=other: fn(s(a), _val(o, a)), out))
        return out

    def _arith(self, fn, sym, other, rev=False):
        if isinstance(other, Var) and not isinstance(other, Sym):
            raise NeedsConstant(self.code)
        if isinstance(other, np.generic):
            other = other.item()
        if not isinstance(other, (bool, int, float)) and not isinstance(other, Sym):
            raise NeedsConstant(self.code)
        x, y = (other, self) if rev else (self, other)
        value = fn(x.value if isinstance(x, Sym) else x, y.value if isinstance(y, Sym) else y)
        cx = x.code if isinstance(x, Sym) else literal(x)
        cy = y.code if isinstance(y, Sym) else literal(y)
        if self.dtype is not None and self.weak is None:  # a typed scalar stays typed
            t = CT[self.dtype]
            code = f"static_cast<{t}>(static_cast<{t}>({cx}) {sym} static_cast<{t}>({cy}))"
            dt, weak = self.dtype, None
        else:
            weak = type(value) if type(value) in _NATURAL else float
            dt = _NATURAL[weak]
            cast = "double" if sym == "/" else CT[dt]
            code = f"static_cast<{CT[dt]}>(static_cast<{cast}>({cx}) {sym} {cy})"
        ev = (lambda a, s=self.ev, o=other: fn(_val(o, a), s(a))) if rev else (
            lambda a, s=self.ev, o=other: fn(s(a), _val(o, a)))
        return Sym(code, dt, weak, value, ev, self.guards)

    def __eq__(self, o):
        return self._decide(operator.eq, o)

    def __ne__(self, o):
        return self._decide(operator.ne, o)

    def __lt__(self, o):
        return self._decide(operator.lt, o)

    def __le__(self, o):
        return self._decide(operator.le, o)

    def __gt__(self, o):
        return self._decide(operator.gt, o)

    def __ge__(self, o):
        return self._decide(operator.ge, o)

    def __bool__(self):
        return self._decide(lambda a, b: bool(a), None)

    def _bake(self):  # float(v), int(v), math.f(v): this value only
        self._decide(lambda a, b: a == b and type(a) is type(b), self.value)
        return self.value

    def __float__(self):
        return float(self._bake())

    def __int__(self):
        return int(self._bake())

    __index__ = __int__

    def __neg__(self):
        code = f"static_cast<{CT[self.dtype]}>(-({self.code}))"
        return Sym(code, self.dtype, self.weak, -self.value, lambda a, s=self.ev: -s(a),
                   self.guards)

    def __pos__(self):
        return self

    def __add__(self, o):
        return self._arith(operator.add, "+", o)

    def __radd__(self, o):
        return self._arith(operator.add, "+", o, rev=True)

    def __sub__(self, o):
        return self._arith(operator.sub, "-", o)

    def __rsub__(self, o):
        return self._arith(operator.sub, "-", o, rev=True)

    def __mul__(self, o):
        return self._arith(operator.mul, "*", o)

    def __rmul__(self, o):
        return self._arith(operator.mul, "*", o, rev=True)

    def __truediv__(self, o):
        return self._arith(operator.truediv, "/", o)

    def __rtruediv__(self, o):
        return self._arith(operator.truediv, "/", o, rev=True)

    __hash__ = object.__hash__


def literal(v) -> str:
    """C++ source for a Python constant (exact: floats as hex literals)."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        if not -2**63 <= v < 2**63:
            raise Unsupported(f"integer constant {v} out of int64 range")
        return "(-9223372036854775807LL - 1)" if v == -2**63 else f"{v}LL"
    f = float(v)
    if math.isnan(f):
        return "std::numeric_limits<double>::quiet_NaN()"
    if math.isinf(f):
        return ("" if f > 0 else "-") + "std::numeric_limits<double>::infinity()"
    return f.hex()


def _py_kind(x):
    if isinstance(x, bool) or isinstance(x, np.bool_):
        return bool
    if isinstance(x, (int, np.integer)):
        return int
    return float


class CppOps:
    """Emits C++ for the primitive calls of a formula (see the module docstring)."""

    def __init__(self):
        self.lines: list[str] = []
        self.n = 0
        self.divides = False  # an integer division: the kernel reports division by zero

    # ---- values -------------------------------------------------------------------------------
    def v(self, x) -> Var:
        """Any formula operand as a Var (Python and numpy scalars become literals)."""
        if isinstance(x, Var):
            return x
        if isinstance(x, np.generic):  # a typed numpy scalar (strong, as in numpy)
            d = D._BY_NP.get(x.dtype)
            if d not in CT:
                raise Unsupported(f"constant of dtype {x.dtype}")
            return Var(f"static_cast<{CT[d]}>({literal(x)})", d)
        if isinstance(x, (bool, int, float)):
            k = _py_kind(x)
            return Var(literal(k(x)), _NATURAL[k], k)
        raise Unsupported(f"constant of type {type(x).__name__}")

    def emit(self, expr: str, dtype) -> Var:
        name = f"t{self.n}"
        self.n += 1
        self.lines.append(f"{CT[dtype]} {name} = {expr};")
        return Var(name, dtype)

    @staticmethod
    def _res2(a: Var, b: Var):
        """numpy's result dtype of a binary ufunc (NEP 50: Python scalars are weak)."""
        if a.weak and b.weak:
            return _np_promote(a.dtype, b.dtype)
        if a.weak:
            a, b = b, a
        if b.weak:
            t = a.dtype
            if b.weak is float and t._cat < 2:
                return D.float64
            if b.weak is int and t is D.bool:
                return D.int64
            return t
        return _np_promote(a.dtype, b.dtype)

    @staticmethod
    def as_(x: Var, d) -> str:
        """Code for x converted to dtype d."""
        if x.dtype is d and not x.weak:
            return x.code
        if d is D.bool:
            return f"({x.code} != 0)"
        return f"static_cast<{CT[d]}>({x.code})"

    def _bin(self, a, b, fmt, dtype=None):
        a, b = self.v(a), self.v(b)
        d = self._res2(a, b)
        return self.emit(fmt.format(self.as_(a, d), self.as_(b, d), T=CT[d]), dtype or d)

    def _float(self, x, name):
        x = self.v(x)
        if x.weak:  # numpy: a Python scalar goes through float64
            return Var(self.as_(x, D.float64), D.float64)
        if x.dtype._cat != 2:  # numpy would pick float16 / float32 / float64 by int width
            raise Unsupported(f"{name} of {x.dtype}")
        return x

    def _f1(self, name, x, fn=None):
        x = self._float(x, name)
        return self.emit(f"{fn or 'std::' + name}({x.code})", x.dtype)

    def _f2(self, name, a, b):
        a, b = self.v(a), self.v(b)
        d = self._res2(a, b)
        if d._cat != 2:
            raise Unsupported(f"{name} of {d}")
        return self.emit(f"std::{name}({self.as_(a, d)}, {self.as_(b, d)})", d)

    # ---- arithmetic ---------------------------------------------------------------------------
    def add(self, a, b):
        a, b = self.v(a), self.v(b)
        if self._res2(a, b) is D.bool:
            return self._bin(a, b, "({} || {})")
        return self._bin(a, b, "static_cast<{T}>({} + {})")

    def sub(self, a, b):
        a, b = self.v(a), self.v(b)
        if self._res2(a, b) is D.bool:
            raise Unsupported("bool subtraction")
        return self._bin(a, b, "static_cast<{T}>({} - {})")

    def mul(self, a, b):
        a, b = self.v(a), self.v(b)
        if self._res2(a, b) is D.bool:
            return self._bin(a, b, "({} && {})")
        return self._bin(a, b, "static_cast<{T}>({} * {})")

    def truediv(self, a, b):
        a, b = self.v(a), self.v(b)
        d = self._res2(a, b)
        if d._cat != 2:  # numpy: integer true division is float64
            d = D.float64
        return self.emit(f"({self.as_(a, d)} / {self.as_(b, d)})", d)

    def _idiv(self, fn, a, b):
        a, b = self.v(a), self.v(b)
        d = self._res2(a, b)
        if d is D.bool:
            raise Unsupported(f"{fn} of bool")
        if d._cat == 2:
            return self.emit(f"em_{fn}_f({self.as_(a, d)}, {self.as_(b, d)})", d)
        self.divides = True
        return self.emit(f"em_{fn}_i<{CT[d]}>({self.as_(a, d)}, {self.as_(b, d)}, bad)", d)

    def floordiv(self, a, b):
        return self._idiv("floordiv", a, b)

    def truncdiv(self, a, b):
        a, b = self.v(a), self.v(b)
        if self._res2(a, b)._cat == 2 or (a.dtype._cat == 2 or b.dtype._cat == 2):
            q = self.truediv(a, b)
            return self.emit(f"std::trunc({q.code})", q.dtype)
        return self._idiv("truncdiv", a, b)

    def remainder(self, a, b):
        return self._idiv("remainder", a, b)

    def fmod(self, a, b):
        return self._idiv("fmod", a, b)

    def pow(self, a, b):
        a, b = self.v(a), self.v(b)
        d = self._res2(a, b)
        if d is D.bool:
            return self.emit(f"({self.as_(a, d)} || !{self.as_(b, d)})", d)
        if d._cat == 2:
            return self.emit(f"std::pow({self.as_(a, d)}, {self.as_(b, d)})", d)
        return self.emit(f"em_ipow<{CT[d]}>({self.as_(a, d)}, {self.as_(b, d)})", d)

    def neg(self, x):
        x = self.v(x)
        d = x.dtype
        if d is D.bool:
            raise Unsupported("bool negation")
        return self.emit(f"static_cast<{CT[d]}>(-{self.as_(x, d)})", d)

    def abs(self, x):
        x = self.v(x)
        d = x.dtype
        if d is D.bool:
            return self.emit(x.code, d)
        if d._cat == 2:
            return self.emit(f"std::fabs({self.as_(x, d)})", d)
        c = self.as_(x, d)
        return self.emit(f"static_cast<{CT[d]}>({c} < 0 ? -{c} : {c})", d)

    def sign(self, x):
        x = self.v(x)
        d = x.dtype
        if d is D.bool:
            return self.emit(x.code, d)
        c = self.as_(x, d)
        s = f"static_cast<{CT[d]}>(({c} > 0) - ({c} < 0))"
        if d._cat == 2:
            s = f"({c} != {c} ? {c} : {s})"
        return self.emit(s, d)

    def reciprocal(self, x):
        x = self.v(x)
        if x.dtype._cat != 2 and not x.weak:
            raise Unsupported("integer reciprocal")
        return self.truediv(x.weak and float(1) or _one(x.dtype), x)

    def sqrt(self, x):
        return self._f1("sqrt", x)

    def rsqrt(self, x):
        s = self._f1("sqrt", x)
        return self.emit(f"(static_cast<{CT[s.dtype]}>(1) / {s.code})", s.dtype)

    def sigmoid(self, x):
        x = self._float(x, "sigmoid")
        t = CT[x.dtype]
        return self.emit(f"(static_cast<{t}>(1) / (static_cast<{t}>(1) + std::exp(-{x.code})))",
                         x.dtype)

    def erfinv(self, x):
        raise Unsupported("erfinv")

    def digamma(self, x):
        x = self._float(x, "digamma")  # in double, as the numpy kernel (_special.digamma)
        return self.emit(f"static_cast<{CT[x.dtype]}>(em_digamma(static_cast<double>({x.code})))",
                         x.dtype)

    def polygamma(self, x, n):
        raise Unsupported("polygamma")

    def _int_same(name):  # noqa: N805 - a method factory: floor/ceil/trunc of an integer is itself
        def f(self, x):
            x = self.v(x)
            if x.dtype._cat < 2 and not x.weak:
                return self.emit(x.code, x.dtype)
            return self._f1(name, x)
        f.__name__ = name
        return f

    floor, ceil, trunc = _int_same("floor"), _int_same("ceil"), _int_same("trunc")
    del _int_same

    def round(self, x, decimals=0):
        x = self.v(x)
        if x.dtype._cat < 2 and not x.weak:
            return self.emit(x.code, x.dtype)
        x = self._float(x, "round")
        if isinstance(decimals, Sym):
            decimals = int(decimals)
        if decimals == 0:
            return self._f1("nearbyint", x)
        t = CT[x.dtype]
        if decimals > 0:  # numpy: rint(x * 10**d) / 10**d, the factor cast to x's dtype
            f = literal(10.0 ** decimals)
            return self.emit(f"(std::nearbyint({x.code} * static_cast<{t}>({f})) / "
                             f"static_cast<{t}>({f}))", x.dtype)
        f = literal(10.0 ** -decimals)
        return self.emit(f"(std::nearbyint({x.code} / static_cast<{t}>({f})) * "
                         f"static_cast<{t}>({f}))", x.dtype)

    # ---- comparisons and selection ------------------------------------------------------------
    def _cmp(op):  # noqa: N805 - a method factory
        def f(self, a, b):
            return self._bin(a, b, "({} " + op + " {})", dtype=D.bool)
        return f

    eq, ne, lt, le = _cmp("=="), _cmp("!="), _cmp("<"), _cmp("<=")
    gt, ge = _cmp(">"), _cmp(">=")
    del _cmp

    def where(self, c, a, b):
        c, a, b = self.v(c), self.v(a), self.v(b)
        d = self._res2(a, b)
        return self.emit(f"({self.as_(c, D.bool)} ? {self.as_(a, d)} : {self.as_(b, d)})", d)

    def _minmax(self, a, b, cmp, nan_wins):
        a, b = self.v(a), self.v(b)
        d = self._res2(a, b)
        x, y = self.as_(a, d), self.as_(b, d)
        if d is D.bool:
            return self.emit(f"({x} {'||' if cmp == '>' else '&&'} {y})", d)
        m = f"({x} {cmp} {y} ? {x} : {y})"
        if d._cat == 2:
            m = (f"({x} != {x} ? {x} : ({y} != {y} ? {y} : {m}))" if nan_wins else
                 f"({x} != {x} ? {y} : ({y} != {y} ? {x} : {m}))")
        return self.emit(m, d)

    def maximum(self, a, b):
        return self._minmax(a, b, ">", True)

    def minimum(self, a, b):
        return self._minmax(a, b, "<", True)

    def fmax(self, a, b):
        return self._minmax(a, b, ">", False)

    def fmin(self, a, b):
        return self._minmax(a, b, "<", False)

    # ---- logical and bitwise ------------------------------------------------------------------
    def _truth(self, x) -> str:
        return self.as_(self.v(x), D.bool)

    def logical_and(self, a, b):
        return self.emit(f"({self._truth(a)} && {self._truth(b)})", D.bool)

    def logical_or(self, a, b):
        return self.emit(f"({self._truth(a)} || {self._truth(b)})", D.bool)

    def logical_xor(self, a, b):
        return self.emit(f"({self._truth(a)} != {self._truth(b)})", D.bool)

    def logical_not(self, x):
        return self.emit(f"(!{self._truth(x)})", D.bool)

    def _bitwise(self, a, b, sym):
        a, b = self.v(a), self.v(b)
        d = self._res2(a, b)
        if d._cat == 2:
            raise Unsupported("bitwise op on floats")
        return self.emit(f"static_cast<{CT[d]}>({self.as_(a, d)} {sym} {self.as_(b, d)})", d)

    def bitwise_and(self, a, b):
        return self._bitwise(a, b, "&")

    def bitwise_or(self, a, b):
        return self._bitwise(a, b, "|")

    def bitwise_xor(self, a, b):
        return self._bitwise(a, b, "^")

    def bitwise_not(self, x):
        x = self.v(x)
        if x.dtype is D.bool:
            return self.logical_not(x)
        if x.dtype._cat == 2:
            raise Unsupported("bitwise_not of floats")
        return self.emit(f"static_cast<{CT[x.dtype]}>(~{x.code})", x.dtype)

    def _shift(self, a, b, fn):
        a, b = self.v(a), self.v(b)
        d = a.dtype if not a.weak else self._res2(a, b)
        if d._cat != 1:
            raise Unsupported(f"{fn} of {d}")
        return self.emit(f"em_{fn}<{CT[d]}>({self.as_(a, d)}, {self.as_(b, d)})", d)

    def lshift(self, a, b):
        return self._shift(a, b, "lshift")

    def rshift(self, a, b):
        return self._shift(a, b, "rshift")

    # ---- classification -----------------------------------------------------------------------
    def _classify(self, x, fmt, int_value):
        x = self.v(x)
        if x.dtype._cat == 2 or x.weak is float:
            return self.emit(fmt.format(self.as_(x, x.dtype if not x.weak else D.float64)),
                             D.bool)
        return self.emit(int_value(x), D.bool)

    def isnan(self, x):
        return self._classify(x, "std::isnan({})", lambda x: "false")

    def isinf(self, x):
        return self._classify(x, "std::isinf({})", lambda x: "false")

    def isfinite(self, x):
        return self._classify(x, "std::isfinite({})", lambda x: "true")

    def signbit(self, x):
        return self._classify(x, "std::signbit({})",
                              lambda x: f"({x.code} < 0)" if x.dtype.is_signed else "false")

    def cast(self, x, dtype):
        if dtype not in CT:
            raise Unsupported(f"cast to {dtype}")
        return self.emit(self.as_(self.v(x), dtype), dtype)


def _one(d):
    return np.dtype(d.np).type(1)


def _np_promote(a, b):
    r = D._BY_NP.get(np.promote_types(a.np, b.np))
    if r not in CT:
        raise Unsupported(f"promotion of {a} and {b}")
    return r


def _unary(name):
    def f(self, x):
        return self._f1(name, x)
    f.__name__ = name
    return f


def _binary(name):
    def f(self, a, b):
        return self._f2(name, a, b)
    f.__name__ = name
    return f


for _n in ("exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh "
           "asinh acosh atanh erf erfc lgamma").split():
    setattr(CppOps, _n, _unary(_n))
for _n in ("atan2", "copysign", "hypot", "nextafter"):
    setattr(CppOps, _n, _binary(_n))


# Helpers the generated kernels call (numpy's algorithms where C++'s operators differ).
PRELUDE = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <omp.h>

#ifdef EMBER_MVEC
// glibc's vector math (libmvec): declared SIMD-callable, loops calling these vectorize
#define EM_V1(fn) __attribute__((simd("notinbranch"))) double fn(double); \
  __attribute__((simd("notinbranch"))) float fn##f(float);
#define EM_V2(fn) __attribute__((simd("notinbranch"))) double fn(double, double); \
  __attribute__((simd("notinbranch"))) float fn##f(float, float);
extern "C" {
EM_V1(acos) EM_V1(acosh) EM_V1(asin) EM_V1(asinh) EM_V1(atan) EM_V1(atanh) EM_V1(cos)
EM_V1(cosh) EM_V1(erf) EM_V1(erfc) EM_V1(exp) EM_V1(exp2) EM_V1(expm1) EM_V1(log)
EM_V1(log10) EM_V1(log1p) EM_V1(log2) EM_V1(sin) EM_V1(sinh) EM_V1(tan) EM_V1(tanh)
EM_V2(atan2) EM_V2(hypot) EM_V2(pow)
}
#endif

static inline float em_bf2f(uint16_t b) {
  uint32_t u = (uint32_t)b << 16; float f; std::memcpy(&f, &u, 4); return f;
}
static inline uint16_t em_f2bf(float f) {  // round to nearest even, NaN stays quiet NaN
  uint32_t u; std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
template <class T> static inline T em_floordiv_f(T a, T b) {  // numpy's npy_divmod
  if (b == 0) return a / b;
  T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div != 0) {
    T fd = std::floor(div);
    if (div - fd > (T)0.5) fd += 1;
    return fd;
  }
  return std::copysign((T)0, a / b);
}
template <class T> static inline T em_remainder_f(T a, T b) {  // Python's sign convention
  T mod = std::fmod(a, b);
  if (b == 0) return mod;
  if (mod != 0) { if ((b < 0) != (mod < 0)) mod += b; }
  else mod = std::copysign((T)0, b);
  return mod;
}
template <class T> static inline T em_fmod_f(T a, T b) { return std::fmod(a, b); }
template <class T> static inline T em_floordiv_i(T a, T b, int& bad) {
  if (b == 0) { bad = 1; return 0; }
  if (std::is_signed<T>::value && b == (T)-1) return (T)(-a);
  T q = (T)(a / b), r = (T)(a % b);
  if (r != 0 && ((r < 0) != (b < 0))) q = (T)(q - 1);
  return q;
}
template <class T> static inline T em_truncdiv_i(T a, T b, int& bad) {
  if (b == 0) { bad = 1; return 0; }
  if (std::is_signed<T>::value && b == (T)-1) return (T)(-a);
  return (T)(a / b);
}
template <class T> static inline T em_remainder_i(T a, T b, int& bad) {
  if (b == 0) { bad = 1; return 0; }
  if (std::is_signed<T>::value && b == (T)-1) return 0;
  T r = (T)(a % b);
  if (r != 0 && ((r < 0) != (b < 0))) r = (T)(r + b);
  return r;
}
template <class T> static inline T em_fmod_i(T a, T b, int& bad) {
  if (b == 0) { bad = 1; return 0; }
  if (std::is_signed<T>::value && b == (T)-1) return 0;
  return (T)(a % b);
}
template <class T> static inline T em_ipow(T a, T b) {  // C-like: negative powers truncate
  if (b < 0) return a == 1 ? (T)1 : (a == (T)-1 ? ((b & 1) ? (T)-1 : (T)1) : (T)0);
  T r = 1;
  while (b) { if (b & 1) r = (T)(r * a); b = (T)(b >> 1); a = (T)(a * a); }
  return r;
}
static inline double em_digamma_pos(double x) {  // recurrence to x >= 10, asymptotic series
  double r = 0;
  for (int k = 0; k < 10 && x < 10; ++k) { r -= 1 / x; x += 1; }
  const double t = 1 / (x * x);
  const double s = t * (1.0 / 12 + t * (-1.0 / 120 + t * (1.0 / 252 + t * (-1.0 / 240 + t * (
      1.0 / 132 + t * (-691.0 / 32760 + t * (1.0 / 12 + t * (-3617.0 / 8160))))))));
  return r + std::log(x) - 0.5 / x - s;
}
static inline double em_digamma(double x) {  // -inf at +0, +inf at -0, nan at poles and -inf
  if (x > 0) return em_digamma_pos(x);
  if (x == 0) return std::copysign(std::numeric_limits<double>::infinity(), -x);
  if (x < 0 && std::isfinite(x) && x != std::nearbyint(x)) {  // reflection
    const double pi = 3.141592653589793;
    return em_digamma_pos(1 - x) - pi / std::tan(pi * (x - std::trunc(x)));
  }
  return std::numeric_limits<double>::quiet_NaN();
}
template <class T> static inline T em_lshift(T a, T b) {
  if (b < 0 || b >= (T)(8 * sizeof(T))) return 0;
  return (T)((typename std::make_unsigned<T>::type)a << b);
}
template <class T> static inline T em_rshift(T a, T b) {
  if (b < 0 || b >= (T)(8 * sizeof(T))) return a < 0 ? (T)-1 : (T)0;
  return (T)(a >> b);
}
"""
