"""Tracing a function given to a higher-order op (a `cond` branch, a `map` body) into its own
GraphModule while make_fx traces the caller: tensors and sizes the function reads from the
outer trace (closures, a module's parameters, symbolic sizes) become extra inputs of the
subgraph ("lifted"), so the subgraph is a closed function of its placeholders."""
from __future__ import annotations

from ember import Tensor
from ember._state import state
from ember.fx.experimental.proxy_tensor import ProxyTorchDispatchMode, sym_size
from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule
from ember.utils import _pytree as pytree


def proxy_mode():
    """The make_fx mode tracing this call, if any (the innermost one on the mode stack)."""
    for m in reversed(state.modes):
        if isinstance(m, ProxyTorchDispatchMode):
            return m
    return None


class SubgraphMode(ProxyTorchDispatchMode):
    """Records a higher-order op's function; values of the outer trace become placeholders."""

    def __init__(self, parent: ProxyTorchDispatchMode, graph: Graph):
        super().__init__(graph, parent.decomposition_table)
        self.parent = parent
        self.lifted: list = []     # outer graph values, one per lifted placeholder, in order
        self.sym_src: dict = {}    # symbol -> (placeholder, dim) of an input carrying it

    def lookup(self, t: Tensor):
        node = super().lookup(t)
        if node is None:
            outer = self.parent.lookup(t)
            if outer is not None:
                node = self.lift(outer, t)
        return node

    def lift(self, outer, value):
        """A new placeholder standing for the outer graph's value `outer`."""
        ph = _new_placeholder(self.graph, f"arg{self.n_inputs()}_1")
        self.lifted.append(outer)
        if isinstance(value, Tensor):
            self.track(value, ph)
            self.note_sizes(value, ph)
        return ph

    def n_inputs(self) -> int:
        return sum(1 for n in self.graph.nodes if n.op == "placeholder")

    def note_sizes(self, t: Tensor, ph) -> None:
        for d, s in enumerate(t.shape):
            e = getattr(s, "expr", None)
            if e is not None and e.is_Symbol and e not in self.sym_src:
                self.sym_src[e] = (ph, d)

    def sym_node(self, expr, env):
        if expr.is_Symbol and expr not in self.sym_nodes and expr not in self.unbacked:
            if expr in self.sym_src:
                ph, d = self.sym_src[expr]
                node = self.graph.call_function(sym_size, (ph, d))
            else:    # a size only the outer trace knows: computed there, passed in
                node = self.lift(self.parent.sym_node(expr, env), None)
            self.sym_nodes[expr] = node
            return node
        return super().sym_node(expr, env)


def trace_subgraph(parent, fn, operands: list, name: str, mode_cls=None):
    """Trace fn(*operands) under a SubgraphMode (or mode_cls(parent, graph)'s, a subclass's)
    -> (GraphModule, flat outputs, out spec, lifted outer values). The outer mode is off
    meanwhile; a fake mode under it stays."""
    graph = Graph()
    sub = (mode_cls or SubgraphMode)(parent, graph)
    for i, a in enumerate(operands):
        ph = graph.placeholder(f"arg{i}_1")
        if isinstance(a, Tensor):
            sub.track(a, ph)
            sub.note_sizes(a, ph)
        elif getattr(a, "expr", None) is not None:
            sub.sym_nodes[a.expr] = ph
    modes = state.modes
    at = modes.index(parent)
    modes.pop(at)
    try:
        with sub:
            out = fn(*operands)
    finally:
        modes.insert(at, parent)
    leaves, spec = pytree.tree_flatten(out)
    for x in leaves:
        if not isinstance(x, Tensor):
            raise RuntimeError(f"Expected branches/body of {name} to return a possibly nested "
                               f"pytree of tensors, but got {type(x).__name__}")
    graph.output(tuple(sub._arg(leaves)))
    gm = GraphModule(dict(sub.constants), graph, "GraphModule")
    return gm, leaves, spec, sub.lifted


def unify_inputs(subs: list, n_operands: int) -> list:
    """Give each traced subgraph the same lifted inputs, in one order -> that order (the
    outer values). subs: [(GraphModule, lifted)]."""
    union: list = []
    for _, lifted in subs:
        for v in lifted:
            if not any(v is u for u in union):
                union.append(v)
    for gm, lifted in subs:
        phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        mine = dict(zip([id(v) for v in lifted], phs[n_operands:]))
        ordered = []
        for v in union:
            ph = mine.get(id(v))
            if ph is None:
                ph = _new_placeholder(gm.graph, "arg_lifted")
            ordered.append(ph)
        anchor = phs[n_operands - 1] if n_operands else None
        for ph in ordered:   # placeholders in union order, after the operands
            if anchor is None:
                first = next(iter(gm.graph.nodes))
                if first is not ph:
                    first.prepend(ph)
            else:
                anchor.append(ph)
            anchor = ph
        for i, ph in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
            ph.name = ph.target = f"arg{i}_1"
        gm.recompile()
    return union


def _new_placeholder(graph: Graph, name: str):
    """A placeholder after the graph's last one (placeholders come first, in input order)."""
    last = None
    for n in graph.nodes:
        if n.op != "placeholder":
            break
        last = n
    if last is None:
        with graph.inserting_before(next(iter(graph.nodes), None)):
            return graph.placeholder(name)
    with graph.inserting_after(last):
        return graph.placeholder(name)
