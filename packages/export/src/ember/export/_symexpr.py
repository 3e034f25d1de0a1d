"""Symbolic size expressions of archives, read without eval: the srepr form PyTorch writes
(`Mul(Integer(2), Symbol('s77', positive=True, integer=True))`) parsed into a small tree that
evaluates on integers and prints as Python (`2*s77`). Anything outside the grammar (Symbol,
Integer, Add, Mul, FloorDiv, Mod, Max, Min) is refused: loading never runs code from a file."""
from __future__ import annotations

import re

__all__ = ["Expr", "parse_srepr", "sym", "SymExprError"]

_TOKEN = re.compile(r"\s*(?:(?P<name>[A-Za-z_]\w*)|(?P<int>-?\d+)|(?P<str>'[^']*')|(?P<p>[(),=]))")
_OPS = {"Add", "Mul", "FloorDiv", "Mod", "Max", "Min", "CleanDiv", "PythonMod"}


class SymExprError(ValueError):
    pass


class Expr:
    """op: 'sym' (args: name), 'int' (args: value) or one of _OPS (args: Exprs)."""

    def __init__(self, op: str, args: tuple):
        self.op, self.args = op, args

    def free_symbols(self) -> set[str]:
        if self.op == "sym":
            return {self.args[0]}
        if self.op == "int":
            return set()
        return set().union(*(a.free_symbols() for a in self.args))

    def evaluate(self, env: dict[str, int]) -> int:
        op, a = self.op, self.args
        if op == "sym":
            return env[a[0]]
        if op == "int":
            return a[0]
        v = [x.evaluate(env) for x in a]
        if op == "Add":
            return sum(v)
        if op == "Mul":
            r = 1
            for x in v:
                r *= x
            return r
        if op in ("FloorDiv", "CleanDiv"):
            return v[0] // v[1]
        if op in ("Mod", "PythonMod"):
            return v[0] % v[1]
        return max(v) if op == "Max" else min(v)

    def srepr(self) -> str:
        if self.op == "sym":
            return f"Symbol('{self.args[0]}', positive=True, integer=True)"
        if self.op == "int":
            return f"Integer({self.args[0]})"
        return f"{self.op}({', '.join(a.srepr() for a in self.args)})"

    def __str__(self) -> str:
        op, a = self.op, self.args
        if op in ("sym", "int"):
            return str(a[0])
        if op == "Add":
            return " + ".join(str(x) for x in a)
        if op == "Mul":
            return "*".join(str(x) if x.op in ("sym", "int", "Mul") else f"({x})" for x in a)
        if op in ("FloorDiv", "CleanDiv"):
            return f"(({a[0]})//({a[1]}))"
        if op in ("Mod", "PythonMod"):
            return f"(({a[0]}) % ({a[1]}))"
        return f"{op.lower()}({', '.join(str(x) for x in a)})"

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return isinstance(other, Expr) and self.srepr() == other.srepr()

    def __hash__(self) -> int:
        return hash(self.srepr())


def sym(name: str) -> Expr:
    return Expr("sym", (name,))


def parse_srepr(text: str) -> Expr:
    toks, pos, text = [], 0, text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise SymExprError(f"unreadable size expression {text!r} at {pos}")
        toks.append((m.lastgroup, m.group(m.lastgroup)))
        pos = m.end()
    toks.append(("end", ""))
    i = 0

    def take(kind, value=None):
        nonlocal i
        k, v = toks[i]
        if k != kind or (value is not None and v != value):
            raise SymExprError(f"unexpected {v!r} in size expression {text!r}")
        i += 1
        return v

    def call() -> Expr:
        name = take("name")
        take("p", "(")
        args = []
        while toks[i] != ("p", ")"):
            k = toks[i][0]
            if k == "name" and toks[i + 1] == ("p", "="):   # positive=True: assumptions
                take("name")
                take("p", "=")
                take("name")
            elif k == "int":
                args.append(int(take("int")))
            elif k == "str":
                args.append(take("str")[1:-1])
            else:
                args.append(call())
            if toks[i] == ("p", ","):
                take("p", ",")
        take("p", ")")
        if name == "Symbol" and len(args) == 1 and isinstance(args[0], str):
            if not args[0].isidentifier():
                raise SymExprError(f"bad symbol name {args[0]!r}")
            return sym(args[0])
        if name == "Integer" and len(args) == 1 and isinstance(args[0], int):
            return Expr("int", (args[0],))
        if name in _OPS and args and all(isinstance(a, Expr) for a in args):
            return Expr(name, tuple(args))
        raise SymExprError(f"size expression {text!r}: {name}(...) is not supported")

    e = call()
    take("end")
    return e
