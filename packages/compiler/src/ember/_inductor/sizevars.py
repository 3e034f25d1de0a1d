"""Sizes and index expressions: sympy symbols for sizes (duck-sized: one symbol per distinct
value, 0 and 1 kept literal), integer division and modulo that print as C / Triton, and the
index simplification that turns a flat offset back into coordinates without divisions where
the strides allow it.

Triton kernels and the C++ kernels of dynamic graphs read every size symbol from an argument
array (`ks`), so one kernel text serves every value of a symbol. The C++ kernels of a static
graph bake the values in (cpp.py's `Specializer`: constant trip counts, divisions folded).
"""
from __future__ import annotations

import sympy

__all__ = ["SizeVars", "FloorDiv", "ModIndex", "cexpr", "pyexpr", "contiguous_strides",
           "decompose"]


class FloorDiv(sympy.Function):
    """a // b for non-negative integer a and positive b."""

    is_integer = True
    nargs = 2

    @classmethod
    def eval(cls, a, b):
        if b == 1:
            return a
        if a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) // int(b))
        return None


class ModIndex(sympy.Function):
    """a % b for non-negative integer a and positive b."""

    is_integer = True
    nargs = 2

    @classmethod
    def eval(cls, a, b):
        if b == 1 or a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) % int(b))
        return None


class SizeVars:
    """Symbols for sizes. `sym(v)` gives the expression for a concrete size, `hint(e)` the
    value of an expression."""

    def __init__(self):
        self.by_value: dict[int, sympy.Symbol] = {}
        self.values: dict[sympy.Symbol, int] = {}

    def sym(self, v) -> sympy.Expr:
        v = int(v)
        if v in (0, 1):
            return sympy.Integer(v)
        s = self.by_value.get(v)
        if s is None:
            s = sympy.Symbol(f"ks{len(self.by_value)}", integer=True, positive=True)
            self.by_value[v] = s
            self.values[s] = v
        return s

    def shape(self, shape) -> tuple:
        return tuple(self.sym(v) for v in shape)

    def hint(self, e) -> int:
        if isinstance(e, int):
            return e
        e = sympy.sympify(e)
        if e.is_Integer:
            return int(e)
        return int(_evaluate(e, self.values))

    def numel(self, shape) -> int:
        n = 1
        for s in shape:
            n *= self.hint(s)
        return n

    def ordered(self) -> list:
        """The symbols in argument order (ks0, ks1, ...)."""
        return sorted(self.values, key=lambda s: int(s.name[2:]))


def _evaluate(e, values):
    if e.is_Integer:
        return int(e)
    if e.is_Symbol:
        return values[e]
    if isinstance(e, FloorDiv):
        return _evaluate(e.args[0], values) // _evaluate(e.args[1], values)
    if isinstance(e, ModIndex):
        return _evaluate(e.args[0], values) % _evaluate(e.args[1], values)
    if e.is_Add:
        return sum(_evaluate(a, values) for a in e.args)
    if e.is_Mul:
        r = 1
        for a in e.args:
            r *= _evaluate(a, values)
        return r
    if e.is_Pow and e.exp.is_Integer and e.exp >= 0:
        return _evaluate(e.base, values) ** int(e.exp)
    raise TypeError(f"cannot evaluate index expression {e}")


def contiguous_strides(shape) -> tuple:
    st, acc = [], sympy.Integer(1)
    for s in reversed(shape):
        st.append(acc)
        acc = acc * s
    return tuple(reversed(st))


def _mono(e):
    """(integer coefficient, {symbol: power}) of a monomial, or None (sums, divisions...)."""
    coeff, rest = e.as_coeff_Mul()
    if not coeff.is_Integer:
        return None
    powers: dict = {}
    for f in sympy.Mul.make_args(rest):
        if f.is_Symbol:
            powers[f] = powers.get(f, 0) + 1
        elif f.is_Pow and f.base.is_Symbol and f.exp.is_Integer and f.exp > 0:
            powers[f.base] = powers.get(f.base, 0) + int(f.exp)
        elif f != 1:
            return None
    return int(coeff), powers


def divide(a, b):
    """a / b where b divides a exactly (as a polynomial over the integers), else None.
    Monomials (the usual index terms: an integer times sizes and loop variables) take a fast
    path of exponent arithmetic; anything else goes through sympy.cancel."""
    a, b = sympy.sympify(a), sympy.sympify(b)
    ma, mb = _mono(a), _mono(b)
    if ma is not None and mb is not None:
        (ca, pa), (cb, pb) = ma, mb
        if cb == 0 or ca % cb:
            return None
        if any(pa.get(s, 0) < k for s, k in pb.items()):
            return None
        q = sympy.Integer(ca // cb)
        for s, k in pa.items():
            if k > pb.get(s, 0):
                q = q * s ** (k - pb.get(s, 0))
        return q
    num, den = sympy.fraction(sympy.cancel(a / b))
    return num if den == 1 else None


def _owner(coef, strides):
    """The outermost dim whose stride divides coef (symbolically), or None."""
    for j, st in enumerate(strides):
        q = divide(coef, st)
        if q is not None:
            return j, q
    return None


def decompose(flat, shape, var_ranges, sv) -> tuple:
    """Coordinates in a C-contiguous `shape` of the flat offset `flat` (a linear expression in
    loop variables with known ranges). Each term goes to the outermost dim whose stride divides
    its coefficient; when no dim can carry into the next (by the ranges) the coordinates need
    no division, else they fall back to FloorDiv / ModIndex of the whole offset."""
    memo = sv.__dict__.setdefault("_decomposed", {})   # the scheduler asks again and again
    key = (flat, tuple(shape), tuple(var_ranges.items()))
    if key not in memo:
        memo[key] = _decompose(flat, shape, var_ranges, sv)
    return memo[key]


def _decompose(flat, shape, var_ranges, sv) -> tuple:
    shape = tuple(sympy.sympify(s) for s in shape)
    strides = contiguous_strides(shape)
    flat = sympy.expand(flat)
    parts = [[] for _ in shape]
    his = [0] * len(shape)
    ok = True
    for term in sympy.Add.make_args(flat):
        if term == 0:
            continue
        syms = [v for v in var_ranges if term.has(v)]
        if len(syms) > 1:
            ok = False
            break
        coef, var = (term / syms[0], syms[0]) if syms else (term, None)
        if syms and coef.has(syms[0]):
            ok = False
            break
        own = _owner(coef, strides)
        if own is None:
            ok = False
            break
        j, q = own
        parts[j].append(q * var if var is not None else q)
        span = sv.hint(var_ranges[var]) - 1 if var is not None else 1
        his[j] += sv.hint(q) * span
    if ok:
        for j in range(1, len(shape)):
            if his[j] >= sv.hint(shape[j]):
                ok = False
    if ok:
        return tuple(sympy.Add(*p) if shape[j] != 1 else sympy.Integer(0)
                     for j, p in enumerate(parts))
    out = []
    for j, (size, st) in enumerate(zip(shape, strides)):
        if size == 1:
            out.append(sympy.Integer(0))
        elif j == 0:
            out.append(floordiv(flat, st, var_ranges, sv))
        else:
            out.append(mod(floordiv(flat, st, var_ranges, sv), size, var_ranges, sv))
    return tuple(out)


def _split(expr, d):
    """(sum of expr's terms divided by d where d divides them, the other terms)."""
    q, r = [], []
    for t in sympy.Add.make_args(expr):
        num = divide(t, d)
        (q if num is not None else r).append(num if num is not None else t)
    return sympy.Add(*q), sympy.Add(*r)


def _hi(expr, var_ranges, sv):
    """The largest value of a non-negative index expression, by hints (None: unknown)."""
    if expr == 0:
        return 0
    for t in sympy.Add.make_args(expr):
        m = _mono(t)
        if (m[0] < 0) if m is not None else t.could_extract_minus_sign():
            return None
    try:
        lo = _evaluate(expr, {**sv.values, **{v: 0 for v in var_ranges}})
        hi = _evaluate(expr, {**sv.values, **{v: sv.hint(r) - 1 for v, r in
                                              var_ranges.items()}})
    except (TypeError, KeyError):
        return None
    if lo < 0:
        return None
    return hi


def floordiv(expr, d, var_ranges, sv):
    """expr // d, without the division where d divides every term but a small remainder."""
    q, r = _split(sympy.expand(expr), d)
    hi = _hi(r, var_ranges, sv)
    if hi is not None and hi < sv.hint(d):
        return q
    d = sympy.sympify(d)
    for f in sympy.Mul.make_args(d):  # (a*f + r) // (f*g) == a // g when r < f
        if f == d:
            continue
        q, r = _split(sympy.expand(expr), f)
        hi = _hi(r, var_ranges, sv)
        if hi is not None and hi < sv.hint(f):
            return floordiv(q, divide(d, f), var_ranges, sv)
    return FloorDiv(expr, d)


def mod(expr, d, var_ranges, sv):
    """expr % d, without the modulo where expr stays below d."""
    hi = _hi(expr, var_ranges, sv)
    if hi is not None and hi < sv.hint(d):
        return expr
    q, r = _split(sympy.expand(expr), d)
    hi = _hi(r, var_ranges, sv)
    if hi is not None and hi < sv.hint(d):
        return r
    return ModIndex(expr, d)


def _print(e, lang) -> str:
    if e.is_Integer:
        v = int(e)
        if lang == "c" and not -2**31 <= v < 2**31:
            return f"{v}LL"
        return str(v) if v >= 0 else f"({v})"
    if e.is_Symbol:
        return e.name
    if isinstance(e, FloorDiv):
        op = "/" if lang == "c" else "//"
        return f"({_print(e.args[0], lang)} {op} {_print(e.args[1], lang)})"
    if isinstance(e, ModIndex):
        return f"({_print(e.args[0], lang)} % {_print(e.args[1], lang)})"
    if e.is_Add:
        return "(" + " + ".join(_print(a, lang) for a in e.args) + ")"
    if e.is_Mul:
        return "(" + "*".join(_print(a, lang) for a in e.args) + ")"
    if e.is_Pow and e.exp.is_Integer and e.exp > 0:
        return "(" + "*".join([_print(e.base, lang)] * int(e.exp)) + ")"
    raise TypeError(f"cannot print index expression {e}")


def cexpr(e) -> str:
    """C++ source of an index expression (int64_t arithmetic)."""
    s = _print(sympy.sympify(e), "c")
    return s[1:-1] if s.startswith("(") and s.endswith(")") and _balanced(s[1:-1]) else s


def pyexpr(e) -> str:
    """Python / Triton source of an index expression."""
    return _print(sympy.sympify(e), "py")


def _balanced(s: str) -> bool:
    d = 0
    for ch in s:
        d += ch == "("
        d -= ch == ")"
        if d < 0:
            return False
    return d == 0
