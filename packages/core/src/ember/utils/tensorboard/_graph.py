"""SummaryWriter.add_graph: a make_fx trace (ember-compiler) as TensorBoard's GraphDef, one
NodeDef per placeholder, weight and op, named by the fx node, with its inputs, output shape and
dtype as attributes."""
from __future__ import annotations

try:  # core's optional extra "tensorboard" (SummaryWriter imports this module on use)
    from tensorboard.compat.proto.attr_value_pb2 import AttrValue
    from tensorboard.compat.proto.graph_pb2 import GraphDef
    from tensorboard.compat.proto.node_def_pb2 import NodeDef
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
    from tensorboard.compat.proto.versions_pb2 import VersionDef
except ImportError as e:
    raise ImportError("SummaryWriter.add_graph needs the tensorboard package (pip install "
                      "tensorboard, or ember[tensorboard])") from e


def _trace(model, args):
    try:
        from ember.fx.experimental.proxy_tensor import make_fx
    except ImportError:
        raise ImportError("SummaryWriter.add_graph needs the ember-compiler component (pip "
                          "install ember-compiler) to trace the model") from None
    import ember
    with ember.no_grad():
        return make_fx(model)(*args)


def _shapes(gm, args) -> dict:
    import ember
    from ember.fx import Interpreter
    seen = {}

    class Rec(Interpreter):
        def run_node(self, n):
            r = super().run_node(n)
            seen[n.name] = r
            return r
    with ember.no_grad():
        Rec(gm).run(*args)
    return seen


def _attrs(value) -> dict:
    import ember
    if not isinstance(value, ember.Tensor):
        return {}
    shape = TensorShapeProto(dim=[TensorShapeProto.Dim(size=int(d)) for d in value.shape])
    return {"_output_shapes": AttrValue(list=AttrValue.ListValue(shape=[shape])),
            "dtype": AttrValue(s=str(value.dtype).encode())}


def graph_def(model, args) -> GraphDef:
    gm = _trace(model, args)
    values = _shapes(gm, args)
    nodes = []
    for n in gm.graph.nodes:
        if n.op == "output":
            continue
        op = {"placeholder": "IO Node", "get_attr": "Parameter"}.get(n.op) or getattr(
            n.target, "name", getattr(n.target, "__name__", str(n.target)))
        ins = [a.name for a in n.all_input_nodes]
        nodes.append(NodeDef(name=n.name, op=op, input=ins, attr=_attrs(values.get(n.name))))
    return GraphDef(node=nodes, versions=VersionDef(producer=22))
