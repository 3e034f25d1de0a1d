"""Functionalization of AOT graphs: in-place table ops (`x.add_(1)`, BatchNorm's `copy_` into its
running stats, `num_batches_tracked += 1`) become functional ops whose results later uses read,
and each mutated graph input is written back once, by one `copy_` at the end of the graph (as
PyTorch's AOT autograd does), so a backend sees a pure function plus an epilogue of writes.

Graphs whose mutations go through views (or aliases) are left as they are (their in-place ops
then run in place, which is correct, just not functional).
"""
from __future__ import annotations

from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule

__all__ = ["functionalize", "is_mutating"]


def _tags(n):
    return getattr(n.target, "tags", ())


def is_mutating(n) -> bool:
    return n.op == "call_function" and hasattr(n.target, "schema") and (
        bool(getattr(n.target, "mutated_idx", None)) or "inplace" in _tags(n))


def _is_view(n) -> bool:
    return n.op == "call_function" and ("view" in _tags(n) or getattr(n.target, "view", None)
                                        is not None)


def _functional(op):
    from ember._ops import OPS
    if op.name == "copy_":
        return "copy"
    if op.inplace_of is not None:
        return op.inplace_of
    if op.name.endswith("_") and tuple(op.mutated_idx or (0,)) == (0,):
        base = OPS.get(op.name[:-1] + (f".{op.overload}" if op.overload else ""))
        if base is not None and len(base.schema.args) == len(op.schema.args) and \
                not base.mutated_idx:
            return base
    return None


def _plan(nodes):
    """{in-place node: its functional op} or None where some mutation cannot be rewritten."""
    plan = {}
    for n in nodes:
        if not is_mutating(n):
            continue
        fn = _functional(n.target)
        tgt = n.args[0] if n.args else None
        if fn is None or tuple(n.target.mutated_idx or (0,)) != (0,) or not hasattr(tgt, "op"):
            return None
        if _is_view(tgt) or any(_is_view(u) for u in tgt.users):
            return None   # a write through (or seen through) a view: aliasing to track
        if fn == "copy" and (len(n.args) != 2 or not hasattr(n.args[1], "op") or n.kwargs):
            return None
        plan[n] = fn
    return plan


def functionalize(gm: GraphModule, n_user_outputs: int | None = None) -> GraphModule:
    """gm rewritten without in-place ops (a new GraphModule), or gm itself where it cannot be.
    The first n_user_outputs outputs (all by default) that are a mutated input's new value
    return that input (written back), as eager returns the mutated tensor itself."""
    nodes = list(gm.graph.nodes)
    plan = _plan(nodes)
    if not plan:
        return gm
    g, env, latest = Graph(), {}, {}   # latest: new graph's base node -> its newest value

    def root(a):   # an in-place op's result is its target (`buf.mul_(m).add_(g)`)
        while a in plan:
            a = a.args[0]
        return a

    def read(a):
        return latest.get(env[root(a)], env[a])
    from .tracer import set_grad_enabled
    grad, grad_at = None, {}   # grad mode set in the graph (None: the caller's) at each write
    for n in nodes:
        if n.op == "output":
            break
        if n.op == "call_function" and n.target is set_grad_enabled:
            grad = n.args[0]
        if n not in plan:
            env[n] = g.node_copy(n, read)
            continue
        base = env[root(n.args[0])]
        grad_at[base] = grad
        if plan[n] == "copy":
            new = _copy_value(g, read(n.args[1]), n.args[1], n.args[0], read)
            if new is None:
                return gm
        else:
            new = g.node_copy(n, read)
            new.target = plan[n]
        latest[base] = new
        env[n] = new
    out = next(n for n in nodes if n.op == "output")
    phs = [env[n] for n in nodes if n.op == "placeholder"]
    for ph in phs:
        if ph not in latest:
            continue
        mode = grad_at[ph]
        if mode != grad and mode is None:
            return gm   # written in the caller's grad mode, which the graph has left since
        if mode != grad:  # the write-back runs in the grad mode the write ran in
            g.call_function(set_grad_enabled, (mode,))
        g.call_function(_copy_op(), (ph, latest[ph]))
        if mode != grad:
            g.call_function(set_grad_enabled, (grad,))
    back = {v: k for k, v in latest.items() if k in phs}
    vals = out.args[0]
    k = len(vals) if n_user_outputs is None else n_user_outputs
    res = tuple((back.get(read(v), read(v)) if i < k else read(v)) if hasattr(v, "op") else v
                for i, v in enumerate(vals))
    g.output(res)
    consts = {n.target: getattr(gm, n.target) for n in nodes if n.op == "get_attr"}
    return GraphModule(consts, g, type(gm).__name__)


def _copy_op():
    from ember._ops import OPS
    return OPS["copy_"]


def _copy_value(g, src, src_node, dst_node, read):
    """The value `dst.copy_(src)` gives dst: src itself when it has dst's shape and dtype (as in
    BatchNorm's stats), else src cast to dst's dtype and expanded to its shape, then cloned."""
    s, d = src_node.meta.get("tmeta"), dst_node.meta.get("tmeta")
    if s is not None and d is not None and s == d:
        return src
    if d is None:
        return None
    from ember._ops import OPS
    v = g.call_function(OPS["_to_copy"], (src,), {"dtype": d[1]})
    v = g.call_function(OPS["expand_as"], (v, read(dst_node)))
    return g.call_function(OPS["clone"], (v,))
