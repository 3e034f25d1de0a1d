"""`ember.fx.replace_pattern`: find every copy of a pattern graph in a GraphModule and put a
replacement graph in its place (torch.fx.subgraph_rewriter)."""
from __future__ import annotations

from typing import NamedTuple

from .graph import Graph
from .graph_module import GraphModule, _copy_attr
from .node import Node

__all__ = ["Match", "replace_pattern"]


class Match(NamedTuple):
    anchor: Node                 # the node the pattern's (first) output matched
    nodes_map: dict              # pattern node -> matched node of the target graph


def _graph_of(fn) -> tuple[Graph, object]:
    if isinstance(fn, GraphModule):
        return fn.graph, fn
    if isinstance(fn, Graph):
        return fn, None
    from ._symbolic_trace import symbolic_trace
    gm = symbolic_trace(fn)
    return gm.graph, gm


class _Matcher:
    def __init__(self, pattern: Graph):
        self.pattern = pattern
        out = [n for n in pattern.nodes if n.op == "output"]
        if len(out) != 1:
            raise ValueError("replace_pattern: the pattern must have exactly one output")
        ret = out[0].args[0]
        self.returns = list(ret) if isinstance(ret, (tuple, list)) else [ret]
        self.placeholders = [n for n in pattern.nodes if n.op == "placeholder"]

    def match_at(self, anchors: list) -> dict | None:
        m: dict = {}
        for pn, gn in zip(self.returns, anchors):
            if not self._match(pn, gn, m):
                return None
        # nodes inside the match may only be used inside it (returned nodes excepted)
        inside = {gn for pn, gn in m.items() if pn.op != "placeholder"}
        returned = set(self.returns)
        for pn, gn in m.items():
            if pn.op == "placeholder" or pn in returned:
                continue
            if any(u not in inside for u in gn.users):
                return None
        return m

    def _match(self, pn: Node, gn: Node, m: dict) -> bool:
        if pn in m:
            return m[pn] is gn
        if pn.op == "placeholder":
            if gn in m.values():
                return False  # one pattern input binds one distinct node
            m[pn] = gn
            return True
        if pn.op != gn.op or pn.target != gn.target or len(pn.args) != len(gn.args) or \
                set(pn.kwargs) != set(gn.kwargs):
            return False
        if gn in m.values():
            return False
        m[pn] = gn
        pairs = list(zip(pn.args, gn.args)) + [(pn.kwargs[k], gn.kwargs[k]) for k in pn.kwargs]
        return all(self._match_arg(a, b, m) for a, b in pairs)

    def _match_arg(self, a, b, m: dict) -> bool:
        if isinstance(a, Node):
            return isinstance(b, Node) and self._match(a, b, m)
        if isinstance(a, (tuple, list)):
            return isinstance(b, (tuple, list)) and len(a) == len(b) and \
                all(self._match_arg(x, y, m) for x, y in zip(a, b))
        if isinstance(b, Node):
            return False
        return type(a) is type(b) and a == b


def replace_pattern(gm: GraphModule, pattern, replacement) -> list[Match]:
    """Replace each non-overlapping match of `pattern` in gm by `replacement` (functions or
    GraphModules with the same inputs); returns the matches.

    >>> import ember, ember.fx
    >>> gm = ember.fx.symbolic_trace(lambda x: ember.neg(ember.neg(x)) + 1)
    >>> len(ember.fx.replace_pattern(gm, lambda x: ember.neg(ember.neg(x)), lambda x: x))
    1
    """
    pattern_graph, _ = _graph_of(pattern)
    repl_graph, repl_mod = _graph_of(replacement)
    matcher = _Matcher(pattern_graph)
    graph = gm.graph
    matches: list[Match] = []
    taken: set = set()
    first = matcher.returns[0]
    for gn in list(graph.nodes):
        if gn._erased or gn.op != first.op or gn.target != first.target:
            continue
        anchors = [gn]
        if len(matcher.returns) > 1:
            anchors = _other_anchors(graph, matcher, gn)
            if anchors is None:
                continue
        m = matcher.match_at(anchors)
        if m is None:
            continue
        body = {g for p, g in m.items() if p.op != "placeholder"}
        if body & taken:
            continue
        taken |= body
        matches.append(Match(anchor=gn, nodes_map=m))
    for match in matches:
        _replace_one(gm, graph, matcher, match, repl_graph, repl_mod)
    gm.recompile()
    return matches


def _other_anchors(graph: Graph, matcher: _Matcher, gn: Node):
    """For patterns with several outputs: the first later node matching each other output."""
    anchors = [gn]
    for pn in matcher.returns[1:]:
        cand = next((n for n in graph.nodes if n.op == pn.op and n.target == pn.target
                     and n not in anchors), None)
        if cand is None:
            return None
        anchors.append(cand)
    return anchors


def _replace_one(gm, graph, matcher, match, repl_graph, repl_mod) -> None:
    m = match.nodes_map
    order = {n: i for i, n in enumerate(graph.nodes)}
    body = [g for p, g in m.items() if p.op != "placeholder"]
    last = max(body, key=order.__getitem__)
    repl_ph = [n for n in repl_graph.nodes if n.op == "placeholder"]
    if len(repl_ph) != len(matcher.placeholders):
        raise ValueError(f"replace_pattern: the replacement takes {len(repl_ph)} inputs but "
                         f"the pattern {len(matcher.placeholders)}")
    val_map = {r: m[p] for r, p in zip(repl_ph, matcher.placeholders)}
    if repl_mod is not None:
        for n in repl_graph.nodes:
            if n.op in ("get_attr", "call_module") and not hasattr(gm, n.target.split(".")[0]):
                _copy_attr(repl_mod, gm, n.target)
    # as torch.fx: just before the first user of the matched outputs
    users = {u for pn in matcher.returns for u in m[pn].users}
    first_user = min(users, key=order.__getitem__) if users else None
    where = graph.inserting_before(first_user) if first_user is not None else \
        graph.inserting_after(last)
    with where:
        out = graph.graph_copy(repl_graph, val_map)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    for pn, new in zip(matcher.returns, outs):
        m[pn].replace_all_uses_with(new)
    for g in sorted(body, key=order.__getitem__, reverse=True):
        if not g.users:
            graph.erase_node(g)
