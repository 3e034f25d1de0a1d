"""`ember.onnx`: `export(model, args, f, input_names=, output_names=, dynamic_axes=,
opset_version=)` writes an ONNX model of an MLP, CNN or transformer block (traced with make_fx
from ember-compiler, written through the `onnx` package); `is_in_onnx_export()`.

>>> import ember
>>> ember.onnx.is_in_onnx_export()
False
"""
from __future__ import annotations

from ._translate import OnnxExporterError

__all__ = ["export", "is_in_onnx_export", "dynamo_export", "ExportOptions", "OnnxExporterError"]


class ExportOptions:
    def __init__(self, *, dynamic_shapes: bool | None = None, **kwargs):
        self.dynamic_shapes = dynamic_shapes


def is_in_onnx_export() -> bool:
    """False: ember never runs model code under an ONNX exporter."""
    return False


def export(model, args=(), f=None, *, kwargs=None, export_params=True, verbose=None,
           input_names=None, output_names=None, opset_version=None, dynamic_axes=None,
           dynamic_shapes=None, dynamo: bool = True, external_data=True, **options):
    """Export `model(*args)` to ONNX (file `f`, a path or a binary file) and return the
    ModelProto. The model runs in eval mode while traced; ops are translated one by one
    (ember.onnx._translate), an op without a translation raises OnnxExporterError naming it.
    `dynamic_axes` ({name: {axis: "dim_name"}} or {name: [axes]}) marks input/output dims
    symbolic. Needs the `onnx` package and the ember-compiler component (make_fx).

    >>> import ember, io
    >>> m = ember.nn.Sequential(ember.nn.Linear(4, 2), ember.nn.ReLU())
    >>> proto = ember.onnx.export(m, (ember.randn(1, 4),), io.BytesIO())  # doctest: +SKIP
    """
    if kwargs:
        raise OnnxExporterError("ember.onnx.export: keyword inputs (kwargs=) are not exported")
    if not export_params:
        raise OnnxExporterError("ember.onnx.export: export_params=False is not supported")
    from ._export import export_model
    return export_model(model, args, f, input_names, output_names, dynamic_axes, opset_version,
                        dynamic_shapes)


def dynamo_export(model, *args, export_options=None, **kwargs):
    return export(model, args, kwargs=kwargs)
