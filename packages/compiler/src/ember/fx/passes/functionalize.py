"""Functionalization of a make_fx graph: in-place table ops become their functional ops (later
uses read the new value), and each mutated graph input gets one `copy_` back at the end, so
the graph is a pure function plus explicit input writes (as torch.func.functionalize).

Mutation through a view (writing `x[0]` or `x.view(...)` in place) is refused with
NotImplementedError: rewriting it needs scatter ops (torch's `*_scatter`) that ember lacks.
"""
from __future__ import annotations

from ember._ops import OPS

from .._codegen import is_opdef
from ..graph_module import GraphModule

__all__ = ["functionalize_graph", "functionalize_mutations"]


def _functional_of(op):
    if op.inplace_of is not None:
        return op.inplace_of
    if op.name.endswith("_"):
        base = OPS.get(op.name[:-1] + (f".{op.overload}" if op.overload else ""))
        if base is not None and len(base.schema.args) == len(op.schema.args) \
                and not base.mutated_idx:
            return base
    return None


def _is_view(node) -> bool:
    return node.op == "call_function" and is_opdef(node.target) and (
        node.target.view is not None or "view" in node.target.tags)


def functionalize_graph(gm: GraphModule) -> GraphModule:
    """Rewrite gm's in-place op nodes to functional ones, copying mutated inputs back."""
    graph = gm.graph
    last_value = functionalize_mutations(gm)
    out = next(n for n in graph.nodes if n.op == "output")
    with graph.inserting_before(out):
        for ph, val in last_value.items():
            graph.call_function(OPS["copy_"], (ph, val))
    graph.lint()
    gm.recompile()
    return gm


def functionalize_mutations(gm: GraphModule) -> dict:
    """Rewrite gm's in-place op nodes to functional ones and return {mutated placeholder:
    the node of its final value}; the caller decides how the writes happen (export returns
    them as outputs, `functionalize_graph` copies them back)."""
    graph = gm.graph
    last_value: dict = {}  # placeholder -> the node holding its latest value
    for node in list(graph.nodes):
        if node.op != "call_function" or not is_opdef(node.target):
            continue
        op = node.target
        if not op.mutated_idx:
            continue
        target = node.args[0]
        if _is_view(target) or any(_is_view(u) and u is not node for u in target.users
                                   if _before(u, node)):
            raise NotImplementedError(f"functionalize: {op.qualname} writes through a view "
                                      f"({target.name}); ember has no scatter ops for it yet")
        if op.name == "copy_":
            value = _functional_copy(node)
        else:
            value = _functional_node(graph, node, op)
        root = target
        while root in last_value.values():
            root = next(k for k, v in last_value.items() if v is root)
        if root.op == "placeholder":
            last_value[root] = value
    gm.recompile()
    return last_value


def _functional_node(graph, node, op):
    fn = _functional_of(op)
    if fn is None or len(op.mutated_idx) != 1 or op.mutated_idx[0] != 0:
        raise NotImplementedError(f"functionalize: {op.qualname} mutates its inputs and "
                                  "has no functional counterpart in ember's op table")
    node.target = fn
    ns = graph._graph_namespace
    ns.release(node.name)
    ns._obj_to_name.pop(id(node), None)   # (else create_name hands back the old name)
    node.name = ns.create_name(fn.name, node)
    return node


def _functional_copy(node):
    """`dst.copy_(src)`: dst's new value is src itself when shapes and dtypes agree (what
    make_fx noted when it recorded the call); the copy node goes away."""
    if not node.meta.get("copy_same_meta", False):
        raise NotImplementedError(f"functionalize: {node.name} copies a value of another shape "
                                  "or dtype into a tensor; ember has no functional copy op yet")
    src = node.args[1]
    node.replace_all_uses_with(src)
    node.graph.erase_node(node)
    return src


def _before(a, b) -> bool:
    """Whether node a comes before node b in their graph."""
    cur = a._next
    while cur is not a.graph._root:
        if cur is b:
            return True
        cur = cur._next
    return False
