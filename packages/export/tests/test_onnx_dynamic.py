"""ember.onnx.export with dynamic sizes: reshapes whose sizes come from the inputs are written
as ONNX Shape/Concat (size arithmetic as Mul/Add), from `dynamic_axes`, torch.export-style
`dynamic_shapes`, or an ExportedProgram given as the model; each model is run by onnxruntime
against eager ember at two batch (and sequence) sizes."""
import io

import numpy as np
import onnxruntime as ort
import pytest

import ember

nn = ember.nn
F = nn.functional
Dim = ember.export.Dim


class Heads(nn.Module):
    """Multi-head self-attention written with view/transpose on (B, T, C)."""

    def __init__(self, c=16, h=2):
        super().__init__()
        self.h = h
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.h, C // self.h).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Folded(nn.Module):
    """Batch and sequence folded together and back (B*T rows), then flattened per sample."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 4)

    def forward(self, x):
        B, T, C = x.shape
        y = self.lin(x.reshape(-1, C))           # (B*T, 4)
        return y.view(B, T, 4).transpose(1, 2).reshape(B, -1)


def _run(buf, x):
    sess = ort.InferenceSession(buf)
    return sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]


def _check_sizes(model, buf, shapes):
    model.eval()
    for shape in shapes:
        x = ember.randn(*shape)
        with ember.no_grad():
            ref = model(x).numpy()
        np.testing.assert_allclose(_run(buf, x), ref, rtol=1e-4, atol=1e-5)


CASES = {
    "axes_folded": (Folded, {"dynamic_axes": {"x": {0: "batch", 1: "seq"}},
                             "input_names": ["x"]}, [(2, 3, 16), (5, 7, 16)]),
    "shapes_folded": (Folded, {"dynamic_shapes": {"x": {0: Dim("b"), 1: Dim("t")}}},
                      [(2, 3, 16), (4, 9, 16)]),
    "shapes_tuple_batch": (Folded, {"dynamic_shapes": ({0: "batch"},)}, [(2, 3, 16), (6, 3, 16)]),
    "axes_heads": (Heads, {"dynamic_axes": {"x": [0, 1]}, "input_names": ["x"]},
                   [(2, 5, 16), (3, 8, 16)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_dynamic_reshapes_run_at_other_sizes(name):
    ember.manual_seed(0)
    cls, kw, shapes = CASES[name]
    model = cls().eval()
    f = io.BytesIO()
    proto = ember.onnx.export(model, (ember.randn(*shapes[0]),), f, **kw)
    ops = {n.op_type for n in proto.graph.node}
    assert "Shape" in ops and "Concat" in ops  # sizes are graph values, not recorded numbers
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param and not dims[2].dim_param
    _check_sizes(model, f.getvalue(), shapes)


def test_exported_program_as_the_model():
    ember.manual_seed(0)
    model = Folded().eval()
    ep = ember.export.export(model, (ember.randn(2, 3, 16),),
                             dynamic_shapes={"x": {0: Dim("batch")}})
    f = io.BytesIO()
    proto = ember.onnx.export(ep, (), f)  # the program's example inputs
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param and [d.dim_value for d in dims[1:]] == [3, 16]
    _check_sizes(model, f.getvalue(), [(2, 3, 16), (7, 3, 16)])
    g = io.BytesIO()
    ember.onnx.export(ep, (ember.randn(4, 3, 16),), g)  # args given: those
    _check_sizes(model, g.getvalue(), [(4, 3, 16), (1, 3, 16)])


def test_static_export_keeps_recorded_reshapes():
    model = Folded().eval()
    f = io.BytesIO()
    proto = ember.onnx.export(model, (ember.randn(2, 3, 16),), f)
    assert "Concat" not in {n.op_type for n in proto.graph.node}
    _check_sizes(model, f.getvalue(), [(2, 3, 16)])


def test_dynamic_shapes_naming_an_unknown_input():
    with pytest.raises(ember.onnx.OnnxExporterError, match="not an input"):
        ember.onnx.export(Folded(), (ember.randn(2, 3, 16),), io.BytesIO(),
                          dynamic_shapes={"y": {0: Dim("b")}})


class MHABlock(nn.Module):
    """Pre-norm block with nn.MultiheadAttention and a GELU MLP."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(16)
        self.att = nn.MultiheadAttention(16, 2, batch_first=True)
        self.fc, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 16)

    def forward(self, x):
        h = self.ln(x)
        a, _ = self.att(h, h, h, need_weights=False)
        x = x + a
        return x + self.fc2(F.gelu(self.fc(x)))


WORKLOADS = {
    "mlp": (lambda: nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 3)),
            (2, 3, 4), (6, 3, 4), [0]),
    "cnn": (lambda: nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 10)),
            (2, 1, 8, 8), (5, 1, 8, 8), [0]),
    "mha_block": (MHABlock, (2, 5, 16), (3, 9, 16), [0, 1]),
}


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_workloads_with_dynamic_batch(name):
    ember.manual_seed(0)
    make, first, second, axes = WORKLOADS[name]
    model = make().eval()
    f = io.BytesIO()
    ember.onnx.export(model, (ember.randn(*first),), f, input_names=["x"],
                      dynamic_axes={"x": axes})
    _check_sizes(model, f.getvalue(), [first, second])
