"""ember.export: whole-program capture with torch.export's API. `export(module, args)` gives an
ExportedProgram (a functional graph of table ops, its signature, state dict and ranges);
`save`/`load` read and write PyTorch 2.13's PT2 archive (JSON graph, raw weights, no pickle).

>>> import ember
>>> ep = ember.export.export(ember.nn.Linear(4, 2), (ember.ones(3, 4),))
>>> ep.module()(ember.ones(3, 4)).shape
ember.Size([3, 2])

Ships in ember-export.
"""
from ._dims import Dim, ShapesCollection, UserError, dims
from ._serde import SerializationError, load, save
from ._trace import export
from .exported_program import ExportedProgram
from .graph_signature import ExportGraphSignature

__all__ = ["export", "export_for_training", "save", "load", "Dim", "dims", "ShapesCollection",
           "ExportedProgram", "ExportGraphSignature", "UserError", "SerializationError"]


def export_for_training(mod, args, kwargs=None, *, dynamic_shapes=None, strict=False, **kw):
    """PyTorch 2.5-2.8's name for `export` (the training IR), kept as an alias."""
    return export(mod, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict, **kw)
