"""`map(f, xs, *args)` (torch._higher_order_ops.map.map): f applied to each slice of xs along
dim 0, results stacked; make_fx records one `map_impl(body_graph_0, [xs], [args])` node.

>>> import ember
>>> from ember._higher_order_ops.map import map
>>> map(lambda x, y: x * y, ember.ones(3, 2), ember.tensor(2.0)).tolist()
[[2.0, 2.0], [2.0, 2.0], [2.0, 2.0]]
"""
from __future__ import annotations

import builtins

import ember
from ember import Tensor
from ember._state import state
from ember.utils import _pytree as pytree

from . import HigherOrderOperator
from ._subtrace import proxy_mode, trace_subgraph

__all__ = ["map", "map_impl"]


def map(f, xs, *args):
    """Stack f(x_i, *args) over the slices x_i = xs[i] (xs: a tensor or a pytree of them)."""
    flat_xs, xs_spec = pytree.tree_flatten(xs)
    flat_args, args_spec = pytree.tree_flatten(args)
    if not all(isinstance(x, Tensor) for x in flat_xs):
        raise RuntimeError(f"Mapped xs can only consist of tensors. Got xs {flat_xs}.")
    _check_leading(flat_xs)
    spec: list = []

    def body(*flat):
        x = pytree.tree_unflatten(list(flat[:len(flat_xs)]), xs_spec)
        a = pytree.tree_unflatten(list(flat[len(flat_xs):]), args_spec)
        out = f(x, *a)
        leaves, s = pytree.tree_flatten(out)
        if not spec:
            spec.append(s)
        return tuple(leaves)
    outs = map_impl(body, list(flat_xs), list(flat_args))
    return pytree.tree_unflatten(list(outs), spec[0])


def _check_leading(flat_xs) -> None:
    if not flat_xs:
        raise RuntimeError("Mapped xs must have at least one tensor.")
    lead = [x.shape[0] if x.dim() else None for x in flat_xs]
    if any(n is None for n in lead):
        raise RuntimeError("Leading dimensions of mapped xs cannot be 0 (scalars).")
    if any(getattr(n, "expr", n) == 0 for n in lead):
        raise RuntimeError("Leading dimensions of mapped xs cannot be 0.")
    if any(getattr(n, "expr", n) != getattr(lead[0], "expr", lead[0]) for n in lead):
        raise RuntimeError(f"Leading dimensions of mapped xs must be consistent. Got shapes "
                           f"{[x.shape for x in flat_xs]}.")


def _map_impl(body, xs: list, args: list):
    mode = proxy_mode()
    if mode is not None:
        return _trace_map(mode, body, xs, args)
    if any(hasattr(x, "fake_mode") for x in xs):
        return tuple(_stacked_fakes(body, xs, args))
    n = xs[0].shape[0]
    rows = [body(*[x[i] for x in xs], *args) for i in builtins.range(n)]
    return tuple(ember.stack([r[j] for r in rows]) for j in builtins.range(len(rows[0])))


map_impl = HigherOrderOperator("map_impl", _map_impl)


def _slice_fakes(xs):
    from .cond import _fresh
    return [_fresh(x, list(x.shape[1:])) for x in xs]


def _stacked_fakes(body, xs, args):
    """Outputs on fake tensors: the body's on one slice, with the mapped dim in front."""
    from .cond import _fresh
    with ember.no_grad():
        outs = body(*_slice_fakes(xs), *args)
    n = xs[0].shape[0]
    return [_fresh(o, [n, *o.shape]) for o in outs]


def _trace_map(mode, body, xs, args):
    """make_fx: the body traced once on a slice into `body_graph_N`; one map_impl node."""
    import operator
    fake = hasattr(xs[0], "fake_mode")
    if fake:
        slices = _slice_fakes(xs)
    else:     # real mode: slices made outside the trace (the body's inputs, not graph ops)
        at = state.modes.index(mode)
        state.modes.pop(at)
        try:
            slices = [x[0].clone() for x in xs]
        finally:
            state.modes.insert(at, mode)
    gm, leaves, _, lifted = trace_subgraph(mode, body, slices + list(args), "map")
    stores = {id(x._storage) for x in slices + list(args) if isinstance(x, Tensor)}
    if any(id(o._storage) in stores for o in leaves):
        raise RuntimeError("Encountered aliasing during higher order op tracing\n  Higher "
                           "Order Operator: torch.map\n  Explanation: Higher order ops do not "
                           "support aliasing.")
    if fake:
        from .cond import _fresh
        outs = [_fresh(o, [xs[0].shape[0], *o.shape]) for o in leaves]
    else:
        at = state.modes.index(mode)
        state.modes.pop(at)
        try:
            outs = list(_map_impl(body, xs, args))
        finally:
            state.modes.insert(at, mode)
    n = sum(1 for k in mode.constants if k.startswith("body_graph_"))
    name = f"body_graph_{n}"
    mode.constants[name] = gm
    graph = mode.graph
    g = graph.get_attr(name)
    node = graph.call_function(map_impl, (g, mode._arg(list(xs)),
                                          list(mode._arg(list(args))) + list(lifted)))
    for i, x in enumerate(outs):
        mode.track(x, graph.call_function(operator.getitem, (node, i)))
    return tuple(outs)
