"""ember.export: whole-program capture with torch.export's API. `export(module, args)` gives an
ExportedProgram (a functional graph of table ops, its signature, state dict and ranges);
`save`/`load` read and write PyTorch 2.13's PT2 archive (JSON graph, raw weights, no pickle).

>>> import ember
>>> ep = ember.export.export(ember.nn.Linear(4, 2), (ember.ones(3, 4),))
>>> ep.module()(ember.ones(3, 4)).shape
ember.Size([3, 2])

Ships in ember-export. Importing it is cheap: the submodules load on first use of a name.
"""
from __future__ import annotations

import importlib

__all__ = ["export", "export_for_training", "save", "load", "Dim", "dims", "ShapesCollection",
           "ExportedProgram", "ExportGraphSignature", "UserError", "SerializationError",
           "unflatten", "UnflattenedModule"]

_WHERE = {"Dim": "_dims", "dims": "_dims", "ShapesCollection": "_dims", "UserError": "_dims",
          "SerializationError": "_serde", "load": "_serde", "save": "_serde",
          "export": "_trace", "ExportedProgram": "exported_program",
          "ExportGraphSignature": "graph_signature", "unflatten": "_unflatten",
          "UnflattenedModule": "_unflatten"}


def export_for_training(mod, args, kwargs=None, *, dynamic_shapes=None, strict=False, **kw):
    """PyTorch 2.5-2.8's name for `export` (the training IR), kept as an alias."""
    from ._trace import export
    return export(mod, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict, **kw)


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'ember.export' has no attribute '{name}'")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
