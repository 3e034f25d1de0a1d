"""Symbolic sizes: a sympy-backed `ShapeEnv` and the `SymInt` / `SymFloat` / `SymBool` values
fake tensors carry as sizes under `make_fx(tracing_mode="symbolic")`.

Each input size becomes a symbol (sizes 0 and 1 stay concrete, equal sizes share one symbol:
PyTorch's 0/1 specialization and duck shaping); symbols range over [2, inf). A Python decision
on a symbolic value (`if s0 > 4`, `int(s0)`) is answered from the traced inputs' sizes (the
hints) and recorded as a guard, unless the range alone decides it.

>>> env = ShapeEnv()
>>> s = env.create_symint(6, ("x", 0))
>>> (s * 2 + 1, bool(s == 1), env.guards)
(2*s0 + 1, False, [])
>>> bool(s > 4), env.format_guards()
(True, ["L['x'].size()[0] > 4"])
"""
from __future__ import annotations

import operator

import sympy

__all__ = ["ShapeEnv", "SymInt", "SymFloat", "SymBool", "is_symbolic", "guard_int",
           "GuardOnDataDependentSymNode"]


class ConstraintViolationError(RuntimeError):
    """A size marked dynamic (`mark_dynamic`) that the traced program needs to be a constant."""


__all__ += ["ConstraintViolationError"]


class GuardOnDataDependentSymNode(RuntimeError):
    """A Python decision on a size only the data knows (an unbacked symbol, `nonzero`'s u0)."""


class ShapeEnv:
    """The symbols of one trace: their hints, where they came from, and the guards taken."""

    def __init__(self, *, specialize_zero_one: bool = True, duck_shape: bool = True):
        self.specialize_zero_one = specialize_zero_one
        self.duck_shape = duck_shape
        self.var_to_val: dict = {}      # Symbol -> the traced size
        self.var_to_sources: dict = {}  # Symbol -> [(input name, dim), ...]
        self.guards: list = []          # sympy boolean expressions that held when traced
        self._by_val: dict = {}
        self._shift: dict = {}          # Symbol -> t + 2 with t >= 0: the range [2, inf)
        self._static_cache: dict = {}
        self.unbacked: list = []        # unbacked symbols, in creation order
        self.allow_scalar_outputs = True  # item() gives an unbacked symbol (as PyTorch's)

    def create_symbol(self, val: int, source=None):
        """A symbol for an input size (or the int itself for 0 and 1)."""
        if self.specialize_zero_one and val in (0, 1):
            return sympy.Integer(val)
        if self.duck_shape and val in self._by_val:
            s = self._by_val[val]
        else:
            s = sympy.Symbol(f"s{len(self.var_to_val)}", positive=True, integer=True)
            self.var_to_val[s] = val
            self._by_val[val] = s
            self._shift[s] = sympy.Symbol(f"_t{len(self._shift)}", integer=True,
                                          nonnegative=True) + 2
        if source is not None:
            self.var_to_sources.setdefault(s, []).append(source)
        return s

    def create_unbacked_symint(self) -> SymInt:
        """A size no input gives (`nonzero`'s row count): no hint, range [0, inf); deciding
        anything its range does not decide raises GuardOnDataDependentSymNode."""
        u = sympy.Symbol(f"u{len(self.unbacked)}", integer=True, nonnegative=True)
        self.unbacked.append(u)
        return SymInt(u, self)

    def create_unbacked_symint_scalar(self) -> SymInt:
        """`t.item()` of an integer tensor: any integer, no hint."""
        u = sympy.Symbol(f"u{len(self.unbacked)}", integer=True)
        self.unbacked.append(u)
        return SymInt(u, self)

    def create_unbacked_symfloat(self) -> SymFloat:
        """`t.item()` of a floating tensor."""
        u = sympy.Symbol(f"u{len(self.unbacked)}", real=True)
        self.unbacked.append(u)
        return SymFloat(u, self)

    def create_symint(self, val: int, source=None):
        return wrap_int(self.create_symbol(val, source), self)

    def size_hint(self, expr):
        return expr.xreplace(self.var_to_val)

    def _static(self, expr):
        """expr's value if the symbols' ranges alone decide it, else None."""
        hit = self._static_cache.get(expr)
        if hit is None:
            # relations auto-evaluate over t >= 0 (s = t + 2) when the range decides them
            r = expr.xreplace(self._shift)
            if r not in (sympy.true, sympy.false) and isinstance(r, sympy.Rel):
                r = sympy.Rel(sympy.expand(r.lhs - r.rhs), 0, r.rel_op)
            hit = self._static_cache[expr] = bool(r) if r in (sympy.true, sympy.false) else ()
        return None if hit == () else hit

    def evaluate_expr(self, expr) -> bool:
        """A decision on a symbolic boolean: the traced answer, guarded when it could vary."""
        static = self._static(expr)
        if static is not None:
            return static
        if any(u in expr.free_symbols for u in self.unbacked):
            raise GuardOnDataDependentSymNode(
                f"Could not guard on data-dependent expression {expr} (unhinted: "
                f"{sorted(str(u) for u in expr.free_symbols if u in self.unbacked)})")
        val = bool(self.size_hint(expr))
        g = expr if val else sympy.Not(expr)
        if g not in self.guards:
            self.guards.append(g)
        return val

    def specialize(self, expr) -> int:
        """`int(s0)`: the traced value, guarded to stay that value."""
        if any(u in expr.free_symbols for u in self.unbacked):
            raise GuardOnDataDependentSymNode(f"Could not specialize data-dependent "
                                              f"expression {expr} to an int")
        val = int(self.size_hint(expr))
        if not expr.is_number:
            self.evaluate_expr(sympy.Eq(expr, val))
        return val

    def format_guards(self) -> list:
        """The guards as Python expressions over the inputs (`L['x'].size()[0] > 4`)."""
        names = {s: sympy.Symbol(f"L['{src[0][0]}'].size()[{src[0][1]}]")
                 for s, src in self.var_to_sources.items() if src}
        return [_pystr(g.xreplace(names)) for g in self.guards]

    def evaluate_guards(self, sizes: dict) -> bool:
        """Whether the guards hold for other input sizes: {(input name, dim): size}."""
        env = {}
        for s, srcs in self.var_to_sources.items():
            for src in srcs:
                if src in sizes:
                    env[s] = sizes[src]
        return all(bool(g.xreplace(env)) for g in self.guards)


def _pystr(e) -> str:
    if isinstance(e, sympy.Not):
        return f"not ({_pystr(e.args[0])})"
    ops = {sympy.Eq: "==", sympy.Ne: "!=", sympy.Lt: "<", sympy.Le: "<=", sympy.Gt: ">",
           sympy.Ge: ">="}
    for cls, op in ops.items():
        if isinstance(e, cls):
            return f"{e.lhs} {op} {e.rhs}"
    return str(e)


def wrap_int(expr, env: ShapeEnv):
    expr = sympy.sympify(expr)
    return int(expr) if expr.is_Integer else SymInt(expr, env)


def _unwrap(x):
    if isinstance(x, (SymInt, SymFloat, SymBool)):
        return x.expr
    if isinstance(x, bool):
        return sympy.true if x else sympy.false
    return sympy.sympify(x)


class _SymValue:
    __slots__ = ("expr", "env")

    def __init__(self, expr, env: ShapeEnv):
        self.expr = expr
        self.env = env

    def __repr__(self) -> str:
        return str(self.expr)

    def __hash__(self):
        raise TypeError(f"unhashable type: non-nested {type(self).__name__}")

    def hint(self):
        return self.env.size_hint(self.expr)

    def _cmp(self, other, rel):
        if not isinstance(other, (int, float, _SymValue)):
            return NotImplemented
        return SymBool(rel(self.expr, _unwrap(other)), self.env)

    def __eq__(self, o):
        return self._cmp(o, sympy.Eq)

    def __ne__(self, o):
        return self._cmp(o, sympy.Ne)

    def __lt__(self, o):
        return self._cmp(o, sympy.Lt)

    def __le__(self, o):
        return self._cmp(o, sympy.Le)

    def __gt__(self, o):
        return self._cmp(o, sympy.Gt)

    def __ge__(self, o):
        return self._cmp(o, sympy.Ge)


def _arith(fn, reflected=False):
    def impl(self, other):
        if not isinstance(other, (int, float, _SymValue)):
            return NotImplemented
        a, b = self.expr, _unwrap(other)
        if reflected:
            a, b = b, a
        r = fn(a, b)
        is_float = isinstance(self, SymFloat) or isinstance(other, (float, SymFloat)) or \
            fn is operator.truediv
        if is_float:
            return SymFloat(r, self.env) if not r.is_number else float(r)
        return wrap_int(r, self.env)
    return impl


def _floordiv(a, b):
    return sympy.floor(a / b)


def _pow(a, b):
    return a ** b


class SymInt(_SymValue):
    """A symbolic integer size: arithmetic builds sympy expressions; decisions guard."""

    _sym_kind = "int"

    __add__, __radd__ = _arith(operator.add), _arith(operator.add, True)
    __sub__, __rsub__ = _arith(operator.sub), _arith(operator.sub, True)
    __mul__, __rmul__ = _arith(operator.mul), _arith(operator.mul, True)
    __floordiv__, __rfloordiv__ = _arith(_floordiv), _arith(_floordiv, True)
    __mod__, __rmod__ = _arith(sympy.Mod), _arith(sympy.Mod, True)
    __truediv__, __rtruediv__ = _arith(operator.truediv), _arith(operator.truediv, True)
    __pow__, __rpow__ = _arith(_pow), _arith(_pow, True)

    def __neg__(self):
        return wrap_int(-self.expr, self.env)

    def __pos__(self):
        return self

    def __abs__(self):
        return self  # sizes are positive

    def __int__(self) -> int:
        return self.env.specialize(self.expr)

    __index__ = __int__

    def __float__(self) -> float:
        return float(self.env.specialize(self.expr))

    def __bool__(self) -> bool:
        return self.env.evaluate_expr(sympy.Ne(self.expr, 0))

    def __round__(self, ndigits=None):
        return self

    def __ceil__(self):
        return self

    def __floor__(self):
        return self


class SymFloat(_SymValue):
    """A symbolic float (`s0 ** 0.5`, `s0 / 2`)."""

    _sym_kind = "float"

    __add__, __radd__ = _arith(operator.add), _arith(operator.add, True)
    __sub__, __rsub__ = _arith(operator.sub), _arith(operator.sub, True)
    __mul__, __rmul__ = _arith(operator.mul), _arith(operator.mul, True)
    __truediv__, __rtruediv__ = _arith(operator.truediv), _arith(operator.truediv, True)
    __pow__, __rpow__ = _arith(_pow), _arith(_pow, True)

    def __neg__(self):
        return SymFloat(-self.expr, self.env)

    def __float__(self) -> float:
        val = float(self.hint())
        self.env.evaluate_expr(sympy.Eq(self.expr, val))
        return val

    def __ceil__(self):  # math.ceil((end - start) / step) in arange's meta: stays symbolic
        return wrap_int(sympy.ceiling(self.expr), self.env)

    def __floor__(self):
        return wrap_int(sympy.floor(self.expr), self.env)

    def __bool__(self) -> bool:
        return self.env.evaluate_expr(sympy.Ne(self.expr, 0))


class SymBool(_SymValue):
    """A symbolic condition; `bool()` answers it and records the guard."""

    _sym_kind = "bool"

    def __bool__(self) -> bool:
        return self.env.evaluate_expr(self.expr)

    def __and__(self, o):
        return SymBool(sympy.And(self.expr, _unwrap(o)), self.env)

    def __or__(self, o):
        return SymBool(sympy.Or(self.expr, _unwrap(o)), self.env)

    def __invert__(self):
        return SymBool(sympy.Not(self.expr), self.env)


def is_symbolic(x) -> bool:
    return isinstance(x, _SymValue)


def guard_int(x) -> int:
    return int(x)
