"""The joint forward+backward graph of a captured graph, traced on its fake tensors: the forward
is re-run on the capture's fake tensors (static sizes, or SymInt sizes from its ShapeEnv) under
recording, each op call kept on a tape, then the tape is walked backwards calling each entry's
`vjp` rule on fake tensors, so the backward ops are recorded (with symbolic sizes too: the joint
graph then runs on every size the capture's guards admit) and nothing is computed. (aot.py's
fallback runs the autograd engine on real tensors instead; ember's fake tensors carry no
autograd graph.)

Decisions the vjp rules take on sizes become guards of the capture's ShapeEnv: the compiled
entry's guards are fixed after the backend has run.
"""
from __future__ import annotations

import operator

from ember import Tensor
from ember._state import state
from ember.fx.experimental.proxy_tensor import ProxyTorchDispatchMode
from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule

__all__ = ["is_symbolic_graph", "trace_joint_symbolic", "SymbolicTraceError"]


class SymbolicTraceError(RuntimeError):
    """The graph holds something the symbolic joint trace does not model (aot.py then traces
    one joint graph per set of sizes instead)."""


def _is_sym(x) -> bool:
    return getattr(type(x), "_sym_kind", None) is not None


def is_symbolic_graph(gm) -> bool:
    """gm has symbolic size inputs (a capture with dynamic dims)."""
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            v = n.meta.get("val")
            if _is_sym(v) or (isinstance(v, Tensor) and any(_is_sym(s) for s in v._shape)):
                return True
    return False


class _TapeMode(ProxyTorchDispatchMode):
    """Recording that also keeps (op, schema-ordered args, result) of each recorded call."""

    def __init__(self, graph, decomps):
        super().__init__(graph, decomps)
        self.tape: list = []
        self.taping = True

    def track(self, t, node) -> None:
        super().track(t, node)
        from .partitioners import nbytes_of
        node.meta.setdefault("nbytes", nbytes_of(t))
        node.meta.setdefault("tmeta", (str(tuple(t._shape)), t.dtype))

    def __ember_dispatch__(self, op, args, out):
        if out is not None:
            raise SymbolicTraceError(f"{op.qualname} with out=")
        r = super().__ember_dispatch__(op, args, out)
        if self.taping and op not in self.decomposition_table and state.grad_enabled:
            self.tape.append((op, tuple(args), r))  # (under no_grad: nothing to differentiate)
        return r


def trace_joint_symbolic(gm, need):
    """(joint GraphModule, number of outputs, which outputs are differentiable) for gm, whose
    placeholders carry fake values (`meta["val"]`); or (None, n, diff) when no output needs a
    gradient."""
    import ember

    from .aot import _composites
    vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    fake = next(v.fake_mode for v in vals if isinstance(v, Tensor))
    graph = Graph()
    mode = _TapeMode(graph, _composites())
    for i, v in enumerate(vals):
        ph = graph.placeholder(f"primal{i}")
        if isinstance(v, Tensor):
            mode.track(v, ph)
        elif _is_sym(v):
            mode.sym_nodes[v.expr] = ph
    req = {id(v) for v, r in zip(vals, need) if r}
    from .partitioners import TaggingInterpreter
    with ember.enable_grad(), fake, mode:  # the graph's own no_grad regions switch it off
        outs = tuple(TaggingInterpreter(gm, graph).run(*vals))
    with ember.no_grad(), fake, mode:
        for op, args, r in mode.tape:
            _propagate(op, args, r, req)
        _check_writes(mode.tape, outs, req)
        diff = [isinstance(o, Tensor) and id(o) in req for o in outs]
        if not any(diff):
            return None, len(outs), diff
        mode.taping = False
        tans = []
        for i, o in enumerate(o for o, d in zip(outs, diff) if d):
            t = _fake_like(o, fake)
            mode.track(t, graph.placeholder(f"tangent{i}"))
            tans.append(t)
        grads = _backward(mode.tape, [o for o, d in zip(outs, diff) if d], tans, req)
        want = [grads.get(id(v)) for v, r in zip(vals, need) if r]
    graph.output(mode._arg(outs + tuple(want)))
    return GraphModule(dict(mode.constants), graph, "joint"), len(outs), diff


def _fake_like(o, fake):
    from ember._device import device as Device
    from ember._size import contiguous_strides
    from ember._subclasses.fake_tensor import FakeTensor
    from ember._tensor import Storage
    nbytes = o.dtype.itemsize
    for n in o._shape:
        nbytes = nbytes * n
    f = FakeTensor._make(Storage(None, Device("meta"), nbytes), o._shape,
                         contiguous_strides(o._shape), 0, o.dtype, o.device)
    f.fake_mode = fake
    return f


def _outputs(r) -> list:
    return list(r) if isinstance(r, (tuple, list)) else [r]


def _diff_inputs(op, args) -> list:
    """[(tensor or None, meta)] for the op's differentiable inputs, lists flattened."""
    from ember.autograd._graph import op_info
    inf = op_info(op)
    flat = []
    for i, is_list in zip(inf.diff_idx, inf.list_diff):
        xs = args[i] if is_list else [args[i]]
        for x in xs or ():
            flat.append(x if isinstance(x, Tensor) else None)
    return flat


def _check_writes(tape, outs, req: set) -> None:
    """An in-place write of a value needing a gradient into a tensor that does not (a copy_
    into a buffer) is modelled as detached: sound only if nothing reads that tensor later."""
    for i, (op, args, _) in enumerate(tape):
        if not (op.mutated_idx or op.inplace_of is not None):
            continue
        if not any(isinstance(a, Tensor) and id(a) in req for a in _flat_args(args)):
            continue
        dst = args[(op.mutated_idx or (0,))[0]]
        later = any(x is dst for _, a, _ in tape[i + 1:] for x in _flat_args(a))
        if later or any(o is dst for o in outs):
            raise SymbolicTraceError(f"{op.qualname} writes a gradient-carrying value into a "
                                     "tensor read later")


def _flat_args(args) -> list:
    return [x for a in args for x in (a if isinstance(a, (list, tuple)) else (a,))]


def _propagate(op, args, r, req: set) -> None:
    """Mark the outputs of a taped call that need a gradient (an input does, it is floating)."""
    from ember.autograd._graph import op_info
    if op.mutated_idx or op.inplace_of is not None:
        # a write that no gradient flows through (BatchNorm's running stats, a step counter)
        # stays in the forward (_check_writes: nothing reads the written tensor later); one
        # into a value that needs a gradient: the per-size path
        dst = args[(op.mutated_idx or (0,))[0]]
        if not isinstance(dst, Tensor) or id(dst) in req:
            raise SymbolicTraceError(f"in-place op {op.qualname} on a value that needs a "
                                     "gradient")
        return
    inf = op_info(op)
    if inf.detach or not any(x is not None and id(x) in req for x in _diff_inputs(op, args)):
        return
    outs = [o for o in _outputs(r) if isinstance(o, Tensor)
            and (o.dtype.is_floating_point or o.dtype.is_complex)]
    if not outs:
        return
    if inf.vjp is None:
        raise SymbolicTraceError(f"no derivative rule for {op.qualname}")
    if any(o.dtype.is_complex for o in outs):
        raise SymbolicTraceError(f"complex outputs of {op.qualname}")
    for o in outs:
        req.add(id(o))
        o._requires_grad = True  # vjp rules read it (a grad only for inputs that need one)


def _backward(tape, outs, tans, req: set) -> dict:
    """id(tensor) -> its gradient, from the tape's entries in reverse order."""
    import ember
    from ember.autograd._graph import op_info
    grads: dict = {}
    keep = []   # the tensors whose ids key `grads` stay alive

    def add(x, g):
        k = id(x)
        keep.append(x)
        grads[k] = g if k not in grads else grads[k] + g
    for o, t in zip(outs, tans):
        add(o, t)
    for op, args, r in reversed(tape):
        rs = _outputs(r)
        gs = [grads.get(id(o)) if isinstance(o, Tensor) else None for o in rs]
        if all(g is None for g in gs):
            continue
        ins = _diff_inputs(op, args)
        if any(o is x for o in rs for x in ins):
            raise SymbolicTraceError(f"{op.qualname} returned its input")
        inf = op_info(op)
        if isinstance(r, (tuple, list)):
            g = tuple(x if x is not None or not isinstance(o, Tensor) else ember.zeros_like(o)
                      for x, o in zip(gs, rs))
        else:
            g = gs[0]
        res = inf.vjp(g, r, *args)
        if not isinstance(res, (tuple, list)):
            res = (res,)
        flat = []
        for x, is_list in zip(res, inf.list_diff):
            flat.extend(x if x is not None else []) if is_list else flat.append(x)
        for x, gx in zip(ins, flat):
            if x is not None and gx is not None and id(x) in req:
                add(x, _fix(gx, x))
    return grads


def _size_key(n):
    return n.expr if _is_sym(n) else n   # (a sympy Integer equals its int: no sympy import)


def _fix(g, x):
    """g summed back to x's shape where a vjp broadcast it, cast to x's dtype (autograd's
    fix_grads, comparing symbolic sizes by their expressions: no guard on `s0 == 3`)."""
    import ember
    from ember.autograd._graph import sum_to
    if not isinstance(g, Tensor):
        g = ember.zeros_like(x) + g
    a, b = g._shape, x._shape
    if len(a) != len(b) or any(_size_key(m) != _size_key(n) for m, n in zip(a, b)):
        g = sum_to(g, b)
    if g.dtype is not x.dtype:
        g = g.to(x.dtype)
    return g


_ = operator
