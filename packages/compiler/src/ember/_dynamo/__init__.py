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


def _dims(t, index, what) -> list:
    idx = [index] if isinstance(index, int) else list(index)
    for i in idx:
        if not -t.ndim <= i < (t.ndim or 1):
            raise IndexError(f"{what}: dim {i} out of range for a {t.ndim}-d tensor")
    return [i % t.ndim for i in idx]


def mark_dynamic(t, index, *, min=None, max=None) -> None:
    """Make dim(s) `index` of t symbolic from the first capture on (`min`/`max`: the range
    the size is guarded to stay in). Sizes 0 and 1 are still specialized.

    >>> import ember, ember._dynamo as dynamo
    >>> x = ember.ones(4, 3)
    >>> dynamo.mark_dynamic(x, 0, min=2, max=64)
    >>> ember.compile(lambda x: x * 2, backend="eager")(x).shape
    ember.Size([4, 3])
    """
    dims = _dims(t, index, "mark_dynamic")
    s = set(getattr(t, "_dynamo_dynamic_indices", set()))
    s.update(dims)
    t._dynamo_dynamic_indices = s
    static = set(getattr(t, "_dynamo_static_indices", set())) - set(dims)
    t._dynamo_static_indices = static
    if min is not None or max is not None:
        ranges = dict(getattr(t, "_dynamo_dynamic_ranges", {}))
        for d in dims:
            ranges[d] = (min, max)
        t._dynamo_dynamic_ranges = ranges


def maybe_mark_dynamic(t, index) -> None:
    """Like mark_dynamic, as a hint: the dim is symbolic unless the trace specializes it."""
    s = set(getattr(t, "_dynamo_weak_dynamic_indices", set()))
    s.update(_dims(t, index, "maybe_mark_dynamic"))
    t._dynamo_weak_dynamic_indices = s


def mark_static(t, index=None) -> None:
    """Keep dim(s) `index` of t (all dims when None) at their size: never symbolic, not even
    after they change (each new size is a recompile)."""
    dims = list(range(t.ndim)) if index is None else _dims(t, index, "mark_static")
    for attr in ("_dynamo_dynamic_indices", "_dynamo_weak_dynamic_indices"):
        t.__dict__[attr] = set(getattr(t, attr, set())) - set(dims)
    t._dynamo_static_indices = set(getattr(t, "_dynamo_static_indices", set())) | set(dims)
