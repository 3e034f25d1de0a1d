"""Higher-order ops in the PT2 archive, as torch.export.save writes them: a `cond` node (target
`torch.ops.higher_order.cond`; the predicate; each branch as an `as_graph` argument holding the
branch's whole graph; the operands as `as_tensors`; one `as_tensor` output per result) and a
`map_impl` node (its body as `as_graph`, then xs and args as `as_tensors`), read back into nodes
whose subgraphs are attributes of the root module."""
from __future__ import annotations

__all__ = ["is_hop", "hop_node_json", "hop_for", "branch_from_json"]


def is_hop(n) -> bool:
    return n.op == "call_function" and getattr(n.target, "__module__", "") == \
        "ember.ops.higher_order"


def hop_for(target: str):
    """`torch.ops.higher_order.cond` -> ember's cond op (the only one the archive carries)."""
    from ember._higher_order_ops import HIGHER_ORDER_OPS

    from ._serde import SerializationError
    name = target.rsplit(".", 1)[-1]
    if name not in ("cond", "map_impl") or name not in HIGHER_ORDER_OPS:
        raise SerializationError(f"unsupported higher-order op {target!r} (ember reads cond "
                                 f"and map_impl)")
    return HIGHER_ORDER_OPS[name]


def hop_node_json(ep, n, names: dict, getitems: dict, tensor_values: dict, hints) -> dict:
    """The JSON of a cond node (its branches' graphs written inside it)."""
    from ._serde import _POSITIONAL, SerializationError, _arg_json, _graph_json, _meta_json
    kind = n.target.__name__
    if kind not in ("cond", "map_impl"):
        raise SerializationError(f"node {n.name}: cannot serialize the higher-order op "
                                 f"{kind} (only cond and map_impl)")
    owner = n.graph.owning_module

    def graph_arg(g):
        sub_json, _ = _graph_json(ep, getattr(owner, g.target).graph)
        return {"name": "", "arg": {"as_graph": {"name": g.target, "graph": sub_json}},
                "kind": _POSITIONAL}

    def tensors(xs):
        return {"name": "", "arg": {"as_tensors": [{"name": names[x]} for x in xs]},
                "kind": _POSITIONAL}
    if kind == "cond":     # cond(pred, true_graph, false_graph, operands)
        pred, t_node, f_node, operands = n.args
        ins = [{"name": "", "arg": _arg_json(pred, names), "kind": _POSITIONAL},
               graph_arg(t_node), graph_arg(f_node), tensors(operands)]
    else:                  # map_impl(body_graph, xs, args)
        body, xs, args = n.args
        ins = [graph_arg(body), tensors(xs), tensors(args)]
    outs = []
    for i in range(max(getitems) + 1 if getitems else 0):
        k = getitems.get(i)
        name = k.name if k is not None else f"{n.name}_{i}"
        if k is not None:
            names[k] = name
            meta = k.meta.get("tensor_meta")
            if meta is not None:
                tensor_values[name] = _meta_json(meta, hints)
        outs.append({"as_tensor": {"name": name}})
    return {"target": f"torch.ops.higher_order.{kind}", "inputs": ins, "outputs": outs,
            "metadata": {}, "is_hop_single_tensor_return": False, "name": n.name}


def branch_from_json(arg: dict, graph, attrs: dict, build):
    """An `as_graph` argument: the branch built as a GraphModule, kept in attrs under its
    name, and a get_attr node for it in graph (the node cond's call takes)."""
    from ember.fx import GraphModule
    sub_graph, _ = build(arg["graph"], attrs)
    name = arg["name"]
    if not name.isidentifier():
        from ._serde import SerializationError
        raise SerializationError(f"bad subgraph name {name!r}")
    attrs[name] = GraphModule(attrs, sub_graph) if any(
        n.op == "get_attr" for n in sub_graph.nodes) else GraphModule({}, sub_graph)
    return graph.get_attr(name)
