"""ember.fx: ember's graph IR with torch.fx's API (Graph, Node, GraphModule, symbolic_trace,
Interpreter, Transformer, replace_pattern). Ships in ember-compiler.

Importing `ember.fx` is cheap: the submodules load on first use of a name.
"""
from __future__ import annotations

import importlib

__all__ = ["Graph", "GraphModule", "Node", "Proxy", "Tracer", "symbolic_trace", "wrap",
           "Interpreter", "Transformer", "replace_pattern", "map_arg", "PH"]

_WHERE = {"Graph": "graph", "GraphModule": "graph_module", "Node": "node", "Proxy": "proxy",
          "Tracer": "_symbolic_trace", "symbolic_trace": "_symbolic_trace",
          "wrap": "_symbolic_trace", "PH": "_symbolic_trace", "Interpreter": "interpreter",
          "Transformer": "interpreter", "replace_pattern": "subgraph_rewriter",
          "map_arg": "node"}


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'ember.fx' has no attribute '{name}'")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
