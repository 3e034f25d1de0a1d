"""ember._dynamo: `ember.compile`'s capture (torch._dynamo's API). Python bytecode is interpreted
symbolically (interp.py), tensor work recorded into fx graphs on fake tensors, every source read
guarded (tracer.py), compiled entries cached per function (eval_frame.py) and handed to a backend
(backends.py; "aot_eager" builds the joint forward/backward in aot.py)."""
from __future__ import annotations

from . import config, exc
from .backends import list_backends, lookup_backend, register_backend
from .eval_frame import allow_in_graph, disable, is_compiling, optimize, reset, set_stance
from .explain import ExplainOutput, explain


def __getattr__(name):
    if name == "OptimizedModule":
        from . import eval_frame
        return eval_frame.__getattr__(name)
    raise AttributeError(f"module 'ember._dynamo' has no attribute {name!r}")

__all__ = ["config", "exc", "register_backend", "lookup_backend", "list_backends", "optimize",
           "OptimizedModule", "allow_in_graph", "disable", "is_compiling", "reset", "set_stance",
           "explain", "ExplainOutput", "mark_dynamic", "mark_static", "maybe_mark_dynamic"]


def mark_dynamic(t, index, **ranges) -> None:
    """Record that dim(s) `index` of t should be symbolic. ember's capture has no symbolic
    sizes yet: the mark is kept (t._dynamo_dynamic_indices) and sizes are still specialized."""
    idx = [index] if isinstance(index, int) else list(index)
    for i in idx:
        if not -t.ndim <= i < (t.ndim or 1):
            raise IndexError(f"mark_dynamic: dim {i} out of range for a {t.ndim}-d tensor")
    s = set(getattr(t, "_dynamo_dynamic_indices", set()))
    s.update(i % t.ndim for i in idx)
    t._dynamo_dynamic_indices = s


maybe_mark_dynamic = mark_dynamic


def mark_static(t, index=None) -> None:
    """Mark dims of t static (sizes are specialized: the default here)."""
    s = set(getattr(t, "_dynamo_dynamic_indices", set()))
    if index is None:
        s.clear()
    else:
        s.discard(index % t.ndim)
    t._dynamo_dynamic_indices = s
