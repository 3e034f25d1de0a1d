"""Dynamic shapes in capture: which dims of an input become symbolic (`dynamic=True`,
`mark_dynamic`, or automatic dynamic: a dim whose size changed since the last capture), the fake
tensors with SymInt sizes that stand for those inputs, and the ShapeEnv's guards written as
Python over the call's arguments (`A[0]._shape[0] == A[1]._shape[0]`).

Sizes 0 and 1 stay concrete (0/1 specialization); equal sizes share one symbol (duck shaping),
guarded equal; every symbol ranges over [2, inf) and is guarded so.
"""
from __future__ import annotations

import math

__all__ = ["DynamicPolicy", "symbolic_fake", "shape_guards", "is_sym"]


def is_sym(x) -> bool:
    """A SymInt/SymFloat/SymBool that is still symbolic."""
    return getattr(type(x), "_sym_kind", None) is not None


class DynamicPolicy:
    """Per compiled function: `dynamic` (True/False/None) and the sizes each input source had
    at its last capture (None where a dim already changed): automatic dynamic's memory."""

    def __init__(self, dynamic):
        self.dynamic = dynamic
        self.seen: dict = {}

    def dims(self, t, src: str) -> set:
        """The dims of input t (read at src) that this capture makes symbolic."""
        n = t.ndim
        shape = tuple(t._shape)
        user = src.startswith(("A[", "K["))
        from ember.nn import Parameter
        if isinstance(t, Parameter):  # parameters stay static (PyTorch's default too)
            user = False
        dyn: set = set()
        if user and self.dynamic is True:
            dyn = set(range(n))
        elif user and self.dynamic is None:
            seen = self.seen.get(src)
            if seen is not None and len(seen) == n:
                dyn = {d for d in range(n) if seen[d] is None or seen[d] != shape[d]}
        dyn |= {d for d in getattr(t, "_dynamo_dynamic_indices", ()) if d < n}
        dyn |= {d for d in getattr(t, "_dynamo_weak_dynamic_indices", ()) if d < n}
        dyn -= set(getattr(t, "_dynamo_static_indices", ()))
        if user:
            self.seen[src] = tuple(None if d in dyn else shape[d] for d in range(n))
        # 0/1 specialization; a non-contiguous input keeps its (concrete) strides: static
        dyn = {d for d in dyn if shape[d] not in (0, 1)}
        if dyn and not t.is_contiguous():
            return set()
        return dyn


def symbolic_fake(tr, t, src: str, dims: set):
    """The fake twin of real input t with dims `dims` symbolic (symbols from tr.shape_env);
    returns (fake, [(symbol, dim, is_new)])."""
    from ember._device import device as Device
    from ember._size import contiguous_strides
    from ember._subclasses.fake_tensor import FakeTensor
    from ember._tensor import Storage
    from ember.fx.experimental.symbolic_shapes import wrap_int
    env = tr.get_shape_env()
    shape, syms = [], []
    for d, n in enumerate(t._shape):
        if d in dims:
            known = n in env._by_val
            s = env.create_symbol(n, (src, d))
            syms.append((s, d, not known))
            shape.append(wrap_int(s, env))
        else:
            shape.append(n)
    shape = tuple(shape)
    stride = contiguous_strides(shape)
    nbytes = t.dtype.itemsize
    for n in shape:
        nbytes = nbytes * n
    f = FakeTensor._make(Storage(None, Device("meta"), nbytes), shape, stride, 0, t.dtype,
                         t.device)
    f.fake_mode = tr.fake
    if t.requires_grad:
        f._requires_grad = True
    tr.fake._memo[id(t)] = (t, f)
    return f, syms


def size_src(src: str, d: int) -> str:
    return f"{src}._shape[{d}]"


def _rel_op(e):
    import sympy
    return {sympy.Eq: "==", sympy.Ne: "!=", sympy.Lt: "<", sympy.Le: "<=", sympy.Gt: ">",
            sympy.Ge: ">="}.get(type(e))


def pyexpr(e, names: dict) -> str:
    """A sympy expression as Python over the names of its symbols (NotImplementedError for
    what it cannot print)."""
    import sympy
    if e.is_Symbol:
        return names[e]
    if e.is_Integer:
        return str(int(e))
    if e.is_Rational:
        return f"({e.p} / {e.q})"
    if e.is_Float:
        return repr(float(e))
    if isinstance(e, sympy.Add):
        return "(" + " + ".join(pyexpr(a, names) for a in e.args) + ")"
    if isinstance(e, sympy.Mul):
        return "(" + " * ".join(pyexpr(a, names) for a in e.args) + ")"
    if isinstance(e, sympy.Pow):
        return f"({pyexpr(e.base, names)} ** {pyexpr(e.exp, names)})"
    if isinstance(e, sympy.floor):
        return f"___floor({pyexpr(e.args[0], names)})"
    if isinstance(e, sympy.ceiling):
        return f"___ceil({pyexpr(e.args[0], names)})"
    if isinstance(e, sympy.Mod):
        return f"({pyexpr(e.args[0], names)} % {pyexpr(e.args[1], names)})"
    if isinstance(e, sympy.Not):
        return f"not ({pyexpr(e.args[0], names)})"
    if isinstance(e, (sympy.And, sympy.Or)):
        j = " and " if isinstance(e, sympy.And) else " or "
        return "(" + j.join(pyexpr(a, names) for a in e.args) + ")"
    op = _rel_op(e)
    if op is not None:
        return f"{pyexpr(e.lhs, names)} {op} {pyexpr(e.rhs, names)}"
    raise NotImplementedError(f"cannot print {e!r} as a guard")


def shape_guards(tr) -> list:
    """(python code, description) of each guard the ShapeEnv took during the trace (and the
    backend's compile): relations between input sizes the graph relies on."""
    env = tr.shape_env
    if env is None:
        return []
    tr.env.setdefault("___floor", math.floor)
    tr.env.setdefault("___ceil", math.ceil)
    names, pretty = {}, {}
    for s, srcs in env.var_to_sources.items():
        src, d = srcs[0]
        names[s] = size_src(src, d)
        pretty[s] = f"{src}.size()[{d}]"
    _check_strict(tr, env)
    out = []
    for g in env.guards:
        desc = pyexpr(g, pretty).replace("___floor", "floor").replace("___ceil", "ceil")
        try:
            code = pyexpr(g, names)
        except NotImplementedError:
            # a form the printer lacks: evaluated by sympy at call time (slow, but sound)
            key = tr.obj(g, "SG")
            syms = list(g.free_symbols)
            tr.env[key + "s"] = syms
            code = (f"bool({key}.xreplace(dict(zip({key}s, "
                    f"[{', '.join(names[s] for s in syms)}]))))")
        out.append((code, f"{desc}  (symbolic sizes)"))
    return out


def _check_strict(tr, env) -> None:
    """mark_dynamic's promise: a marked dim the trace needed as a constant is an error (as
    PyTorch's ConstraintViolationError), not a silent specialization."""
    import sympy

    from ember.fx.experimental.symbolic_shapes import ConstraintViolationError
    for src, d, s in tr.strict:
        for g in env.guards:
            if isinstance(g, sympy.Eq) and s in g.free_symbols and len(g.free_symbols) == 1 \
                    and (g.lhs.is_number or g.rhs.is_number):
                val = env.var_to_val[s]
                raise ConstraintViolationError(
                    f"Constraints violated ({src}.size()[{d}])! Not all values of "
                    f"{src}.size()[{d}] are valid because {src}.size()[{d}] was inferred to be "
                    f"a constant ({val}). It was marked dynamic (mark_dynamic); use "
                    "maybe_mark_dynamic for a hint that may specialize.")
