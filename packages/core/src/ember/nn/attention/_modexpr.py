"""FlexAttention's score_mod and mask_mod as expression trees, for the fused kernels: a mod is
called once on symbolic scalars (`Expr`) standing for the score `qk` and the indices b, h, q_idx,
kv_idx; the tree it returns renders as Triton (`to_triton`) or C++ (`to_cpp`), and `grad` gives
d(score_mod)/d(score) as another tree (the backward kernels' chain rule through the mod).

A captured tensor indexed by such values (`doc_id[q_idx]`, `bias[h]`: every dim indexed) reads
it in the kernel: `trace` lists those tensors, kernels take them as extra pointers. A mod this
cannot express (Python control flow on a value, calling an ember function on a value, a captured
tensor that needs gradients) raises `Unsupported`: the caller runs the eager reference.

>>> s, dsd = trace_score(lambda s, b, h, q, k: 2.0 * (s / 2.0).tanh())
>>> to_cpp(s)[:20]
'((T)2.0 * std::tanh('
"""
from __future__ import annotations

import math

__all__ = ["Expr", "Unsupported", "trace", "trace_score", "trace_mask", "grad", "to_triton",
           "to_cpp"]


class Unsupported(Exception):
    """A mod the fused kernels cannot inline."""


_CMP = ("<", "<=", ">", ">=", "==", "!=")
_LOGIC = ("&", "|", "^")
_UNARY = ("neg", "abs", "exp", "log", "sqrt", "sigmoid", "tanh", "not", "sign")


class Expr:
    """A node: `op` ("var", "const", a binary operator, a unary name, "where"), its `args`,
    and its kind: "f" (float), "i" (integer) or "b" (bool)."""

    __slots__ = ("op", "args", "kind")

    def __init__(self, op, args, kind):
        self.op, self.args, self.kind = op, tuple(args), kind

    # arithmetic ---------------------------------------------------------------------------
    def _bin(self, op, other, rev=False):
        o = _lift(other)
        a, b = (o, self) if rev else (self, o)
        if op in _CMP:
            kind = "b"
        elif op in _LOGIC:
            kind = "b" if a.kind == b.kind == "b" else "i"
        elif op == "/":
            kind = "f"
        else:
            kind = "f" if "f" in (a.kind, b.kind) else "i"
        return Expr(op, (a, b), kind)

    def __add__(self, o): return self._bin("+", o)
    def __radd__(self, o): return self._bin("+", o, True)
    def __sub__(self, o): return self._bin("-", o)
    def __rsub__(self, o): return self._bin("-", o, True)
    def __mul__(self, o): return self._bin("*", o)
    def __rmul__(self, o): return self._bin("*", o, True)
    def __truediv__(self, o): return self._bin("/", o)
    def __rtruediv__(self, o): return self._bin("/", o, True)
    def __floordiv__(self, o): return self._bin("//", o)
    def __rfloordiv__(self, o): return self._bin("//", o, True)
    def __mod__(self, o): return self._bin("%", o)
    def __rmod__(self, o): return self._bin("%", o, True)
    def __lt__(self, o): return self._bin("<", o)
    def __le__(self, o): return self._bin("<=", o)
    def __gt__(self, o): return self._bin(">", o)
    def __ge__(self, o): return self._bin(">=", o)
    def __eq__(self, o): return self._bin("==", o)  # noqa: PLE0307 (an expression node)
    def __ne__(self, o): return self._bin("!=", o)
    def __and__(self, o): return self._bin("&", o)
    def __rand__(self, o): return self._bin("&", o, True)
    def __or__(self, o): return self._bin("|", o)
    def __ror__(self, o): return self._bin("|", o, True)
    def __xor__(self, o): return self._bin("^", o)
    __hash__ = object.__hash__

    def _un(self, op):
        kind = "b" if op == "not" else ("f" if op not in ("neg", "abs", "sign") else self.kind)
        return Expr(op, (self,), kind)

    def __neg__(self): return self._un("neg")
    def __abs__(self): return self._un("abs")
    def __invert__(self): return self._un("not") if self.kind == "b" else _raise("~ on ints")
    def abs(self): return self._un("abs")
    def exp(self): return self._un("exp")
    def log(self): return self._un("log")
    def sqrt(self): return self._un("sqrt")
    def sigmoid(self): return self._un("sigmoid")
    def tanh(self): return self._un("tanh")

    def new_ones(self, *a, **k):
        return Expr("const", (True,), "b")

    def new_zeros(self, *a, **k):
        return Expr("const", (False,), "b")

    @property
    def device(self):
        return None

    def __bool__(self):
        raise Unsupported("Python control flow on a value inside a mod")

    def __index__(self):
        raise Unsupported("indexing with a value inside a mod (a captured tensor)")


def _raise(what):
    raise Unsupported(what)


def _lift(v) -> Expr:
    if isinstance(v, Expr):
        return v
    if isinstance(v, bool):
        return Expr("const", (v,), "b")
    if isinstance(v, int):
        return Expr("const", (v,), "i")
    if isinstance(v, float):
        return Expr("const", (v,), "f")
    raise Unsupported(f"a {type(v).__name__} in a score_mod/mask_mod")


def _where(c, a, b) -> Expr:
    a, b = _lift(a), _lift(b)
    return Expr("where", (c, a, b), "f" if "f" in (a.kind, b.kind) else a.kind)


_VARS = {"qk": "f", "b": "i", "h": "i", "qi": "i", "ki": "i"}


def _var(name):
    return Expr("var", (name,), _VARS[name])


class _Captured:
    """While a mod is traced: `Tensor.__getitem__` with symbolic indices reads the tensor in
    the kernel (a "load" node); the tensors read, in order, in `bufs`."""

    def __init__(self, bufs):
        self.bufs = bufs

    def __enter__(self):
        from ember import Tensor
        self.orig = orig = Tensor.__getitem__
        bufs = self.bufs

        def getitem(t, idx):
            items = idx if isinstance(idx, tuple) else (idx,)
            if not any(isinstance(i, Expr) for i in items):
                return orig(t, idx)
            return _load(t, items, bufs)
        Tensor.__getitem__ = getitem
        return self

    def __exit__(self, *exc):
        from ember import Tensor
        Tensor.__getitem__ = self.orig
        return False


def _load(t, items, bufs):
    import ember
    if t.requires_grad and ember.is_grad_enabled():
        raise Unsupported("a captured tensor that needs gradients")
    if len(items) != t.dim() or t.numel() == 0:
        raise Unsupported("a captured tensor indexed partly")
    name = str(t.dtype).split(".")[-1]
    if name not in _CPPT:
        raise Unsupported(f"a captured {t.dtype} tensor")
    t = t.contiguous()
    at = next((i for i, b in enumerate(bufs) if b is t), None)
    if at is None:
        bufs.append(t)
        at = len(bufs) - 1
    flat, stride = _lift(0), 1
    for i, n in reversed(list(zip(items, t.shape))):
        i = _lift(i)
        if i.kind != "i":
            raise Unsupported("a captured tensor indexed by a non-integer")
        flat = flat + (i if stride == 1 else i * stride)
        stride *= n
    kind = "b" if t.dtype == ember.bool else ("f" if t.dtype.is_floating_point else "i")
    return Expr("load", (at, flat, t.numel(), name), kind)


def trace(score_mod, mask_mod):
    """(score, d score / d qk, mask, captured tensors the expressions read)."""
    bufs: list = []
    with _Captured(bufs):
        s, ds = trace_score(score_mod)
        m = trace_mask(mask_mod)
    return s, ds, m, bufs


def trace_score(score_mod):
    """(score expression, its derivative by the score) of a score_mod (None: identity)."""
    qk = _var("qk")
    if score_mod is None:
        return qk, Expr("const", (1.0,), "f")
    try:
        s = _lift(score_mod(qk, _var("b"), _var("h"), _var("qi"), _var("ki")))
    except Unsupported:
        raise
    except Exception as e:  # anything else the mod does to a value: not inlinable
        raise Unsupported(f"{type(e).__name__}: {e}") from None
    if s.kind == "b":
        raise Unsupported("a score_mod returning a bool")
    d = grad(s)
    return s, (Expr("const", (0.0,), "f") if d is None else d)


def trace_mask(mask_mod):
    """The bool expression of a mask_mod (None: keep every score)."""
    if mask_mod is None:
        return Expr("const", (True,), "b")
    try:
        m = _lift(mask_mod(_var("b"), _var("h"), _var("qi"), _var("ki")))
    except Unsupported:
        raise
    except Exception as e:
        raise Unsupported(f"{type(e).__name__}: {e}") from None
    return m if m.kind == "b" else Expr("!=", (m, _lift(0)), "b")


def grad(e: Expr):
    """d e / d qk as an expression, None where it is zero (integer and bool parts, constants)."""
    op, a = e.op, e.args
    if op == "var":
        return Expr("const", (1.0,), "f") if a[0] == "qk" else None
    if op == "const" or e.kind != "f" and op != "where":
        return None
    if op in ("+", "-"):
        da, db = grad(a[0]), grad(a[1])
        if db is None:
            return da
        if da is None:
            return db if op == "+" else -db
        return da + db if op == "+" else da - db
    if op == "*":
        da, db = grad(a[0]), grad(a[1])
        terms = [t for t in (None if da is None else da * a[1],
                             None if db is None else a[0] * db) if t is not None]
        return None if not terms else terms[0] if len(terms) == 1 else terms[0] + terms[1]
    if op == "/":
        da, db = grad(a[0]), grad(a[1])
        terms = [t for t in (None if da is None else da / a[1],
                             None if db is None else -(a[0] * db / (a[1] * a[1])))
                 if t is not None]
        return None if not terms else terms[0] if len(terms) == 1 else terms[0] + terms[1]
    if op == "where":
        da, db = grad(a[1]), grad(a[2])
        if da is None and db is None:
            return None
        zero = Expr("const", (0.0,), "f")
        return _where(a[0], zero if da is None else da, zero if db is None else db)
    if op in _UNARY:
        da = grad(a[0])
        if da is None:
            return None
        x = a[0]
        local = {"neg": lambda: -da, "abs": lambda: da * x._un("sign"),
                 "exp": lambda: da * e, "log": lambda: da / x,
                 "sqrt": lambda: da * 0.5 / e, "sigmoid": lambda: da * e * (1.0 - e),
                 "tanh": lambda: da * (1.0 - e * e), "sign": lambda: None}[op]
        return local()
    return None   # %, //, comparisons: piecewise constant


# ---- rendering ------------------------------------------------------------------------------
def _const(v, target):
    if isinstance(v, bool):
        return ("(qi >= 0)" if v else "(qi < 0)") if target == "triton" else \
            ("true" if v else "false")
    if isinstance(v, float):
        if not math.isfinite(v):
            if target == "triton":
                return 'float("nan")' if v != v else ('float("inf")' if v > 0 else
                                                       'float("-inf")')
            return "NAN" if v != v else ("INFINITY" if v > 0 else "-INFINITY")
        return repr(v) if target == "triton" else f"(T){v!r}"
    return repr(v)


_TRITON_UN = {"neg": "(-{0})", "abs": "tl.abs({0})", "exp": "tl.exp({0})", "log": "tl.log({0})",
              "sqrt": "tl.sqrt({0})", "sigmoid": "tl.sigmoid({0})",
              "tanh": "(2.0 * tl.sigmoid(2.0 * {0}) - 1.0)", "not": "({0} == 0)",
              "sign": "tl.where({0} >= 0, 1.0, -1.0)"}
_CPP_UN = {"neg": "(-{0})", "abs": "std::abs({0})", "exp": "std::exp({0})",
           "log": "std::log({0})", "sqrt": "std::sqrt({0})",
           "sigmoid": "((T)1 / ((T)1 + std::exp(-{0})))", "tanh": "std::tanh({0})",
           "not": "(!{0})", "sign": "({0} >= 0 ? (T)1 : (T)-1)"}


_TL = {"float32": "tl.float32", "float64": "tl.float64"}
_CPPT = {"float32": "float", "float64": "double", "bool": "bool", "uint8": "uint8_t",
         "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t"}


def to_triton(e: Expr) -> str:
    """Triton source of e over the kernel's names qk, b, h, qi, ki (captured tensors: BUF<i>,
    indices clamped into the tensor: padded rows and columns read element 0)."""
    op, a = e.op, e.args
    if op == "var":
        return a[0]
    if op == "load":
        i = f"tl.minimum(tl.maximum({to_triton(a[1])}, 0), {a[2] - 1})"
        v = f"tl.load(BUF{a[0]} + {i})"
        return f"{v}.to(tl.float32)" if a[3] in _TL else (f"({v} != 0)" if e.kind == "b" else v)
    if op == "const":
        return _const(a[0], "triton")
    if op == "where":
        return f"tl.where({to_triton(a[0])}, {to_triton(a[1])}, {to_triton(a[2])})"
    if op in _UNARY:
        return _TRITON_UN[op].format(to_triton(a[0]))
    x, y = to_triton(a[0]), to_triton(a[1])
    if op == "%":   # floor modulo, as PyTorch's remainder (Triton's % truncates as C's)
        return f"((({x} % {y}) + {y}) % {y})"
    if op == "//":
        return f"(({x} - ((({x} % {y}) + {y}) % {y})) // {y})"
    if op == "/" and a[0].kind != "f" and a[1].kind != "f":
        x = f"({x}).to(tl.float32)"
    return f"({x} {op} {y})"


def to_cpp(e: Expr) -> str:
    """C++ source of e over qk (type T), b, h, qi, ki (int64_t), bufs (captured tensors)."""
    op, a = e.op, e.args
    if op == "var":
        return a[0]
    if op == "load":
        i = f"std::min<int64_t>(std::max<int64_t>({to_cpp(a[1])}, 0), {a[2] - 1})"
        return f"((const {_CPPT[a[3]]}*)bufs[{a[0]}])[{i}]"
    if op == "const":
        return _const(a[0], "cpp")
    if op == "where":
        c, x, y = to_cpp(a[0]), to_cpp(a[1]), to_cpp(a[2])
        if e.kind == "f":
            x, y = f"(T)({x})", f"(T)({y})"
        return f"({c} ? {x} : {y})"
    if op in _UNARY:
        return _CPP_UN[op].format(to_cpp(a[0]))
    x, y = to_cpp(a[0]), to_cpp(a[1])
    if op == "%":
        return f"emflex_mod({x}, {y})"
    if op == "//":
        return f"emflex_fdiv({x}, {y})"
    if op == "/" and a[0].kind != "f" and a[1].kind != "f":
        x = f"(T)({x})"
    if op in _LOGIC and a[0].kind == "b" and a[1].kind == "b":
        op = {"&": "&&", "|": "||", "^": "!="}[op]
    return f"({x} {op} {y})"
