"""What core's native hit path (ember._C, csrc/fastpath_grad.cpp) needs to build graph nodes.

A hit whose input requires grad gets its `OpNode` built in C++, the same node `record` builds
(`_engine._tracker`): this module hands over the node classes once and describes each op once.
A view (csrc/viewpath.cpp makes it) gets its node here too, then its TensorInfo. An op
`describe` declines (composite, in-place, list arguments) is recorded by `record`.
A backward pass runs in ember._C's loop (csrc/engine.cpp), given the node classes here
(`EMBER_NATIVE_ENGINE=0`: the Python loop runs every pass, as without ember._C).
"""
from __future__ import annotations

import os

from . import _engine, _graph

__all__ = ["describe", "register"]


def describe(op):
    """(op info, diff_idx, use per argument, vjp reads the result) of an op whose node C++ may
    build, else None."""
    inf = _graph.op_info(op)
    if (inf.composite or inf.inplace or inf.detach or not inf.no_list
            or inf.nargs != len(op.arg_names) or len(inf.use_args) != inf.nargs):
        return None
    if inf.view and (inf.vjp is None or any(
            u == _graph.NONE and a.is_int_list for u, a in zip(inf.use_args, op.schema.args))):
        return None  # (the tracker drops a list the vjp does not read; C++ keeps it: Python)
    return inf, tuple(inf.diff_idx), tuple(int(u) for u in inf.use_args), bool(inf.use_out)


def register() -> bool:
    """Give core's native module the classes (False: no native module)."""
    from ember import _native
    if os.environ.get("EMBER_NATIVE_ENGINE", "1") != "0":  # (0: benchmarks' Python loop)
        _engine.NATIVE_RUN[0] = _native.engine_init(dict(
            Node=_graph.Node, OpNode=_graph.OpNode, AccumulateGrad=_graph.AccumulateGrad,
            node_step=_engine._node_step, acc_refs=_graph.NATIVE_ENGINE_REFS,
            OpInfo=_graph._OpInfo, Saved=_graph._Saved, fix_grads=_graph.fix_grads))
    return _native.register_autograd(dict(
        record=_engine.record, describe=describe, edge_of=_graph.edge_of,
        same_data=_graph._same_data,
        attach=_engine._attach, OpNode=_graph.OpNode, Saved=_graph._Saved,
        MetaOnly=_graph.MetaOnly, seq=_graph._seq, ANOMALY=_graph.ANOMALY,
        SAVED_HOOKS=_graph.SAVED_HOOKS, TensorInfo=_graph.TensorInfo,
        engine_globals=vars(_engine)))
