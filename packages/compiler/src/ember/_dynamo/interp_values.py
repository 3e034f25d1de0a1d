"""The values a `Frame` (interp.py) keeps besides plain V's: the NULL marker, closure cells,
functions made in the trace, unrolled iterators; and which functions the interpreter inlines."""
from __future__ import annotations

import sys
import types

from .tracer import V

__all__ = ["NULL", "RETURN", "PY312", "Cell", "LocalFunction", "Iter"]

PY312 = sys.version_info >= (3, 12)
NULL = V("<NULL>")
RETURN = object()  # what an opcode handler answers when the frame returns


class Cell:
    """A closure cell of a frame the interpreter runs (holds a V)."""
    __slots__ = ("v",)

    def __init__(self, v=None):
        self.v = v


class LocalFunction:
    """A function made by MAKE_FUNCTION inside the trace (its cells hold V's)."""

    def __init__(self, code, globs, defaults, kwdefaults, cells, name):
        self.code, self.globals, self.cells = code, globs, cells
        self.defaults, self.kwdefaults, self.__name__ = defaults or (), kwdefaults or {}, name


class Iter:
    """An iterator over a fixed list of V's (for loops are unrolled)."""
    __slots__ = ("items", "pos")

    def __init__(self, items):
        self.items, self.pos = list(items), 0


def _is_user_fn(fn) -> bool:
    from .eval_frame import _ALLOW_IN_GRAPH
    mod = getattr(fn, "__module__", "") or ""
    # ember.optim's steps are inlined like user code (their per-parameter updates captured)
    return (isinstance(fn, types.FunctionType) and (not mod.startswith("ember") or
                                                    mod.startswith(_INLINED))
            and fn not in _ALLOW_IN_GRAPH)


_INLINED = ("ember.optim.",)
