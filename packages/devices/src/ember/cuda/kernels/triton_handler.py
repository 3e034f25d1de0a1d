"""The Triton ops handler: pointwise formulas evaluated with it emit Triton code.

`TritonOps` implements the primitives of `ember._ops._handlers.PRIMITIVES` on symbolic values:
each call appends a line of Triton code and returns a `Var` that names the result and knows its
ember dtype. A formula evaluated on Vars for its tensor inputs thus becomes the body of a kernel.

Python-level decisions inside a formula (`alpha == 1`, `-lam`) cannot be made on a runtime
scalar: the Var raises `NeedsConstant`, and the caller retraces with that scalar baked in.
"""
from __future__ import annotations

import math

from ember._ops.registry import dtypes as D

__all__ = ["Var", "TritonOps", "NeedsConstant", "Unsupported", "TL", "literal"]

TL = {D.bool: "tl.int1", D.uint8: "tl.uint8", D.int8: "tl.int8", D.int16: "tl.int16",
      D.int32: "tl.int32", D.int64: "tl.int64", D.float16: "tl.float16",
      D.bfloat16: "tl.bfloat16", D.float32: "tl.float32", D.float64: "tl.float64"}


class NeedsConstant(Exception):
    """A formula branched on a runtime scalar: retrace with scalars as constants."""


class Unsupported(Exception):
    """No Triton code for this primitive/dtype (the backend falls back)."""


class InterpreterLimit(Unsupported):
    """Triton's interpreter (the fake device) lacks it; compiled for a GPU, the kernel has it."""


class Var:
    """A value in the generated kernel: its code name, ember dtype, and block-or-scalar."""

    __slots__ = ("code", "dtype", "block")

    def __init__(self, code: str, dtype, block: bool):
        self.code, self.dtype, self.block = code, dtype, block

    def _dyn(self, *a):
        raise NeedsConstant(self.code)

    __bool__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _dyn
    __neg__ = __pos__ = __abs__ = __float__ = __int__ = __index__ = _dyn
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _dyn
    __truediv__ = __rtruediv__ = __pow__ = __rpow__ = _dyn
    __hash__ = object.__hash__

    def __repr__(self):
        return f"Var({self.code}: {self.dtype})"


def literal(v) -> str:
    """Python source for a constant inside a kernel."""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return repr(int(v))
    f = float(v)
    if math.isnan(f):
        return 'float("nan")'
    if math.isinf(f):
        return 'float("inf")' if f > 0 else 'float("-inf")'
    return repr(f)


def _dt(x):
    """ember dtype of a value, None for a Python literal (weakly typed)."""
    return x.dtype if isinstance(x, Var) else None


def _lit_kind(x):
    if isinstance(x, bool):
        return D.bool
    if isinstance(x, int):
        return D.int64
    return D.float32


def _is_float(d) -> bool:
    return d is not None and d._cat == 2


def _is_int(d) -> bool:
    return d is not None and d._cat <= 1


class TritonOps:
    """Emits Triton code for the primitive calls of a formula (see module docstring)."""

    def __init__(self, interpret: bool = False):
        self.lines: list[str] = []
        self.n = 0
        # Triton's interpreter has no libdevice: tl.math's subset there, the rest unsupported
        self.interpret = interpret

    def _fn(self, name: str) -> str:
        if not self.interpret:
            return f"libdevice.{name}"
        if name in _INTERP:
            return _INTERP[name]
        raise InterpreterLimit(f"{name} in Triton's interpreter")

    # ---- helpers ------------------------------------------------------------------------------
    def emit(self, expr: str, dtype, block: bool) -> Var:
        name = f"t{self.n}"
        self.n += 1
        self.lines.append(f"{name} = {expr}")
        return Var(name, dtype, block)

    def _c(self, x) -> str:
        if isinstance(x, Var):
            return x.code
        if hasattr(x, "dtype") and not isinstance(x, (int, float, bool)):  # numpy scalar
            x = x.item()
        if not isinstance(x, (int, float, bool)):
            raise Unsupported(f"constant of type {type(x).__name__}")
        return literal(x)

    @staticmethod
    def _blk(*xs) -> bool:
        return any(isinstance(x, Var) and x.block for x in xs)

    def _res(self, a, b):
        """Result dtype of a binary arithmetic op: Vars promote; literals are weak."""
        da, db = _dt(a), _dt(b)
        if da is None and db is None:
            return D.promote_types(_lit_kind(_py(a)), _lit_kind(_py(b)))
        if da is None or db is None:
            d = da or db
            lit = _py(b if da is not None else a)
            if isinstance(lit, float) and not isinstance(lit, bool) and not _is_float(d):
                return D.float32
            if isinstance(lit, int) and not isinstance(lit, bool) and d is D.bool:
                return D.int64
            return d
        return D.promote_types(da, db)

    def _as(self, x, d) -> str:
        """Code for x converted to dtype d (Vars cast, literals left weak, except that Triton
        reads a float literal as float32: a float64 computation gets a float64 constant)."""
        if isinstance(x, Var):
            if x.dtype is d:
                return x.code
            if d is D.bool:
                return f"({x.code} != 0)"
            return f"{x.code}.to({TL[d]})"
        if d is D.float64 and isinstance(_py(x), float):
            return f"tl.full([], {self._c(x)}, tl.float64)"
        return self._c(x)

    def _bin(self, a, b, fmt, dtype=None):
        d = self._res(a, b)
        r = self.emit(fmt.format(self._as(a, d), self._as(b, d)), dtype or d, self._blk(a, b))
        return r

    def _float(self, x):
        """x as a floating Var/literal (int inputs of float functions become float32)."""
        d = _dt(x)
        if d is None:
            return float(_py(x))
        if _is_float(d):
            return x
        return self.emit(f"{x.code}.to(tl.float32)", D.float32, x.block)

    def _f1(self, name, x):
        x = self._float(x)
        if not isinstance(x, Var):
            x = self.emit(f"tl.full([], {literal(x)}, tl.float32)", D.float32, False)
        if x.dtype in (D.float16, D.bfloat16):  # libdevice has no half variants
            x = self.emit(f"{x.code}.to(tl.float32)", D.float32, x.block)
        return self.emit(f"{self._fn(name)}({x.code})", x.dtype, x.block)

    def _f2(self, name, a, b):
        a, b = self._float(a), self._float(b)
        d = self._res(a, b)
        if d in (D.float16, D.bfloat16) or not _is_float(d):
            d = D.float32
        def conv(v):
            if isinstance(v, Var):
                return v.code if v.dtype is d else f"{v.code}.to({TL[d]})"
            return f"tl.full([], {literal(v)}, {TL[d]})"
        ca, cb = conv(a), conv(b)
        return self.emit(f"{self._fn(name)}({ca}, {cb})", d, self._blk(a, b))

    # ---- arithmetic ---------------------------------------------------------------------------
    def add(self, a, b):
        if _dt(a) is D.bool and _dt(b) is D.bool:
            return self._bin(a, b, "({} | {})")
        return self._bin(a, b, "({} + {})")

    def sub(self, a, b):
        return self._bin(a, b, "({} - {})")

    def mul(self, a, b):
        if _dt(a) is D.bool and _dt(b) is D.bool:
            return self._bin(a, b, "({} & {})")
        return self._bin(a, b, "({} * {})")

    def truediv(self, a, b):
        if not _is_float(self._res(a, b)):
            a, b = self._float(a), self._float(b)
        return self._bin(a, b, "({} / {})")

    def floordiv(self, a, b):
        d = self._res(a, b)
        if _is_float(d):
            q = self._bin(a, b, "({} / {})")
            return self.emit(f"{self._fn('floor')}({q.code})", q.dtype, q.block)
        x, y = self._as(a, d), self._as(b, d)
        # C division truncates: step down when the signs differ and it is inexact
        return self.emit(f"(({x}) // ({y}) - ((({x}) % ({y}) != 0) & ((({x}) < 0) != (({y}) < 0)))"
                         f".to({TL[d]}))", d, self._blk(a, b))

    def truncdiv(self, a, b):
        d = self._res(a, b)
        if _is_float(d):
            q = self._bin(a, b, "({} / {})")
            return self.emit(f"{self._fn('trunc')}({q.code})", q.dtype, q.block)
        return self._bin(a, b, "({} // {})")

    def remainder(self, a, b):
        d = self._res(a, b)
        x, y = self._as(a, d), self._as(b, d)
        r = self.emit(f"{self._fn('fmod')}({x}, {y})" if _is_float(d) and d not in (
            D.float16, D.bfloat16) else f"(({x}) % ({y}))", d, self._blk(a, b))
        # Python's sign convention: the result takes the divisor's sign
        return self.emit(f"tl.where(({r.code} != 0) & (({r.code} < 0) != (({y}) < 0)), "
                         f"{r.code} + ({y}), {r.code})", d, r.block)

    def fmod(self, a, b):
        d = self._res(a, b)
        if _is_float(d):
            return self._f2("fmod", a, b)
        return self._bin(a, b, "({} % {})")

    def pow(self, a, b):
        d = self._res(a, b)
        if _is_float(d):
            r = self._f2("pow", a, b)
            return r if r.dtype is d else self.emit(f"{r.code}.to({TL[d]})", d, r.block)
        # integers: exact through float64 up to 2**53; negative exponents as C (1, +-1, or 0)
        x, y = self._as(a, d), self._as(b, d)
        p = self.emit(f"{self._fn('pow')}(({x}).to(tl.float64), ({y}).to(tl.float64)).to({TL[d]})",
                      d, self._blk(a, b))
        small = (f"tl.where(({x}) == 1, 1, tl.where(({x}) == -1, "
                 f"tl.where((({y}) & 1) != 0, -1, 1), 0))")
        return self.emit(f"tl.where(({y}) < 0, ({small}).to({TL[d]}), {p.code})", d, p.block)

    def neg(self, x):
        return self.emit(f"(-{self._c(x)})", _dt(x) or _lit_kind(x), self._blk(x))

    def abs(self, x):
        if _dt(x) is D.bool:
            return x
        return self.emit(f"tl.abs({self._c(x)})", _dt(x) or _lit_kind(x), self._blk(x))

    def sign(self, x):
        d = _dt(x)
        if d is D.bool:
            return x
        c = self._c(x)
        s = f"(({c} > 0).to({TL[d]}) - ({c} < 0).to({TL[d]}))"
        if _is_float(d):
            s = f"tl.where({c} != {c}, {c}, {s})"
        return self.emit(s, d, self._blk(x))

    def reciprocal(self, x):
        return self.truediv(1.0, x)

    def sqrt(self, x):
        return self._f1("sqrt", x)

    def rsqrt(self, x):
        return self.truediv(1.0, self._f1("sqrt", x))

    def sigmoid(self, x):
        e = self._f1("exp", self.neg(self._float(x)))
        return self.truediv(1.0, self.add(1.0, e))

    def round(self, x, decimals=0):
        d = _dt(x)
        if _is_int(d):
            return x
        if decimals == 0:
            return self._f1("nearbyint", x)
        s = 10.0 ** decimals
        return self.truediv(self._f1("nearbyint", self.mul(x, s)), s)

    # ---- comparisons and selection ------------------------------------------------------------
    def _cmp(op):  # noqa: N805 - a method factory
        def f(self, a, b):
            return self._bin(a, b, "({} " + op + " {})", dtype=D.bool)
        return f

    eq, ne, lt, le = _cmp("=="), _cmp("!="), _cmp("<"), _cmp("<=")
    gt, ge = _cmp(">"), _cmp(">=")
    del _cmp

    def where(self, c, a, b):
        d = self._res(a, b)
        cc = self._as(c, D.bool) if isinstance(c, Var) else self._c(bool(c))
        return self.emit(f"tl.where({cc}, {self._as(a, d)}, {self._as(b, d)})", d,
                         self._blk(c, a, b))

    def maximum(self, a, b):
        d = self._res(a, b)
        if d is D.bool:
            return self._bin(a, b, "({} | {})")
        x, y = self._as(a, d), self._as(b, d)
        m = f"tl.maximum({x}, {y})"
        if _is_float(d):  # NaN propagates, as torch.maximum
            m = f"tl.where({x} != {x}, {x}, tl.where({y} != {y}, {y}, {m}))"
        return self.emit(m, d, self._blk(a, b))

    def minimum(self, a, b):
        d = self._res(a, b)
        if d is D.bool:
            return self._bin(a, b, "({} & {})")
        x, y = self._as(a, d), self._as(b, d)
        m = f"tl.minimum({x}, {y})"
        if _is_float(d):
            m = f"tl.where({x} != {x}, {x}, tl.where({y} != {y}, {y}, {m}))"
        return self.emit(m, d, self._blk(a, b))

    def fmax(self, a, b):
        d = self._res(a, b)
        if not _is_float(d):
            return self.maximum(a, b)
        x, y = self._as(a, d), self._as(b, d)
        return self.emit(f"tl.where({x} != {x}, {y}, tl.where({y} != {y}, {x}, "
                         f"tl.maximum({x}, {y})))", d, self._blk(a, b))

    def fmin(self, a, b):
        d = self._res(a, b)
        if not _is_float(d):
            return self.minimum(a, b)
        x, y = self._as(a, d), self._as(b, d)
        return self.emit(f"tl.where({x} != {x}, {y}, tl.where({y} != {y}, {x}, "
                         f"tl.minimum({x}, {y})))", d, self._blk(a, b))

    # ---- logical and bitwise ------------------------------------------------------------------
    def _truth(self, x) -> str:
        if isinstance(x, Var):
            return x.code if x.dtype is D.bool else f"({x.code} != 0)"
        return self._c(bool(_py(x)))

    def logical_and(self, a, b):
        return self.emit(f"({self._truth(a)} & {self._truth(b)})", D.bool, self._blk(a, b))

    def logical_or(self, a, b):
        return self.emit(f"({self._truth(a)} | {self._truth(b)})", D.bool, self._blk(a, b))

    def logical_xor(self, a, b):
        return self.emit(f"({self._truth(a)} ^ {self._truth(b)})", D.bool, self._blk(a, b))

    def logical_not(self, x):
        return self.emit(f"({self._truth(x)} == 0)", D.bool, self._blk(x))

    def bitwise_and(self, a, b):
        return self._bin(a, b, "({} & {})")

    def bitwise_or(self, a, b):
        return self._bin(a, b, "({} | {})")

    def bitwise_xor(self, a, b):
        return self._bin(a, b, "({} ^ {})")

    def bitwise_not(self, x):
        if _dt(x) is D.bool:
            return self.logical_not(x)
        return self.emit(f"(~{self._c(x)})", _dt(x), self._blk(x))

    def _shift(self, a, b, op):
        d = _dt(a) or _lit_kind(a)
        x, y = self._as(a, d), self._as(b, d)
        width = d.itemsize * 8
        fill = f"tl.where({x} < 0, -1, 0).to({TL[d]})" if op == ">>" else "0"
        safe = f"tl.where(({y} >= {width}) | ({y} < 0), 0, {y})"
        return self.emit(f"tl.where(({y} >= {width}) | ({y} < 0), {fill}, ({x} {op} {safe}))",
                         d, self._blk(a, b))

    def lshift(self, a, b):
        return self._shift(a, b, "<<")

    def rshift(self, a, b):
        return self._shift(a, b, ">>")

    # ---- classification -----------------------------------------------------------------------
    def _const_bool(self, x, value):
        c = self._c(x)
        return self.emit(f"(({c}) != ({c})) | {literal(value)}" if value else
                         f"({c}) != ({c})", D.bool, self._blk(x))

    def isnan(self, x):
        if not _is_float(_dt(x)):
            return self._const_bool(x, False)
        return self.emit(f"({x.code} != {x.code})", D.bool, x.block)

    def isinf(self, x):
        if not _is_float(_dt(x)):
            return self._const_bool(x, False)
        return self.emit(f"(tl.abs({x.code}) == float(\"inf\"))", D.bool, x.block)

    def isfinite(self, x):
        if not _is_float(_dt(x)):
            return self._const_bool(x, True)
        return self.emit(f"(tl.abs({x.code}) < float(\"inf\"))", D.bool, x.block)

    def signbit(self, x):
        d = _dt(x)
        if not _is_float(d):
            if d is not None and d.is_signed and d is not D.bool:
                return self.emit(f"({x.code} < 0)", D.bool, x.block)
            return self._const_bool(x, False)
        s = self._f1("signbit", x)
        return self.emit(f"({s.code} != 0)", D.bool, s.block)

    def cast(self, x, dtype):
        if dtype not in TL:
            raise Unsupported(f"cast to {dtype}")
        if not isinstance(x, Var):
            return self.emit(f"tl.full([], {self._c(x)}, {TL[dtype]})", dtype, False)
        return self.emit(self._as(x, dtype), dtype, x.block)

    def floor(self, x):
        return x if _is_int(_dt(x)) else self._f1("floor", x)

    def ceil(self, x):
        return x if _is_int(_dt(x)) else self._f1("ceil", x)

    def trunc(self, x):
        return x if _is_int(_dt(x)) else self._f1("trunc", x)

    def _real_float(self, x) -> Var:
        """x as a float32/float64 block Var (half types and integers compute in float32)."""
        x = self._float(x)
        if not isinstance(x, Var):
            x = self.emit(f"tl.full([], {literal(x)}, tl.float32)", D.float32, False)
        if x.dtype in (D.float16, D.bfloat16):
            x = self.emit(f"{x.code}.to(tl.float32)", D.float32, x.block)
        return x

    def _line(self, code: str) -> None:
        self.lines.append(code)

    def _name(self) -> str:
        name = f"t{self.n}"
        self.n += 1
        return name

    def digamma(self, x):
        """psi(x) as PyTorch's CUDA calc_digamma: reflection for x < 0, the recurrence
        psi(x) = psi(x + 1) - 1/x (ten masked steps) up to x >= 10, then the asymptotic series;
        -inf at +0, +inf at -0, nan at negative integers and -inf."""
        x = self._real_float(x)
        T, xc = TL[x.dtype], x.code
        fl, ce, sn, cs, lg = (self._fn(f) for f in ("floor", "ceil", "sin", "cos", "log"))
        v, r, tr, pr = self._name(), self._name(), self._name(), self._name()
        L = self._line
        L(f"{tr} = tl.where({xc} < 0, {ce}({xc}), {fl}({xc}))")
        # psi(1 - x) - psi(x) = pi / tan(pi x), with pi x reduced to pi frac(x), in float64
        # (as PyTorch's CUDA kernel does for every dtype)
        L(f"{pr} = (({xc}) - {tr}).to(tl.float64) * 3.141592653589793")
        L(f"{r} = tl.where({xc} < 0, -3.141592653589793 * {cs}({pr}) / {sn}({pr}), "
          f"0.0).to({T})")
        L(f"{v} = tl.where({xc} < 0, 1.0 - {xc}, {xc}).to({T})")
        for _ in range(10):
            L(f"{r} = tl.where({v} < 10.0, {r} - 1.0 / {v}, {r})")
            L(f"{v} = tl.where({v} < 10.0, {v} + 1.0, {v})")
        z, p = self._name(), self._name()
        L(f"{z} = 1.0 / ({v} * {v})")
        coef = (8.33333333333333333333E-2, -2.10927960927960927961E-2,
                7.57575757575757575758E-3, -4.16666666666666666667E-3,
                3.96825396825396825397E-3, -8.33333333333333333333E-3,
                8.33333333333333333333E-2)
        L(f"{p} = tl.zeros_like({z}) + {coef[0]!r}")
        for c in coef[1:]:
            L(f"{p} = {p} * {z} + {c!r}")
        L(f"{p} = tl.where({v} < 1.0e17, {z} * {p}, 0.0)")
        out = self.emit(f"({lg}({v}) - 0.5 / {v} - {p} + {r})", x.dtype, x.block)
        out = self.emit(f"tl.where({xc} == 0, -1.0 / {xc}, {out.code})", x.dtype, x.block)
        return self.emit(f"tl.where(({xc} < 0) & ({xc} == {tr}), float(\"nan\"), {out.code})"
                         f".to({T})", x.dtype, x.block)

    def polygamma(self, x, n):
        """The n-th derivative of digamma, (-1)^(n+1) n! zeta(n + 1, x) for n >= 1: the
        Hurwitz zeta series summed directly until x >= 16, then its Euler-Maclaurin tail
        (ember's CPU kernel; PyTorch's CUDA zeta sums to 9 and adds the same tail)."""
        n = int(_py(n))
        if n == 0:
            return self.digamma(x)
        if n < 0:
            raise Unsupported("polygamma of negative order")
        x = self._real_float(x)
        if not x.block:
            raise Unsupported("polygamma of a scalar")
        T, xc, s = TL[x.dtype], x.code, n + 1
        L = self._line
        q, r, st, i = self._name(), self._name(), self._name(), self._name()

        def ipow(base, k):  # base ** k for a Python int k >= 1, by squaring (emitted)
            acc, b = None, base
            while True:
                if k & 1:
                    if acc is None:
                        acc = b
                    else:
                        nm = self._name()
                        L(f"{nm} = {acc} * {b}")
                        acc = nm
                k >>= 1
                if not k:
                    return acc
                nb = self._name()
                L(f"{nb} = {b} * {b}")
                b = nb

        # far below zero the direct sum would take ~|x| steps: nan there (as the CPU kernel)
        L(f"{q} = tl.where({xc} < -1.0e4, 16.0, {xc}).to({T})")
        L(f"{r} = tl.where({xc} < -1.0e4, float(\"nan\"), 0.0).to({T})")
        L(f"{st} = tl.max(tl.where(mask & ({q} < 16.0), 16.0 - {q}, 0.0), axis=0)"
          f".to(tl.int32) + 1")
        L(f"for {i} in range(0, {st}):")
        iq = self._name()
        body_start = len(self.lines)
        L(f"{iq} = 1.0 / {q}")
        pw = ipow(iq, s)
        L(f"{r} = tl.where({q} < 16.0, {r} + {pw}, {r})")
        L(f"{q} = tl.where({q} < 16.0, {q} + 1.0, {q})")
        self.lines[body_start:] = ["    " + ln for ln in self.lines[body_start:]]
        iq2 = self._name()
        L(f"{iq2} = 1.0 / {q}")
        ps = ipow(iq2, s)                     # q^-s
        ps1 = ipow(iq2, s - 1)                # q^(1-s)
        t, p, inv2 = self._name(), self._name(), self._name()
        L(f"{t} = {ps1} * {1.0 / (s - 1)!r} + 0.5 * {ps}")
        L(f"{p} = {ps} * {iq2}")              # q^(-s-1)
        L(f"{inv2} = {iq2} * {iq2}")
        fac = float(s)
        for k, b in enumerate((1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6,
                               -3617 / 510), start=1):
            c = b / math.factorial(2 * k) * fac
            L(f"{t} = {t} + {c!r} * {p}")
            fac *= (s + 2 * k - 1) * (s + 2 * k)
            if k < 8:
                L(f"{p} = {p} * {inv2}")
        scale = (-1.0 if n % 2 == 0 else 1.0) * float(math.factorial(n))
        # +inf: every derivative is 0 (q^-s is 0 there, the sum is 0 too)
        return self.emit(f"(({r} + {t}) * {scale!r}).to({T})", x.dtype, x.block)


_INTERP = {"exp": "tl.exp", "log": "tl.log", "sqrt": "tl.sqrt_rn", "floor": "tl.floor",
           "ceil": "tl.ceil", "sin": "tl.sin", "cos": "tl.cos", "exp2": "tl.exp2",
           "log2": "tl.log2", "erf": "tl.erf"}


def _py(x):
    if isinstance(x, (bool, int, float)):
        return x
    if hasattr(x, "item"):
        return x.item()
    return x


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
           "asinh acosh atanh erf erfc erfinv lgamma").split():
    setattr(TritonOps, _n, _unary(_n))
for _n in ("atan2", "copysign", "hypot", "nextafter"):
    setattr(TritonOps, _n, _binary(_n))
