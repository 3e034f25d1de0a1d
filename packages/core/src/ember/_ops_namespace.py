"""`ember.ops.<namespace>.<name>`: every table op by qualified name (`ember.ops.aten.add`)."""
from __future__ import annotations

from ._ops import OPS


class _Namespace:
    def __init__(self, ns: str):
        self._ns = ns

    def __getattr__(self, name: str):
        key = name if self._ns == "aten" else f"{self._ns}::{name}"
        op = OPS.get(key)
        if op is None:
            raise AttributeError(f"'_OpNamespace' '{self._ns}' object has no attribute "
                                 f"'{name}'")
        return op


class _Ops:
    def __getattr__(self, ns: str) -> _Namespace:
        if ns.startswith("__"):
            raise AttributeError(ns)
        return _Namespace(ns)


ops = _Ops()
