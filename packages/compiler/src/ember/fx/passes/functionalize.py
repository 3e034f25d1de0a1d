"""Functionalization of a make_fx graph: in-place table ops become their functional ops (later
uses read the new value), and each mutated graph input gets one `copy_` back at the end, so
the graph is a pure function plus explicit input writes (as torch.func.functionalize).

A write through a view (`x[0].add_(1)`, `x.view(-1)[2:5].mul_(2)`, `x.t().fill_(0)`) becomes
the functional op on the view, then scatter ops (`select_scatter`, `slice_scatter`,
`diagonal_scatter`, `as_strided_scatter`, or the inverse transpose/permute/reshape) that give
the base's new value; later reads of the base or of any view of it see the update.
"""
from __future__ import annotations

from ember._ops import OPS

from .._codegen import is_opdef
from ..graph_module import GraphModule
from ..node import map_aggregate

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
    if node.op == "call_function" and node.meta.get("aliases_input", False):
        return True   # (make_fx saw its result share its input's storage)
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
    them as outputs, `functionalize_graph` copies them back).

    A write through a view (`x[0].add_(1)`) computes the view's new value functionally, then
    the base's new value by scattering it back through each view op of the chain (`select` ->
    `select_scatter`, ...); later reads of the base see its newest value and later reads of
    any view of it regenerate the view from that value."""
    graph = gm.graph
    st = _State()
    for node in list(graph.nodes):
        if node.op in ("placeholder", "get_attr"):
            continue
        orig = node.args[0] if node.args else None
        node.args = _remap(st, graph, node, node.args)
        node.kwargs = _remap(st, graph, node, node.kwargs)
        if _is_view(node) and hasattr(orig, "op"):   # (`unbind` and its items too)
            base, chain = st.alias.get(orig, (orig, ()))
            st.alias[node] = (base, (*chain, node))
            st.made_from[node] = st.latest.get(base, base)
            continue
        if node.op != "call_function" or not is_opdef(node.target):
            continue
        op = node.target
        if not op.mutated_idx:
            continue
        base, chain = st.alias.get(orig, (orig, ()))
        after = node.next   # (where the base's new value is computed)
        value = _functional_copy(node, orig) if op.name == "copy_" else _functional_node(
            graph, node, op)
        if value is node:   # the in-place op's result aliases its target: later uses read it
            node.replace_all_uses_with(orig, delete_user_cb=lambda u, n=node: u is not n)
        with graph.inserting_before(after):
            st.latest[base] = _scatter_back(graph, st, base, chain, value)
    gm.recompile()
    return {b: v for b, v in st.latest.items() if b.op == "placeholder"}


class _State:
    def __init__(self):
        self.alias: dict = {}      # view node -> (base node, chain of view nodes from the base)
        self.made_from: dict = {}  # view node -> the base value it was computed from
        self.latest: dict = {}     # base node -> the node of its newest value
        self.regen: dict = {}      # (view node, base value) -> view regenerated from it


def _remap(st, graph, node, args):
    """args with each stale tensor read replaced: a mutated base by its newest value, a view of
    it by the view regenerated from that value (inserted before node)."""
    def one(a):
        if not hasattr(a, "op"):
            return a
        if a in st.alias:
            base, chain = st.alias[a]
            now = st.latest.get(base, base)
            if st.made_from.get(a) is now:
                return a
            key = (a, now)
            if key not in st.regen:
                with graph.inserting_before(node):
                    st.regen[key] = _replay(graph, now, chain)[-1]
            return st.regen[key]
        return st.latest.get(a, a)
    return map_aggregate(args, one)


def _replay(graph, value, chain):
    """[value, chain[0](value), chain[1](chain[0](value)), ...]: the chain's views of value."""
    out = [value]
    for v in chain:
        out.append(graph.call_function(v.target, (out[-1], *v.args[1:]), dict(v.kwargs)))
    return out


def _scatter_back(graph, st, base, chain, value):
    """The base's new value when the view chain's last view becomes value."""
    if not chain:
        return value
    parents = _replay(graph, st.latest.get(base, base), chain[:-1])
    for v, parent in zip(reversed(chain), reversed(parents)):
        if v.meta.get("same_view", False) and getattr(v.target, "name", None) not in _INVERSE:
            continue   # an op that returned its input's very view (`contiguous`, `to`)
        value = graph.call_function(_inverse(v), _inverse_args(v, parent, value))
    return value


def _inverse(v):
    name = getattr(v.target, "name", None)
    op = _INVERSE.get(name)
    if op is None or v.target.overload == "dtype":
        raise NotImplementedError(f"functionalize: a write through the view {v.name} "
                                  f"({getattr(v.target, 'qualname', v.target)}) is not "
                                  "supported")
    return OPS[op]


_INVERSE = {"select": "select_scatter", "slice": "slice_scatter", "narrow": "slice_scatter",
            "diagonal": "diagonal_scatter", "as_strided": "as_strided_scatter",
            "t": "t", "transpose": "transpose", "permute": "permute",
            **{k: "reshape_as" for k in ("view", "alias", "detach", "squeeze", "unsqueeze",
                                         "reshape", "_unsafe_view", "flatten", "unflatten")}}


def _inverse_args(v, parent, value):
    name, rest = v.target.name, tuple(v.args[1:])
    if name == "narrow":
        dim, start, length = rest
        return (parent, value, dim, start, start + length)
    if name in ("select", "slice", "diagonal", "as_strided"):
        return (parent, value, *rest) if not v.kwargs else _with_kwargs(v, parent, value)
    if name in ("t", "transpose"):
        return (value, *rest)
    if name == "permute":
        dims = list(rest[0])
        dims = [d % len(dims) for d in dims]
        return (value, [dims.index(i) for i in range(len(dims))])
    return (value, parent)


def _with_kwargs(v, parent, value):
    """Positional args for a scatter op from a view node with keyword args."""
    names = [a.name for a in v.target.schema.args][1:]
    rest = list(v.args[1:]) + [v.kwargs[n] for n in names[len(v.args) - 1:] if n in v.kwargs]
    if len(rest) != len(v.args) - 1 + len(v.kwargs):
        raise NotImplementedError(f"functionalize: a write through the view {v.name} "
                                  "with these keyword arguments is not supported")
    return (parent, value, *rest)


def _functional_node(graph, node, op):
    if op.name in _FILLS:   # (torch's fill.Scalar / zero: ember's full_like / zeros_like)
        fn = OPS[_FILLS[op.name]]
        return _retarget(graph, node, fn)
    fn = _functional_of(op)
    if fn is None or len(op.mutated_idx) != 1 or op.mutated_idx[0] != 0:
        raise NotImplementedError(f"functionalize: {op.qualname} mutates its inputs and "
                                  "has no functional counterpart in ember's op table")
    return _retarget(graph, node, fn)


_FILLS = {"fill_": "full_like", "zero_": "zeros_like"}


def _retarget(graph, node, fn):
    node.target = fn
    ns = graph._graph_namespace
    ns.release(node.name)
    ns._obj_to_name.pop(id(node), None)   # (else create_name hands back the old name)
    node.name = ns.create_name(fn.name, node)
    return node


def _functional_copy(node, orig):
    """`dst.copy_(src)`: dst's new value is src itself when shapes and dtypes agree (what
    make_fx noted when it recorded the call), else src cast to dst's dtype, expanded to dst's
    shape and cloned; the copy node goes away, its uses read dst."""
    src, dst = node.args[0:2][::-1]
    graph = node.graph
    if node.meta.get("copy_same_meta", False):
        value = src
    elif "copy_dtype" in node.meta and hasattr(src, "op"):
        with graph.inserting_before(node):
            value = graph.call_function(OPS["_to_copy"], (src,),
                                        {"dtype": node.meta["copy_dtype"]})
            value = graph.call_function(OPS["expand_as"], (value, dst))
            value = graph.call_function(OPS["clone"], (value,))
    else:
        raise NotImplementedError(f"functionalize: {node.name} copies a value of another shape "
                                  "or dtype into a tensor; ember has no functional copy op yet")
    node.replace_all_uses_with(orig)
    graph.erase_node(node)
    return value
