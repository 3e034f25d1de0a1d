"""`ember.onnx`: importable as torch.onnx is, so model code that asks `is_in_onnx_export()`
runs; `export` is not available yet and says which pieces it needs.

>>> import ember
>>> ember.onnx.is_in_onnx_export()
False
"""
from __future__ import annotations

__all__ = ["export", "is_in_onnx_export", "dynamo_export", "ExportOptions", "OnnxExporterError"]


class OnnxExporterError(RuntimeError):
    """Raised when ember cannot export a model to ONNX."""


class ExportOptions:
    def __init__(self, *, dynamic_shapes: bool | None = None, **kwargs):
        self.dynamic_shapes = dynamic_shapes


def is_in_onnx_export() -> bool:
    """False: ember never runs model code under an ONNX exporter."""
    return False


def _missing() -> list:
    import importlib.util
    missing = []
    if importlib.util.find_spec("onnx") is None:
        missing.append("the onnx package (pip install onnx)")
    if importlib.util.find_spec("ember.export") is None:
        missing.append("the ember-export component (pip install ember-export)")
    return missing


def export(model, args=(), f=None, *, kwargs=None, dynamic_shapes=None, input_names=None,
           output_names=None, opset_version=None, dynamo: bool = True, external_data=True,
           **options):
    """Would export `model` through ember.export's ExportedProgram to an ONNX file.

    Not implemented: always raises OnnxExporterError naming what is missing (the onnx
    package, ember-export, and ember's ExportedProgram -> ONNX translation)."""
    missing = _missing() + ["ember's translation of an ExportedProgram to ONNX, which is not "
                            "implemented yet"]
    raise OnnxExporterError("ember.onnx.export needs " + "; ".join(missing))


def dynamo_export(model, *args, export_options=None, **kwargs):
    return export(model, args, kwargs=kwargs)
