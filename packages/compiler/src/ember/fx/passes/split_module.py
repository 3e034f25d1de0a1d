"""`split_module`: cut a GraphModule into submodules by a per-node partition callback; the
result calls `submod_<partition>` in dependency order (torch.fx.passes.split_module)."""
from __future__ import annotations

from collections.abc import Callable

from ..graph import Graph
from ..graph_module import GraphModule
from ..node import Node, map_arg

__all__ = ["split_module"]


class _Partition:
    def __init__(self, name: str):
        self.name = name
        self.submod_name = f"submod_{name}"
        self.nodes: list = []
        self.inputs: dict = {}    # name -> None (ordered set)
        self.outputs: dict = {}
        self.deps: set = set()
        self.graph = Graph()
        self.env: dict = {}
        self.targets: dict = {}


def split_module(m: GraphModule, root_m, split_callback: Callable[[Node], int],
                 qualname_map: dict | None = None, keep_original_order: bool = False,
                 keep_original_node_name: bool = False) -> GraphModule:
    """Partition m's call nodes by `split_callback(node)`; each partition becomes a
    GraphModule `submod_<id>` taking the values it reads from other partitions."""
    parts: dict[str, _Partition] = {}
    owner: dict[Node, _Partition] = {}
    for node in m.graph.nodes:
        if node.op in ("placeholder", "get_attr", "output"):
            continue
        name = str(split_callback(node))
        p = parts.setdefault(name, _Partition(name))
        p.nodes.append(node)
        owner[node] = p

    def use(def_node: Node, user: _Partition | None):
        dp = owner.get(def_node)
        if dp is user:
            return
        if dp is not None:
            dp.outputs.setdefault(def_node.name)
            if user is not None:
                user.deps.add(dp.name)
        if user is not None:
            user.inputs.setdefault(def_node.name)

    for node in m.graph.nodes:
        if node.op == "output":
            for d in node.all_input_nodes:
                use(d, None)
        elif node in owner:
            for d in node.all_input_nodes:
                use(d, owner[node])
    order = _toposort(parts)
    by_name = {n.name: n for n in m.graph.nodes}
    for p in parts.values():
        for inp in p.inputs:
            p.env[by_name[inp]] = p.graph.placeholder(inp)
        for node in p.nodes:
            args = map_arg(node.args, lambda n, p=p: p.env[n])
            kwargs = map_arg(node.kwargs, lambda n, p=p: p.env[n])
            target = node.target
            if node.op == "call_module":
                flat = target.replace(".", "_")
                p.targets[flat] = root_m.get_submodule(target)
                if qualname_map is not None:
                    qualname_map[f"{p.submod_name}.{flat}"] = target
                target = flat
            new = p.graph.create_node(node.op, target, args, kwargs,
                                      node.name if keep_original_node_name else None)
            new.meta = dict(node.meta)
            p.env[node] = new
        outs = tuple(p.env[by_name[o]] for o in p.outputs)
        p.graph.output(outs[0] if len(outs) == 1 else outs)

    base = Graph()
    env: dict = {}
    attrs: dict = {}
    for node in m.graph.nodes:
        if node.op == "placeholder":
            default = node.args[0] if node.args else _EMPTY
            env[node] = base.placeholder(node.target, node.type) if default is _EMPTY else \
                base.placeholder(node.target, node.type, default)
            env[node].meta = dict(node.meta)
        elif node.op == "get_attr":
            env[node] = base.get_attr(node.target)
            attrs[node.target] = _fetch(m, node.target)
    for name in order:
        p = parts[name]
        attrs[p.submod_name] = GraphModule(p.targets, p.graph)
        call = base.call_module(p.submod_name, tuple(env[by_name[i]] for i in p.inputs))
        outs = list(p.outputs)
        if len(outs) == 1:
            env[by_name[outs[0]]] = call
        else:
            import operator
            for i, o in enumerate(outs):
                env[by_name[o]] = base.call_function(operator.getitem, (call, i))
    out = next(n for n in m.graph.nodes if n.op == "output")
    base.output(map_arg(out.args[0], lambda n: env[n]))
    return GraphModule(attrs, base)


_EMPTY = object()


def _fetch(m, target: str):
    obj = m
    for atom in target.split("."):
        obj = getattr(obj, atom)
    return obj


def _toposort(parts: dict) -> list:
    done: list = []
    pending = list(parts)
    while pending:
        ready = [n for n in pending if parts[n].deps <= set(done)]
        if not ready:
            raise RuntimeError("split_module: the partitions depend on each other in a cycle")
        done.append(ready[0])
        pending.remove(ready[0])
    return done
