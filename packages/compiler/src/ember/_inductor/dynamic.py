"""One compiled wrapper for every size of a graph with symbolic sizes (dynamic dims).

The graph is lowered on meta inputs whose symbolic dims take distinct large primes; each size
symbol of the lowering (`ks0`, ...) is then the prime factorization of its value: a monomial of
the graph's symbols (`s0 * s1 * 4`) or a constant. The lowering runs twice, with the primes in
opposite orders, and the symbolic path is taken only where both give the same kernels and the
same wrapper (no decision depended on the values); the wrapper reads the graph's symbols from
its inputs at each call and evaluates the size expressions (sympy, printed as Python).
Sizes used as values (`x.view(s0, -1)`, AOT graphs' `4 * s0`) are `SymVal`s of the lowering.
Anything else (non-contiguous inputs, lowerings that differ by size) compiles per size. CPU and
CUDA graphs alike: Triton kernels take their sizes as (unspecialized) arguments too.
"""
from __future__ import annotations

import sympy

from ember._tensor import Tensor

__all__ = ["SymPlan", "plan", "key"]

_PRIMES = (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069)


def _expr(v):
    return getattr(v, "expr", None) if getattr(type(v), "_sym_kind", None) == "int" else None


class SymPlan:
    """Where each graph symbol is read from: (input index, dim) or (input index, None) for a
    size input; per input, its symbolic shape (sympy expressions or ints)."""

    def __init__(self, shapes, symbols, sources):
        self.shapes, self.symbols, self.sources = shapes, symbols, sources
        self.from_args = False   # int inputs are the sizes, used as values (AOT graphs)


def plan(gm, args):
    """A SymPlan for gm, or False where the one-wrapper path does not apply."""
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if all("val" not in n.meta for n in phs):
        return _plan_from_args(args)
    shapes, sources, symbols = [], {}, set()
    for i, n in enumerate(phs):
        v = n.meta.get("val")
        e = _expr(v)
        if e is not None:
            symbols |= e.free_symbols
            if e.is_Symbol:
                sources.setdefault(e, (i, None))
            shapes.append(e)
        elif isinstance(v, Tensor):
            shape = []
            for d, s in enumerate(v._shape):
                e = _expr(s)
                if e is None:
                    shape.append(int(s))
                    continue
                symbols |= e.free_symbols
                if e.is_Symbol:
                    sources.setdefault(e, (i, d))
                shape.append(e)
            shapes.append(tuple(shape))
        else:
            shapes.append(None)
    symbols = sorted(symbols, key=str)
    if not symbols or any(s not in sources for s in symbols) or len(symbols) > len(_PRIMES):
        return False
    return SymPlan(shapes, symbols, sources)


def _plan_from_args(args):
    """AOT autograd's forward and backward graphs (no shapes recorded): their int inputs are the
    sizes; a tensor dim of the same value is taken as that size (the two lowerings and the
    per-call check in `key` catch a wrong guess)."""
    shapes, sources, by_value = [], {}, {}
    for i, a in enumerate(args):
        if type(a) is int and a >= 2:
            s = by_value.get(a)
            if s is None:
                s = by_value[a] = sympy.Symbol(f"s{len(by_value)}", integer=True, positive=True)
                sources[s] = (i, None)
            shapes.append(s)
    if not by_value:
        return False
    shapes = []
    for a in args:
        if isinstance(a, Tensor):
            shapes.append(tuple(by_value.get(int(d), int(d)) for d in a._shape))
        elif type(a) is int and a >= 2:
            shapes.append(by_value[a])
        else:
            shapes.append(None)
    p = SymPlan(shapes, sorted(sources, key=str), sources)
    p.from_args = True
    return p


def key(p: SymPlan, args):
    """The variant key of a call (None: these inputs take the per-size path, as where the
    inputs' sizes do not fit the symbolic shapes)."""
    vals = {}
    for s, (i, d) in p.sources.items():
        a = args[i]
        vals[s] = a if d is None else (a._shape[d] if isinstance(a, Tensor) and d < a.dim()
                                       else None)
        if not isinstance(vals[s], int):
            return None
    out = []
    dev = device_of(args)
    for a, shape in zip(args, p.shapes):
        if isinstance(a, Tensor):
            if a.device.type != dev or not isinstance(shape, tuple) or \
                    not a.is_contiguous() or len(shape) != a.dim():
                return None
            for s, want in zip(a._shape, shape):
                if isinstance(want, int) and s != want:
                    return None
                if not isinstance(want, int) and (s < 2 or s != _eval(want, vals)):
                    return None   # 0/1 are specialized
            out.append((a.dtype, dev))
        elif shape is None or isinstance(shape, tuple):
            out.append((type(a), a))
        elif a != _eval(shape, vals):
            return None
    return tuple(out)


def device_of(args) -> str:
    """The device type of the graph's tensors ("cpu" or "cuda": Triton kernels take their
    sizes as arguments too; the first tensor decides, `key` rejects a mix)."""
    for a in args:
        if isinstance(a, Tensor):
            return a.device.type if a.device.type in ("cpu", "cuda") else "cpu"
    return "cpu"


def _eval(e, vals):
    if e.is_Symbol:
        return vals[e]
    return int(e.subs(vals))


def fake_inputs(p: SymPlan, args, primes):
    """Meta tensors (and ints) for the graph's inputs, symbol i of the plan at primes[i]."""
    from .lowering import _meta_like
    from .sizevars import contiguous_strides
    vals = dict(zip(p.symbols, primes))
    out = []
    for a, shape in zip(args, p.shapes):
        if isinstance(a, Tensor):
            sh = [int(sympy.sympify(s).subs(vals)) for s in shape]
            st = [int(x) for x in contiguous_strides(sh)]
            out.append(_meta_like(sh, st, 0, a.dtype))
        elif shape is not None and not isinstance(shape, tuple):
            out.append(int(shape.subs(vals)))
        else:
            out.append(a)
    return out


def size_exprs(sv, p: SymPlan, primes):
    """{ks symbol: expression in the graph's symbols} from the lowering's size values, by
    factorization over the primes (constants: values without those factors)."""
    by_prime = dict(zip(primes, p.symbols))
    out = {}
    for ks, v in sv.values.items():
        e = sympy.Integer(1)
        for q, s in by_prime.items():
            while v % q == 0:
                v //= q
                e = e * s
        out[ks] = e * v
    return out
