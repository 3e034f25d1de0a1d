"""ember.export of programs with ember.cond / map against torch.export (2.13): the graph holds
one higher-order node per call with its subgraphs as attributes, a predicate on a dynamic dim
stays symbolic, and `.module()` (also after run_decompositions) takes either branch."""
import numpy as np
import pytest

import ember
import ember.export as E

torch = pytest.importorskip("torch")


def _model(t):
    class M(t.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = t.nn.Linear(3, 3)

        def forward(self, x):
            def big(x):
                return self.lin(x).relu()

            def small(x):
                return x * 2 - 1
            y = t.cond(x.shape[0] > 4, big, small, (x,))
            return t.cond(y.sum() > 0, lambda y: y + 1, lambda y: y - 1, (y,))
    t.manual_seed(0)
    return M()


def _pair():
    tm, em = _model(torch), _model(ember)
    with torch.no_grad():
        for n, p in tm.state_dict().items():
            em.state_dict()[n].copy_(ember.tensor(p.numpy()))
    return tm, em


_TORCH_EPS: dict = {}


def _torch_ep(tm, dynamic: bool):
    """torch's program of tm (exported once per test session: torch.cond runs through dynamo,
    slow to warm up)."""
    key = (id(tm), dynamic)
    if key not in _TORCH_EPS:
        kw = {"dynamic_shapes": ({0: torch.export.Dim("b")},)} if dynamic else {}
        _TORCH_EPS[key] = (tm, torch.export.export(tm, (torch.ones(5, 3),), **kw))
    return _TORCH_EPS[key][1]


_PAIR: list = []


def _shared_pair():
    if not _PAIR:
        _PAIR.append(_pair())
    return _PAIR[0]


def _hops(gm):
    return [getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes
            if n.op == "call_function" and "higher_order" in repr(n.target)]


def _attrs(gm):
    return sorted(n.target for n in gm.graph.nodes if n.op == "get_attr")


@pytest.mark.parametrize("decompose", [False, True])
def test_export_cond_with_a_dynamic_dim(decompose):
    tm, em = _shared_pair()
    tep = _torch_ep(tm, True)
    ep = E.export(em, (ember.ones(5, 3),), dynamic_shapes=({0: E.Dim("b")},))
    if decompose:
        ep = ep.run_decompositions()
    assert _hops(ep.graph_module) == ["cond", "cond"] and len(_hops(tep.graph_module)) == 2
    assert _attrs(ep.graph_module) == _attrs(tep.graph_module)
    assert [(s.kind.name, s.target) for s in ep.graph_signature.input_specs] == \
        [(s.kind.name, s.target) for s in tep.graph_signature.input_specs]
    assert " > 4" in ep.graph_module.code      # the predicate on the batch size, not a constant
    mod, tmod = ep.module(), tep.module()
    rng = np.random.default_rng(0)
    for b in (3, 5, 8):
        for sign in (1.0, -1.0):
            x = (np.abs(rng.standard_normal((b, 3))) * sign).astype("float32")
            want = tmod(torch.tensor(x)).detach().numpy()
            np.testing.assert_allclose(mod(ember.tensor(x)).detach().numpy(), want,
                                       rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(tm(torch.tensor(x)).detach().numpy(), want, rtol=1e-5)


def test_export_map():
    from ember._higher_order_ops.map import map as emap

    class M(ember.nn.Module):
        def forward(self, xs, y):
            return emap(lambda x, y: x.sin() * y, xs, y)
    xs, y = ember.randn(4, 3), ember.randn(3)
    ep = E.export(M(), (xs, y))
    assert _hops(ep.graph_module) == ["map_impl"] and _attrs(ep.graph_module) == ["body_graph_0"]
    xs2 = ember.randn(4, 3)
    np.testing.assert_allclose(ep.module()(xs2, y).numpy(), (xs2.sin() * y).numpy(), rtol=1e-6)


def test_map_archives_round_trip_with_torch(tmp_path):
    from torch._higher_order_ops.map import map as tmap

    from ember._higher_order_ops.map import map as emap

    def make(t, m):
        class M(t.nn.Module):
            def forward(self, xs, y):
                return m(lambda x, y: x.sin() * y, xs, y)
        return M()
    rng = np.random.default_rng(2)
    xs, y = rng.standard_normal((4, 3)).astype("float32"), rng.standard_normal(3).astype("float32")
    E.save(E.export(make(ember, emap), (ember.tensor(xs), ember.tensor(y))),
           str(tmp_path / "e.pt2"))
    torch.export.save(torch.export.export(make(torch, tmap), (torch.tensor(xs), torch.tensor(y))),
                      str(tmp_path / "t.pt2"))
    xs2 = rng.standard_normal((4, 3)).astype("float32")
    want = np.sin(xs2) * y
    got = [torch.export.load(str(tmp_path / "e.pt2")).module()(torch.tensor(xs2), torch.tensor(y)),
           E.load(str(tmp_path / "t.pt2")).module()(ember.tensor(xs2), ember.tensor(y)),
           E.load(str(tmp_path / "e.pt2")).module()(ember.tensor(xs2), ember.tensor(y))]
    for g in got:
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dynamic", [False, True])
def test_cond_archives_round_trip_with_torch(dynamic, tmp_path):
    """cond nodes in PT2 archives as torch writes them (branches as `as_graph` arguments,
    a symbolic predicate as a SymBool): ember's read by torch.export.load, torch's by ember."""
    tm, em = _shared_pair()
    kw_e = {"dynamic_shapes": ({0: E.Dim("b")},)} if dynamic else {}
    E.save(E.export(em, (ember.ones(5, 3),), **kw_e), str(tmp_path / "e.pt2"))
    torch.export.save(_torch_ep(tm, dynamic), str(tmp_path / "t.pt2"))
    from_ember = torch.export.load(str(tmp_path / "e.pt2"))
    assert len(_hops(from_ember.graph_module)) == (2 if dynamic else 1)
    from_torch, back = E.load(str(tmp_path / "t.pt2")), E.load(str(tmp_path / "e.pt2"))
    assert len(_hops(from_torch.graph_module)) == (2 if dynamic else 1)  # (5 > 4: static)
    rng = np.random.default_rng(1)
    for b in ((3, 5, 8) if dynamic else (5,)):
        for sign in (1.0, -1.0):
            x = (np.abs(rng.standard_normal((b, 3))) * sign).astype("float32")
            want = tm(torch.tensor(x)).detach().numpy()
            got = [from_ember.module()(torch.tensor(x)), from_torch.module()(ember.tensor(x)),
                   back.module()(ember.tensor(x))]
            for g in got:
                np.testing.assert_allclose(g.detach().numpy(), want, rtol=1e-5, atol=1e-6)
