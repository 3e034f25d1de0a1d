"""Splitting a joint forward+backward graph in two (PyTorch's min_cut_rematerialization_partition
semantics): the forward computes its outputs and the values the backward needs; which values
those are is a minimum cut of a flow network where saving a value costs its size in bytes and
recomputing it in the backward costs nothing, for ops cheap enough to recompute (pointwise, views,
reductions). Matmuls, convolutions, random and in-place ops are never recomputed; nodes traced
inside `ember.utils.checkpoint` (meta["recompute"]) are never saved.

>>> # gelu(x @ w): the backward gets x, w and the matmul's output, recomputes gelu's inputs
"""
from __future__ import annotations

import operator
from collections import deque

from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule
from ember.fx.interpreter import Interpreter

__all__ = ["min_cut_rematerialization_partition", "TaggingInterpreter", "nbytes_of"]

INF = float("inf")
_CHEAP = {"clone", "_to_copy", "to", "contiguous", "expand", "zeros_like", "ones_like",
          "full_like", "empty_like", "fill", "where", "masked_fill"}
# factories (no tensor inputs): the zeros a slice's or split's vjp scatters into would otherwise
# be filled by the forward and saved for the backward. Recomputed in a CUDA backward they once
# ended in an illegal memory access (the workloads' GPT on an H200): inductor's lowering runs
# each op on meta values, but a CUDA factory ran on CUDA, and slice_scatter then ran its CUDA
# kernel on that tensor and a meta one (fixed in _inductor/lowering.py's _run_meta). On CUDA
# arange stays saved (an extern call there; its few bytes cost less than a launch).
_FACTORIES = {"zeros", "ones", "full", "new_zeros", "new_ones", "new_full", "scalar_tensor",
              "arange"}


def nbytes_of(t) -> int:
    """A tensor's size in bytes (a symbolic size counts at its traced value)."""
    n = 1
    for s in t._shape:
        if hasattr(s, "hint"):
            try:
                s = int(s.hint())
            except TypeError:   # unbacked: no traced value
                s = 1 << 10
        n *= s
    return n * t.dtype.itemsize


class TaggingInterpreter(Interpreter):
    """Runs a captured graph under a recording mode, copying its nodes' checkpoint tags
    (meta["recompute"]) onto the nodes their ops record into `graph`."""

    def __init__(self, module, graph: Graph):
        super().__init__(module)
        self.out_graph = graph

    def run_node(self, n):
        tag = n.meta.get("recompute")
        if not tag:
            return super().run_node(n)
        before = set(self.out_graph.nodes)
        r = super().run_node(n)
        for m in self.out_graph.nodes:
            if m not in before:
                m.meta["recompute"] = tag
        return r


def _tags(n) -> frozenset:
    return getattr(n.target, "tags", frozenset())


def _recomputable(n) -> bool:
    if n.op != "call_function":
        return False
    t = n.target
    if t is operator.getitem:
        return _recomputable(n.args[0]) if hasattr(n.args[0], "op") else False
    tags = _tags(n)
    if "random" in tags or "inplace" in tags or getattr(t, "mutated_idx", None) or \
            getattr(t, "inplace_of", None) is not None or "nondeterministic" in tags:
        return False
    if n.meta.get("recompute"):
        return True
    if n.meta.get("save"):   # (a decomposition's small result of a long pass: loss_decomp.py)
        return False
    if getattr(t, "pointwise", None) is not None or "view" in tags or "reduction" in tags:
        return True
    if not hasattr(t, "schema"):   # size arithmetic (operator.*, sym_size)
        return True
    name = getattr(t, "name", None)
    if name in _FACTORIES:
        dev = n.kwargs.get("device")
        kind = str(getattr(dev, "type", dev)).split(":")[0]
        return kind == "cpu" or (kind == "cuda" and name != "arange")
    return name in _CHEAP


def _mutated_later(n) -> bool:
    """An input of n is written in place by some op: recomputing n later reads new values."""
    for a in n.all_input_nodes:
        for u in a.users:
            if u.op == "call_function" and ("inplace" in _tags(u) or getattr(
                    u.target, "mutated_idx", None)):
                return True
    return False


def _weight(n) -> float:
    if n.meta.get("recompute") and _recomputable(n):
        return INF
    nb = n.meta.get("nbytes")
    if nb is None:
        return INF if n.op == "call_function" and hasattr(n.target, "schema") else 8
    # a primal is alive anyway: saving it is preferred to saving its view of equal size
    return nb + (0 if n.op == "placeholder" else 1)


class _Flow:
    """Edmonds-Karp max flow on a small graph: vertex -> {vertex: residual capacity}."""

    def __init__(self):
        self.cap: dict = {}

    def edge(self, a, b, c) -> None:
        self.cap.setdefault(a, {})
        self.cap.setdefault(b, {})
        self.cap[a][b] = self.cap[a].get(b, 0) + c
        self.cap[b].setdefault(a, 0)

    def source_side(self, s, t) -> set:
        cap = self.cap
        if s not in cap or t not in cap:
            return set(cap) - {t}
        while True:
            prev = {s: None}
            q = deque([s])
            while q and t not in prev:
                a = q.popleft()
                for b, c in cap[a].items():
                    if c > 0 and b not in prev:
                        prev[b] = a
                        q.append(b)
            if t not in prev:
                return set(prev)
            path, b = [], t
            while prev[b] is not None:
                path.append((prev[b], b))
                b = prev[b]
            f = min(cap[a][b] for a, b in path)
            if f == INF:
                raise RuntimeError("min-cut partition: an unbounded cut (a value the backward "
                                   "needs can be neither saved nor recomputed)")
            for a, b in path:
                cap[a][b] -= f
                cap[b][a] += f


def min_cut_rematerialization_partition(jgm: GraphModule, n_in: int, n_out: int):
    """(forward GraphModule, backward GraphModule, number of saved values) for a joint graph
    whose first n_in placeholders are primals (the rest tangents) and whose outputs are the
    n_out forward outputs followed by the primals' gradients."""
    g = jgm.graph
    nodes = list(g.nodes)
    phs = [n for n in nodes if n.op == "placeholder"]
    out_node = next(n for n in nodes if n.op == "output")
    outs = list(out_node.args[0])
    fwd_outs, grads = outs[:n_out], outs[n_out:]
    bwd = set(phs[n_in:])
    for n in nodes:
        if n.op in ("call_function", "call_method") and any(a in bwd for a in n.all_input_nodes):
            bwd.add(n)
    fwd = [n for n in nodes if n not in bwd and n.op in ("placeholder", "call_function",
                                                          "call_method")]
    fwd_set = set(fwd)
    flow = _Flow()
    for n in fwd:
        flow.edge((n, 0), (n, 1), _weight(n) if n not in fwd_outs or n.op == "placeholder"
                  else (n.meta.get("nbytes") or 8) + 1)
        if n.op == "placeholder" or n in fwd_outs or not _recomputable(n) or \
                (_mutated_later(n) and not n.meta.get("recompute")):
            flow.edge("source", (n, 0), INF)
        for u in n.users:
            if u in fwd_set:
                flow.edge((n, 1), (u, 0), INF)
            elif u in bwd:
                flow.edge((n, 1), "sink", INF)
        if n in grads:  # a gradient that needs no tangent (a constant): from the forward
            flow.edge((n, 1), "sink", INF)
    side = flow.source_side("source", "sink")
    saved = [n for n in fwd if (n, 0) in side and (n, 1) not in side]
    recompute = {n for n in fwd if (n, 0) not in side}
    return _build(jgm, nodes, phs[n_in:], fwd, bwd, recompute, saved, fwd_outs, grads)


def _build(jgm, nodes, tangents, fwd, bwd, recompute, saved, fwd_outs, grads):
    consts = {n.target: getattr(jgm, n.target) for n in nodes if n.op == "get_attr"}
    fg, fmap = Graph(), {}
    for n in nodes:
        if n.op == "get_attr" or n in fwd:  # (what the outputs and saved values do not
            fmap[n] = fg.node_copy(n, lambda a: fmap[a])  # need goes away below)
    fg.output(tuple(fmap[o] for o in fwd_outs) + tuple(fmap[s] for s in saved))
    fg.eliminate_dead_code(_impure)
    bg, bmap = Graph(), {}
    for s in saved:
        bmap[s] = bg.placeholder(s.name)
    for t in tangents:
        bmap[t] = bg.placeholder(t.name)
    for n in nodes:
        if (n in bwd and n.op != "placeholder") or n in recompute:
            for a in n.all_input_nodes:
                if a.op == "get_attr" and a not in bmap:
                    bmap[a] = bg.node_copy(a)
            bmap[n] = bg.node_copy(n, lambda a: bmap[a])
    bg.output(tuple(bmap[x] if x is not None else None for x in grads))
    bg.eliminate_dead_code(_impure)
    fwd_gm = GraphModule(consts, fg, "AOTForward")
    bwd_gm = GraphModule(consts, bg, "AOTBackward")
    return fwd_gm, bwd_gm, len(saved)


def _impure(n) -> bool:
    return n.op in ("placeholder", "output") or (n.op == "call_function" and (
        "inplace" in _tags(n) or bool(getattr(n.target, "mutated_idx", None))))
