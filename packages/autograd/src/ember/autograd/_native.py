"""What core's native hit path (ember._C, csrc/fastpath_grad.cpp) needs to build graph nodes.

A hit whose input requires grad gets its `OpNode` built in C++, the same node `record` builds
(`_engine._tracker`): this module hands over the node classes once and describes each op once.
An op `describe` declines (composite, in-place, view, list arguments) is recorded by `record`.
"""
from __future__ import annotations

from . import _engine, _graph

__all__ = ["describe", "register"]


def describe(op):
    """(op info, diff_idx, use per argument, vjp reads the result) of an op whose node C++ may
    build, else None."""
    inf = _graph.op_info(op)
    if (inf.composite or inf.inplace or inf.view or inf.detach or not inf.no_list
            or inf.nargs != len(op.arg_names) or len(inf.use_args) != inf.nargs):
        return None
    return inf, tuple(inf.diff_idx), tuple(int(u) for u in inf.use_args), bool(inf.use_out)


def register() -> bool:
    """Give core's native module the classes (False: no native module)."""
    from ember import _native
    return _native.register_autograd(dict(
        record=_engine.record, describe=describe, edge_of=_graph.edge_of,
        attach=_engine._attach, OpNode=_graph.OpNode, Saved=_graph._Saved,
        MetaOnly=_graph.MetaOnly, seq=_graph._seq, ANOMALY=_graph.ANOMALY,
        SAVED_HOOKS=_graph.SAVED_HOOKS))
