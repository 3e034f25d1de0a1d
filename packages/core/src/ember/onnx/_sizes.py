"""Dynamic sizes in ONNX exports: which input dims are symbolic (`dynamic_axes`,
`dynamic_shapes`, or an ExportedProgram's symbolic dims), and the size values of a symbolic
trace written as ONNX ops: a size is a 1-element int64 tensor (`Shape` with start/end), size
arithmetic is Add/Sub/Mul/Div on those, and a shape with symbolic entries is their `Concat`
(what reshape/view read)."""
from __future__ import annotations

import inspect
import operator

import numpy as np

from ._translate import OnnxExporterError

__all__ = ["dynamic_axes_of", "is_size_node", "size_node"]

_ARITH = {operator.add: "Add", operator.sub: "Sub", operator.mul: "Mul",
          operator.floordiv: "Div"}  # (sizes are non-negative: Div of int64 is floor division)


def is_size_node(n) -> bool:
    return n.target in _ARITH or getattr(n.target, "__name__", None) == "sym_size"


def _as_size(b, v, arg):
    """A size operand: a 1-element int64 tensor name."""
    v = arg(v)
    return v if isinstance(v, str) else b.const([int(v)], np.int64, "size")


def size_node(b, n, arg) -> str:
    """sym_size(x, d) -> Shape(x)[d:d+1]; a + b, a * b, ... on sizes -> the ONNX op."""
    if n.target in _ARITH:
        x, y = n.args
        return b.add(_ARITH[n.target], [_as_size(b, x, arg), _as_size(b, y, arg)])
    x, d = n.args[0], int(n.args[1])
    if d == -1:
        return b.add("Shape", [arg(x)], start=-1)
    return b.add("Shape", [arg(x)], start=d, end=d + 1)


def _dim_name(d, default: str) -> str | None:
    if d is None:
        return None
    name = getattr(d, "__name__", None)
    return str(name) if name is not None else (d if isinstance(d, str) else default)


def _from_dynamic_shapes(model, n_args, dynamic_shapes, input_names) -> dict:
    """torch.export-style dynamic_shapes ({arg name: {dim: Dim}} or one entry per input, each
    a dict or a per-dim list) -> {input name: {dim: symbol name}}."""
    if isinstance(dynamic_shapes, dict):
        fwd = getattr(model, "forward", model)
        params = [p for p in inspect.signature(fwd).parameters if p != "self"]
        entries = [None] * n_args
        for k, v in dynamic_shapes.items():
            if k not in params or params.index(k) >= n_args:
                raise OnnxExporterError(f"ember.onnx.export: dynamic_shapes names '{k}', not "
                                        f"an input of the model ({params[:n_args]})")
            entries[params.index(k)] = v
    else:
        entries = list(dynamic_shapes) + [None] * (n_args - len(dynamic_shapes))
    out = {}
    for i, spec in enumerate(entries):
        if not spec:
            continue
        name = input_names[i] if i < len(input_names) else f"input_{i}"
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        dims = {int(k): _dim_name(v, f"{name}_dim_{k}") for k, v in items}
        out[name] = {k: v for k, v in dims.items() if v is not None}
    return out


def _from_exported_program(ep, input_names) -> dict:
    from ember.export.exported_program import _user_placeholders
    out = {}
    for i, n in enumerate(_user_placeholders(ep)):
        spec = n.meta.get("tensor_meta")
        if spec is None:
            continue
        name = input_names[i] if i < len(input_names) else f"input_{i}"
        dims = {d: str(s) for d, s in enumerate(spec.shape) if not isinstance(s, int)}
        if dims:
            out[name] = dims
    return out


def dynamic_axes_of(model, args, input_names, dynamic_axes, dynamic_shapes=None):
    """(model to trace, example args, {name: {dim: symbol}} or None) for an export call; an
    ExportedProgram exports its module, on its example inputs when no args are given."""
    input_names = list(input_names or [])
    found = {}
    if type(model).__name__ == "ExportedProgram" and hasattr(model, "graph_signature"):
        ep = model
        if not args:
            ex = ep.example_inputs
            if ex is None:
                raise OnnxExporterError("ember.onnx.export: an ExportedProgram without example "
                                        "inputs needs args")
            args = tuple(ex[0])
        found.update(_from_exported_program(ep, input_names))
        model = ep.module()
    if dynamic_shapes:
        found.update(_from_dynamic_shapes(model, len(args), dynamic_shapes, input_names))
    for name, axes in (dynamic_axes or {}).items():
        if isinstance(axes, dict):
            found[name] = {int(k): str(v) for k, v in axes.items()}
        else:
            found[name] = {int(k): f"{name}_dynamic_axes_{j + 1}" for j, k in enumerate(axes)}
    return model, args, found or None
