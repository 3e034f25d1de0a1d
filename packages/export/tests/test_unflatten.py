"""ember.export.unflatten against torch.export.unflatten (2.13): the same module tree, parameter
and buffer names, outputs equal to the original module's, for the whole program and for each
rebuilt submodule called alone; a dynamic batch dim keeps working."""
import numpy as np
import pytest

import ember
import ember.export as E

torch = pytest.importorskip("torch")


def _net(t):
    class Block(t.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = t.nn.Linear(4, 4)
            self.norm = t.nn.LayerNorm(4)

        def forward(self, x):
            b, d = x.shape
            return x + self.lin(self.norm(x)).relu().view(b, d)

    class Net(t.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = t.nn.ModuleList([Block(), Block()])
            self.head = t.nn.Sequential(t.nn.Linear(4, 2), t.nn.Tanh())
            self.register_buffer("scale", t.ones(2) * 3)

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return {"y": self.head(x) * self.scale, "h": x}
    t.manual_seed(0)
    return Net()


def _names(m, what):
    return sorted(n for n, _ in getattr(m, what)())


@pytest.mark.parametrize("dynamic", [False, True])
def test_unflatten_rebuilds_the_module_tree(dynamic):
    tm, em = _net(torch), _net(ember)
    with torch.no_grad():
        for n, p in tm.state_dict().items():
            em.state_dict()[n].copy_(ember.tensor(p.numpy()))
    kw = {}
    if dynamic:
        kw = {"dynamic_shapes": ({0: torch.export.Dim("b")},)}
    tu = torch.export.unflatten(torch.export.export(tm, (torch.randn(3, 4),), **kw))
    if dynamic:
        kw = {"dynamic_shapes": ({0: E.Dim("b")},)}
    u = E.unflatten(E.export(em, (ember.randn(3, 4),), **kw))
    assert isinstance(u, E.UnflattenedModule)
    for what in ("named_modules", "named_parameters", "named_buffers"):
        assert _names(u, what) == _names(tu, what)
    assert type(u.get_submodule("blocks.0")).__name__ == "InterpreterModule"
    assert "call_module" in str(u.graph) and "call_module" in str(
        u.get_submodule("blocks.0").graph)
    rng = np.random.default_rng(0)
    for b in ((3, 6) if dynamic else (3,)):
        x = rng.standard_normal((b, 4)).astype("float32")
        got, want = u(ember.tensor(x)), tm(torch.tensor(x))
        assert set(got) == {"y", "h"}
        for k in got:
            np.testing.assert_allclose(got[k].detach().numpy(), want[k].detach().numpy(),
                                       rtol=1e-5, atol=1e-6)
        for fqn in ("blocks.1", "blocks.0.norm", "head"):   # a rebuilt submodule alone
            np.testing.assert_allclose(
                u.get_submodule(fqn)(ember.tensor(x)).detach().numpy(),
                tm.get_submodule(fqn)(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_unflatten_keeps_state_shared_and_writes_buffers():
    m = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4)).train()
    u = E.unflatten(E.export(m, (ember.randn(5, 3),)))
    assert _names(u, "named_buffers") == _names(m, "named_buffers")
    before = u.get_submodule("1").running_mean.clone()
    x = ember.randn(6, 3)
    ref = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4)).train()
    ref.load_state_dict(m.state_dict())
    np.testing.assert_allclose(u(x).detach().numpy(), ref(x).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    after = u.get_submodule("1").running_mean
    assert not np.allclose(after.numpy(), before.numpy())
    np.testing.assert_allclose(after.numpy(), ref[1].running_mean.numpy(), rtol=1e-6)
