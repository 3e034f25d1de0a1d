"""ember.onnx.export: trace the model with make_fx (ember-compiler), record each node's shapes by
running the graph once on the example inputs, translate the table ops to ONNX nodes
(_translate.RULES) and write a ModelProto through the `onnx` package."""
from __future__ import annotations

import operator

import numpy as np

from ._sizes import dynamic_axes_of, is_size_node, size_node
from ._translate import RULES, GraphBuilder, OnnxExporterError


def _need(module: str, wheel: str):
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError:
        raise OnnxExporterError(f"ember.onnx.export needs {wheel} (pip install {wheel})") from None


class _Info:
    """Shapes and dtypes of a node's tensor arguments and of its output(s)."""

    def __init__(self, arg_meta, out):
        self._arg_meta = arg_meta
        outs = out if isinstance(out, (tuple, list)) else [out]
        self.out_shapes = [tuple(o.shape) for o in outs if hasattr(o, "shape")]
        self.out_shape = self.out_shapes[0] if self.out_shapes else ()
        first = next((o for o in outs if hasattr(o, "dtype")), None)
        self.out_dtype = str(first.dtype).split(".")[-1] if first is not None else "float32"

    def shape(self, i):
        return self._arg_meta[i][0]

    def dtype(self, i):
        return self._arg_meta[i][1]


def _record(gm, args):
    """{node: value} from running gm on the example inputs (the exporter reads shapes)."""
    import ember
    from ember.fx import Interpreter

    seen = {}

    class Rec(Interpreter):
        def run_node(self, n):
            r = super().run_node(n)
            seen[n] = r
            return r
    with ember.no_grad():
        Rec(gm).run(*args)
    return seen


def _node_args(n):
    out = []

    def walk(a):
        if isinstance(a, (list, tuple)):
            for x in a:
                walk(x)
        elif hasattr(a, "op") and hasattr(a, "users"):
            out.append(a)
    walk(list(n.args) + list(n.kwargs.values()))
    return out


def _meta(v):
    import ember
    if isinstance(v, ember.Tensor):
        return (tuple(v.shape), str(v.dtype).split(".")[-1])
    return None


def _translate(gm, args, onnx, input_names, output_names):
    from onnx import helper, numpy_helper

    import ember
    vals = _record(gm, args)
    b = GraphBuilder(helper, numpy_helper)
    names, graph_inputs, outputs = {}, [], []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, n in enumerate(placeholders):
        names[n] = input_names[i] if i < len(input_names) else f"input_{i}"
        graph_inputs.append((names[n], vals[n]))

    def arg(a):
        if isinstance(a, (list, tuple)):
            return type(a)(arg(x) for x in a)
        if hasattr(a, "op") and hasattr(a, "users"):  # an fx Node
            return names[a]
        if isinstance(a, ember.dtype):
            return str(a).split(".")[-1]
        return a

    live = set(placeholders)  # nodes that depend on an input; the rest fold to constants
    for n in gm.graph.nodes:
        if n.op == "call_function" and any(x in live for x in _node_args(n)):
            live.add(n)
    for n in gm.graph.nodes:
        if n.op == "call_function" and n not in live and isinstance(vals.get(n), ember.Tensor):
            names[n] = b.fresh("folded")  # e.g. arange, a causal mask: recorded values
            folded = np.ascontiguousarray(vals[n].detach().numpy())
            b.inits.append(numpy_helper.from_array(folded, names[n]))
        elif n.op == "get_attr":
            t = getattr(gm, n.target)
            names[n] = b.fresh("w")
            b.inits.append(numpy_helper.from_array(np.ascontiguousarray(t.detach().numpy()),
                                                   names[n]))
        elif n.op == "call_function" and n.target is operator.getitem:
            names[n] = names[n.args[0]][n.args[1]]
        elif n.op == "call_function" and is_size_node(n):
            names[n] = size_node(b, n, arg)
        elif n.op == "call_function":
            op = getattr(n.target, "name", str(n.target))
            rule = RULES.get(op)
            if rule is None:
                raise OnnxExporterError(f"ember.onnx.export: no ONNX translation for the op "
                                        f"'{op}' (node {n.name})")
            a = [arg(x) for x in n.args] + [arg(v) for v in n.kwargs.values()]
            meta = [_meta(vals.get(x)) if hasattr(x, "op") else None for x in n.args]
            names[n] = rule(b, a, _Info(meta, vals[n]))
        elif n.op == "output":
            outs = n.args[0]
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            for i, o in enumerate(outs):
                name = output_names[i] if i < len(output_names) else f"output_{i}"
                b.nodes.append(helper.make_node("Identity", [names[o]], [name],
                                                name=b.fresh("n_out")))
                outputs.append((name, vals[o]))
    return b, graph_inputs, outputs


def _value_info(helper, name, value, dyn):
    shape = [dyn.get(i, int(d)) for i, d in enumerate(value.shape)]
    dt = helper.np_dtype_to_tensor_dtype(np.dtype(value.numpy().dtype))
    return helper.make_tensor_value_info(name, dt, shape)


def _all_dims(dynamic_axes, name, value):
    """An output of a dynamic export whose axes were not named: every dim symbolic (its sizes
    follow from the inputs')."""
    if not dynamic_axes:
        return {}
    return {i: f"{name}_dim_{i}" for i in range(len(value.shape))}


def _dyn(dynamic_axes, name):
    axes = (dynamic_axes or {}).get(name)
    if axes is None:
        return {}
    if isinstance(axes, dict):
        return {int(k): str(v) for k, v in axes.items()}
    return {int(k): f"{name}_dynamic_axes_{i + 1}" for i, k in enumerate(axes)}


def export_model(model, args, f, input_names, output_names, dynamic_axes, opset_version,
                 dynamic_shapes=None):
    """The ModelProto of model(*args), saved to f (a path or a binary file) when given."""
    import ember
    onnx = _need("onnx", "onnx")
    proxy = _need("ember.fx.experimental.proxy_tensor", "ember-compiler")
    from onnx import helper
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    model, args, dynamic_axes = dynamic_axes_of(model, args, input_names, dynamic_axes,
                                                dynamic_shapes)
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()  # as torch.onnx.export's default (training=TrainingMode.EVAL)
    try:
        with ember.no_grad():
            # dynamic dims: a symbolic trace, so sizes are graph values (Shape, Concat, ...)
            mode = "symbolic" if dynamic_axes else "real"
            gm = proxy.make_fx(model, tracing_mode=mode)(*args)
        b, ins, outs = _translate(gm, args, onnx, list(input_names or []),
                                  list(output_names or []))
    finally:
        if was_training:
            model.train()
    used = {i for node in b.nodes for i in node.input}
    b.inits = [t for t in b.inits if t.name in used]  # folded values no node reads
    graph = helper.make_graph(
        b.nodes, "main_graph",
        [_value_info(helper, n, v, _dyn(dynamic_axes, n)) for n, v in ins],
        [_value_info(helper, n, v, _dyn(dynamic_axes, n) or _all_dims(dynamic_axes, n, v))
         for n, v in outs],
        initializer=b.inits)
    opset = 18 if opset_version is None else int(opset_version)
    if opset < 17:
        raise OnnxExporterError(f"ember.onnx.export writes opset 17 or later (LayerNormalization"
                                f"), got opset_version={opset}")
    model_proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                    producer_name="ember")
    model_proto.ir_version = min(model_proto.ir_version, 10)
    onnx.checker.check_model(model_proto)
    if f is not None:
        if hasattr(f, "write"):
            f.write(model_proto.SerializeToString())
        else:
            onnx.save(model_proto, str(f))
    return model_proto
