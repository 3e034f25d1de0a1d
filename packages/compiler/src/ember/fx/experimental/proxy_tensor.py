"""`make_fx`: run a function under a dispatch mode that records every op-table call, giving a
GraphModule whose call_function targets are table entries (`ember.ops.aten.mm.default`).

tracing_mode="real" computes on the real inputs while recording; "fake" runs on FakeTensors
(meta storage, each op's meta function) so nothing is computed.

>>> import ember
>>> from ember.fx.experimental.proxy_tensor import make_fx
>>> gm = make_fx(lambda x: (x * 2).relu())(ember.ones(3))
>>> print(gm.code.strip().splitlines()[1].strip())
mul = ember.ops.aten.mul.default(x_1, 2);  x_1 = None
"""
from __future__ import annotations

import inspect
from collections.abc import Callable

from ember import Tensor
from ember._dispatch import DispatchMode, call
from ember.nn import Parameter

from .._op_args import split_op_args
from ..graph import Graph
from ..graph_module import GraphModule
from ..node import map_aggregate

__all__ = ["make_fx", "ProxyTorchDispatchMode"]


class ProxyTorchDispatchMode(DispatchMode):
    """Records each op call into `graph`; tensors are tracked by identity to their nodes."""

    def __init__(self, graph: Graph, decomposition_table: dict | None = None):
        self.graph = graph
        self.decomposition_table = decomposition_table or {}
        self.tracked: dict = {}     # id(tensor) -> (tensor, node)
        self.constants: dict = {}   # attribute name -> tensor

    def track(self, t: Tensor, node) -> None:
        self.tracked[id(t)] = (t, node)

    def node_of(self, t: Tensor):
        hit = self.tracked.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        prefix = "_param_constant" if isinstance(t, Parameter) else "_tensor_constant"
        name = f"{prefix}{sum(k.startswith(prefix) for k in self.constants)}"
        self.constants[name] = t
        node = self.graph.get_attr(name)
        self.track(t, node)
        return node

    def _arg(self, a):
        return map_aggregate(a, lambda x: self.node_of(x) if isinstance(x, Tensor) else x)

    def __ember_dispatch__(self, op, args, out):
        decomp = self.decomposition_table.get(op)
        if decomp is not None:
            with self:  # the decomposition's own op calls are recorded
                return decomp(*args)
        r = call(op, args, out)
        a, kw = split_op_args(op, args)
        node = self.graph.call_function(op, self._arg(a), self._arg(kw))
        if isinstance(r, Tensor):
            self.track(r, node)
        elif isinstance(r, (tuple, list)):
            import operator
            for i, x in enumerate(r):
                if isinstance(x, Tensor):
                    self.track(x, self.graph.call_function(operator.getitem, (node, i)))
        return r


def _placeholder_names(f: Callable, n: int) -> list:
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(names) < n or any(p.kind == p.VAR_POSITIONAL for p in params):
        return [f"arg{i}_1" for i in range(n)]
    return [f"{nm}_1" for nm in names[:n]]


def make_fx(f: Callable, decomposition_table: dict | None = None, tracing_mode: str = "real",
            _allow_non_fake_inputs: bool = True, **kwargs) -> Callable:
    """Return a function that traces f on its arguments into a GraphModule of table ops.

    decomposition_table: {op: fn} whose ops are traced through fn instead of recorded."""
    if tracing_mode not in ("real", "fake", "symbolic"):
        raise AssertionError(f"Unexpected tracing type: {tracing_mode}")
    if tracing_mode == "symbolic":
        raise NotImplementedError("make_fx(tracing_mode='symbolic'): ember has no ShapeEnv "
                                  "yet; use 'real' or 'fake'")

    def wrapped(*args):
        graph = Graph()
        mode = ProxyTorchDispatchMode(graph, decomposition_table)
        fake = None
        if tracing_mode == "fake":
            from ember._subclasses.fake_tensor import FakeTensorMode
            fake = FakeTensorMode(allow_non_fake_inputs=_allow_non_fake_inputs)
            args = tuple(fake.from_tensor(a) if isinstance(a, Tensor) else a for a in args)
        for name, a in zip(_placeholder_names(f, len(args)), args):
            ph = graph.placeholder(name)
            if isinstance(a, Tensor):
                mode.track(a, ph)
        if fake is not None:
            with fake, mode:
                result = f(*args)
        else:
            with mode:
                result = f(*args)
        graph.output(mode._arg(result))
        return GraphModule(dict(mode.constants), graph, "f" if not hasattr(f, "__name__")
                           or f.__name__ == "<lambda>" else f.__name__)
    return wrapped
