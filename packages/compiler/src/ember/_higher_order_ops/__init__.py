"""Higher-order ops: ops that take functions (`cond`'s branches, `map`'s body). Eagerly they
call the functions; under make_fx / export each function is traced into a GraphModule held by
the caller's graph (`true_graph_0`) and the call is one node, `ember.ops.higher_order.cond(...)`,
as torch.ops.higher_order records it.

>>> import ember
>>> ember.cond(ember.tensor(True), lambda x: x + 1, lambda x: x - 1, (ember.ones(2),))
tensor([2., 2.])
"""
from __future__ import annotations

__all__ = ["HigherOrderOperator", "cond", "map", "HIGHER_ORDER_OPS"]


class HigherOrderOperator:
    """A named callable op over functions; `ember.ops.higher_order.<name>` finds it."""

    def __init__(self, name: str, impl):
        self._name = self.__name__ = self.__qualname__ = name
        self.__module__ = "ember.ops.higher_order"
        self._impl = impl
        HIGHER_ORDER_OPS[name] = self

    def name(self) -> str:
        return self._name

    def __call__(self, *args, **kwargs):
        return self._impl(*args, **kwargs)

    def __repr__(self) -> str:
        return f"ember.ops.higher_order.{self._name}"

    def __reduce__(self):   # pickled by name (GraphModules holding the node pickle)
        return (_by_name, (self._name,))


HIGHER_ORDER_OPS: dict = {}


def _by_name(name: str) -> HigherOrderOperator:
    return HIGHER_ORDER_OPS[name]


from .cond import cond, cond_op  # noqa: E402,F401
from .map import map, map_impl  # noqa: E402,F401
