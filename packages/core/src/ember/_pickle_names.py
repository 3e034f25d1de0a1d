"""Functions pickle by name (`module.qualname`), so each public function must be found where its
`__module__`/`__qualname__` say. Functions generated from the op table, closures and bindings
moved between modules claimed a name that led elsewhere (`F.relu` said `ember.relu`, another
object), so `ember.save(model)` of a module holding one failed (issue 11, defect 24).
`fix_names(module_name)` renames each public function of a module that its own name does not find.
"""
from __future__ import annotations

import sys
import types

__all__ = ["fix_names"]


def _find(module: str, qualname: str):
    obj = sys.modules.get(module)
    if obj is None or "<" in qualname:  # <locals>, <lambda>: never found by name
        return None
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def fix_names(module_name: str) -> None:
    module = sys.modules[module_name]
    for name, f in list(vars(module).items()):
        if name.startswith("_") or not isinstance(f, types.FunctionType):
            continue
        if _find(f.__module__, f.__qualname__) is not f:
            f.__module__ = module.__name__
            f.__qualname__ = name
