"""The entry of a capture: the call's arguments become sourced values (`A[i]`, `K[name]`),
then the function (or the module's call) is interpreted from its first instruction."""
from __future__ import annotations

import types

from .exc import GraphBreak
from .tracer import V

__all__ = ["capture_call"]


class _Root:
    """The frame-like caller of the top-level function (depth 0)."""
    depth = 0

    def __init__(self, tr):
        self.tr = tr


def capture_call(tr, compiled, A: tuple, K: dict) -> V:
    from .calls import call_module
    from .interp import inline_call
    tr.add_guard(f"len(A) == {len(A)} and list(K) == {list(K)!r}",
                 f"{len(A)} positional arguments, keyword arguments {list(K)}")
    args = [tr.wrap(a, f"A[{i}]") for i, a in enumerate(A)]
    kwargs = {k: tr.wrap(a, f"K[{k!r}]") for k, a in K.items()}
    if compiled._module is not None:
        mod = compiled._module
        mv = tr.wrap(mod, tr.obj(mod))
        return call_module(_Root(tr), mv, args, kwargs)
    fn = compiled._orig
    if isinstance(fn, types.MethodType):
        selfv = tr.wrap(fn.__self__, tr.obj(fn.__self__))
        return inline_call(tr, fn.__func__, [selfv] + args, kwargs, 0)
    if not isinstance(fn, types.FunctionType):
        from ember.nn import Module
        if isinstance(fn, Module):
            return call_module(_Root(tr), tr.wrap(fn, tr.obj(fn)), args, kwargs)
        raise GraphBreak(f"ember.compile of {type(fn).__name__} (not a Python function)")
    if getattr(fn, "_ember_disable", False):
        raise GraphBreak("function is ember.compiler.disable'd")
    return inline_call(tr, fn, args, kwargs, 0)
