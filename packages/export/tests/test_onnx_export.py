"""ember.onnx.export: MLP, CNN, transformer block and GPT (logits and loss) written through
the onnx package and run by onnxruntime against eager ember; dynamic axes, names, files,
and the errors for an op without a translation, an old opset and a missing ember-compiler."""
import io
import math
import sys

import numpy as np
import onnx  # (pinned in requirements.lock; export BUILD test_pypi)
import onnxruntime as ort
import pytest

import ember

nn = ember.nn
F = nn.functional


class Block(nn.Module):
    """Pre-norm transformer block: nn.MultiheadAttention (sdpa) and a GELU MLP."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(16)
        self.att = nn.MultiheadAttention(16, 2, batch_first=True)
        self.fc, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 16)

    def forward(self, x):
        h = self.ln(x)
        a, _ = self.att(h, h, h, need_weights=False)
        x = x + a
        return x + self.fc2(nn.functional.gelu(self.fc(x)))


def _run(proto_bytes, feeds):
    sess = ort.InferenceSession(proto_bytes)
    return sess.run(None, {i.name: v.numpy() for i, v in zip(sess.get_inputs(), feeds)})


def _check(model, args, **kw):
    f = io.BytesIO()
    proto = ember.onnx.export(model, args, f, **kw)
    onnx.checker.check_model(proto)
    model.eval()
    with ember.no_grad():
        ref = model(*args)
    (y,) = _run(f.getvalue(), args)
    np.testing.assert_allclose(y, ref.numpy(), rtol=1e-4, atol=1e-5)
    return proto


MODELS = {
    "mlp": lambda: (nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3), nn.Softmax(-1)),
                    (ember.randn(2, 4),)),
    "cnn": lambda: (nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Conv2d(4, 4, 3, stride=2), nn.Tanh(),
                                  nn.Flatten(), nn.Linear(4, 10)), (ember.randn(2, 1, 8, 8),)),
    "block": lambda: (Block(), (ember.randn(2, 5, 16),)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_run_in_onnxruntime_as_eager(name):
    ember.manual_seed(0)
    model, args = MODELS[name]()
    if name == "cnn":  # running statistics that differ from the initial ones
        model.train()
        with ember.no_grad():
            model(ember.randn(8, 1, 8, 8) * 3 + 1)
    proto = _check(model, args)
    kinds = {n.op_type for n in proto.graph.node}
    want = {"mlp": {"Gemm", "Relu", "Softmax"},
            "cnn": {"Conv", "BatchNormalization", "MaxPool", "Flatten", "Gemm", "Tanh"},
            "block": {"LayerNormalization", "MatMul", "Softmax", "Erf", "Transpose"}}[name]
    assert want <= kinds, kinds


class GPTBlock(nn.Module):
    """The benchmarks' GPT block: a causal mask from tril, masked_fill, softmax."""

    def __init__(self, c=16, heads=2):
        super().__init__()
        self.c, self.heads = c, heads
        self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.fc, self.out = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (y.view(B, T, self.heads, C // self.heads).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = ember.tril(ember.ones(T, T)) == 0
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=50, block=8, n_layer=2):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, 16), nn.Embedding(block, 16)
        self.blocks = nn.ModuleList([GPTBlock() for _ in range(n_layer)])
        self.ln, self.head = nn.LayerNorm(16), nn.Linear(16, vocab, bias=False)

    def logits(self, idx):
        x = self.tok(idx) + self.pos(ember.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))

    def forward(self, idx, targets):
        logits = self.logits(idx)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def test_gpt_logits_and_loss():
    ember.manual_seed(0)
    g = GPT()

    class Logits(nn.Module):
        def __init__(self):
            super().__init__()
            self.g = g

        def forward(self, idx):
            return self.g.logits(idx)
    idx, tgt = ember.randint(0, 50, (2, 8)), ember.randint(0, 50, (2, 8))
    _check(Logits(), (idx,), input_names=["idx"], output_names=["logits"])
    f = io.BytesIO()
    ember.onnx.export(g, (idx, tgt), f)
    (loss,) = _run(f.getvalue(), (idx, tgt))
    with ember.no_grad():
        np.testing.assert_allclose(loss, g(idx, tgt).item(), rtol=1e-5)


def test_dynamic_axes_names_and_file(tmp_path):
    ember.manual_seed(0)
    model, _ = MODELS["cnn"]()
    path = tmp_path / "cnn.onnx"
    ember.onnx.export(model, (ember.randn(2, 1, 8, 8),), str(path), input_names=["img"],
                      output_names=["logits"], dynamic_axes={"img": {0: "batch"},
                                                             "logits": [0]})
    proto = onnx.load(str(path))
    assert [i.name for i in proto.graph.input] == ["img"]
    assert [o.name for o in proto.graph.output] == ["logits"]
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param
    x = ember.randn(5, 1, 8, 8)
    (y,) = _run(path.read_bytes(), (x,))
    model.eval()  # (export ran it in eval mode and gave its training mode back)
    with ember.no_grad():
        np.testing.assert_allclose(y, model(x).numpy(), rtol=1e-4, atol=1e-5)


def test_errors(monkeypatch):
    class Cum(nn.Module):
        def forward(self, x):
            return x.cumsum(0)
    with pytest.raises(ember.onnx.OnnxExporterError, match="cumsum"):
        ember.onnx.export(Cum(), (ember.randn(3),), io.BytesIO())
    with pytest.raises(ember.onnx.OnnxExporterError, match="opset"):
        ember.onnx.export(nn.ReLU(), (ember.randn(3),), io.BytesIO(), opset_version=13)
    monkeypatch.setitem(sys.modules, "ember.fx.experimental.proxy_tensor", None)
    with pytest.raises(ember.onnx.OnnxExporterError, match="ember-compiler"):
        ember.onnx.export(nn.ReLU(), (ember.randn(3),), io.BytesIO())
