"""Forward and backward in one make_fx graph under fake and symbolic tracing: a train step
(`loss.backward()` or `ember.autograd.grad`) traced without computing anything, then run on
real inputs (other batch sizes for symbolic) equals torch 2.13's loss and gradients."""
import numpy as np
import pytest

import ember
from ember.fx.experimental.proxy_tensor import make_fx

torch = pytest.importorskip("torch")


def _mlp(t):
    t.manual_seed(0)
    return t.nn.Sequential(t.nn.Linear(8, 16), t.nn.GELU(), t.nn.Linear(16, 4))


def _attn(t):
    class Attn(t.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = t.nn.LayerNorm(8)
            self.qkv = t.nn.Linear(8, 24)
            self.out = t.nn.Linear(8, 4)

        def forward(self, x):                        # (B, T, C)
            b, n, c = x.shape
            q, k, v = self.qkv(self.ln(x)).split(c, dim=2)
            att = (q @ k.transpose(1, 2) / c ** 0.5).softmax(-1)
            return self.out((att @ v).reshape(b, n, c)).mean(1)
    t.manual_seed(0)
    return Attn()


MODELS = {"mlp": (_mlp, (8,)), "attn": (_attn, (3, 8))}


def _copy(em, tm):
    with torch.no_grad():
        for n, p in tm.state_dict().items():
            em.state_dict()[n].copy_(ember.tensor(p.numpy()))


def _step(t, model, style):
    params = list(model.parameters())

    def step(x, y):
        loss = ((model(x) - y) ** 2).mean()
        if style == "grad":
            return [loss, *t.autograd.grad(loss, params)]
        for p in params:
            p.grad = None
        loss.backward()
        return [loss] + [p.grad for p in params]
    return step


@pytest.mark.parametrize("style", ["grad", "backward"])
@pytest.mark.parametrize("mode", ["fake", "symbolic"])
@pytest.mark.parametrize("name", MODELS)
def test_joint_graph_equals_torch(name, mode, style):
    make, shape = MODELS[name]
    em, tm = make(ember), make(torch)
    _copy(em, tm)
    gm = make_fx(_step(ember, em, style), tracing_mode=mode)(ember.randn(5, *shape),
                                                             ember.randn(5, 4))
    targets = {getattr(n.target, "name", "") for n in gm.graph.nodes if n.op == "call_function"}
    assert any("backward" in t for t in targets) or "mm" in targets   # the vjps are in it
    rng = np.random.default_rng(1)
    for b in ((5,) if mode == "fake" else (3, 7)):
        x = rng.standard_normal((b, *shape)).astype("float32")
        y = rng.standard_normal((b, 4)).astype("float32")
        got = gm(ember.tensor(x), ember.tensor(y))
        want = _step(torch, tm, style)(torch.tensor(x), torch.tensor(y))
        assert len(got) == len(want) == 1 + len(list(tm.parameters()))
        for g, w in zip(got, want):
            assert tuple(g.shape) == tuple(w.shape)
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-4,
                                       atol=1e-5)


def test_symbolic_joint_graph_computes_sizes_from_inputs():
    em = _attn(ember)
    gm = make_fx(_step(ember, em, "grad"), tracing_mode="symbolic")(ember.randn(5, 3, 8),
                                                                   ember.randn(5, 4))
    assert "sym_size" in gm.code          # the sizes are read from the inputs, not constants
    out = gm(ember.randn(2, 6, 8), ember.randn(2, 4))
    assert tuple(out[0].shape) == ()
