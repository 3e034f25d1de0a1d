"""`ember.ops.<namespace>.<name>`: every table op by qualified name (`ember.ops.aten.add`)."""
from __future__ import annotations

from ._ops import OPS


class _Namespace:
    def __init__(self, ns: str):
        self._ns = ns

    def __getattr__(self, name: str):
        if self._ns == "higher_order":   # cond, map_impl: ember-compiler's higher-order ops
            return _higher_order(name)
        key = name if self._ns == "aten" else f"{self._ns}::{name}"
        op = OPS.get(key)
        if op is None:
            raise AttributeError(f"'_OpNamespace' '{self._ns}' object has no attribute "
                                 f"'{name}'")
        return op


def _higher_order(name: str):
    import importlib
    import importlib.util
    if importlib.util.find_spec("ember._higher_order_ops") is None:
        from ._components import require
        require("compiler", f"ember.ops.higher_order.{name}")
    ops = importlib.import_module("ember._higher_order_ops").HIGHER_ORDER_OPS
    if name not in ops:
        raise AttributeError(f"'_OpNamespace' 'higher_order' object has no attribute '{name}'")
    return ops[name]


class _Ops:
    def __getattr__(self, ns: str) -> _Namespace:
        if ns.startswith("__"):
            raise AttributeError(ns)
        return _Namespace(ns)


ops = _Ops()
