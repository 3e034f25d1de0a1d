"""Programs that write to buffers and inputs, exported as torch.export (2.13) does: the training
IR keeps the in-place ops; `run_decompositions()` makes them functional, returning the new
values as BUFFER_MUTATION / USER_INPUT_MUTATION outputs; `.module()` applies the writes either
way; PT2 archives of both round-trip with torch.export.save/load."""
import numpy as np
import pytest

import ember
import ember.export as E

torch = pytest.importorskip("torch")


def _counter(t):
    class Counter(t.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("rm", t.zeros(3))
            self.lin = t.nn.Linear(3, 3)

        def forward(self, x, y):
            self.rm.add_(x.mean(0))
            y.add_(1)
            return self.lin(x) + self.rm
    t.manual_seed(0)
    return Counter()


def _bn(t):
    t.manual_seed(0)
    return t.nn.Sequential(t.nn.Linear(3, 4), t.nn.BatchNorm1d(4)).train()


def _inputs(name, rng):
    if name == "counter":
        return [rng.standard_normal((2, 3)).astype("float32"), np.ones(3, "float32")]
    return [rng.standard_normal((5, 3)).astype("float32")]


MODELS = {"counter": _counter, "bn": _bn}


def _same_weights(em, tm):
    with torch.no_grad():
        for n, p in tm.state_dict().items():
            em.state_dict()[n].copy_(ember.tensor(p.numpy()))


def _pair(name):
    tm, em = MODELS[name](torch), MODELS[name](ember)
    _same_weights(em, tm)
    return tm, em


def _sig(ep):
    return [(s.kind.name, s.target) for s in ep.graph_signature.output_specs]


def _close(a, b):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def _run_both(tmod, emod, xs, calls=2):
    """Call both modules twice on copies of xs; outputs, written inputs and buffers agree."""
    for _ in range(calls):
        targs = [torch.tensor(x) for x in xs]
        eargs = [ember.tensor(x) for x in xs]
        _close(emod(*eargs), tmod(*targs))
        for a, b in zip(eargs, targs):
            _close(a, b)
        for (n, b), (m, c) in zip(sorted(emod.state_dict().items()),
                                  sorted(tmod.state_dict().items())):
            assert n == m
            _close(b, c)


@pytest.mark.parametrize("name", MODELS)
def test_signature_as_torch_before_and_after_decomposition(name):
    rng = np.random.default_rng(0)
    tm, em = _pair(name)
    xs = _inputs(name, rng)
    tep = torch.export.export(tm, tuple(torch.tensor(x) for x in xs))
    eep = E.export(em, tuple(ember.tensor(x) for x in xs))
    assert _sig(eep) == _sig(tep)      # training IR: the writes stay in place
    assert any("inplace" in n.target.tags for n in eep.graph.nodes
               if n.op == "call_function" and hasattr(n.target, "tags"))
    td, ed = tep.run_decompositions(), eep.run_decompositions()
    assert _sig(ed) == _sig(td)
    assert sorted(ed.graph_signature.buffers_to_mutate.values()) == \
        sorted(td.graph_signature.buffers_to_mutate.values())
    assert list(ed.graph_signature.user_inputs_to_mutate.values()) == \
        list(td.graph_signature.user_inputs_to_mutate.values())
    assert not any("inplace" in n.target.tags for n in ed.graph.nodes
                   if n.op == "call_function" and hasattr(n.target, "tags"))
    assert "copy_" not in ed.graph_module.code


@pytest.mark.parametrize("decomposed", [False, True])
@pytest.mark.parametrize("name", MODELS)
def test_module_applies_the_writes(name, decomposed):
    rng = np.random.default_rng(1)
    tm, em = _pair(name)
    xs = _inputs(name, rng)
    ep = E.export(em, tuple(ember.tensor(x) for x in xs))
    if decomposed:
        ep = ep.run_decompositions()
    ref = MODELS[name](torch)
    ref.load_state_dict(tm.state_dict())
    _run_both(ref, ep.module(), _inputs(name, rng))


@pytest.mark.parametrize("decomposed", [False, True])
@pytest.mark.parametrize("name", MODELS)
def test_archives_round_trip_with_torch(name, decomposed, tmp_path):
    rng = np.random.default_rng(2)
    tm, em = _pair(name)
    xs = _inputs(name, rng)
    ref = MODELS[name](torch)
    ref.load_state_dict(tm.state_dict())
    # ember -> torch
    ep = E.export(em, tuple(ember.tensor(x) for x in xs))
    ep = ep.run_decompositions() if decomposed else ep
    path = str(tmp_path / "e.pt2")
    E.save(ep, path)
    tep = torch.export.load(path)
    assert _sig(tep) == _sig(ep)
    new = _inputs(name, rng)
    t_args = [torch.tensor(x) for x in new]
    r_args = [torch.tensor(x) for x in new]
    tmod = tep.module()
    _close(tmod(*t_args), ref(*r_args))
    for a, b in zip(t_args, r_args):
        _close(a, b)
    for k, v in ref.state_dict().items():
        _close(tmod.state_dict()[k], v)
    # torch -> ember
    tep2 = torch.export.export(tm, tuple(torch.tensor(x) for x in xs))
    tep2 = tep2.run_decompositions() if decomposed else tep2
    torch.export.save(tep2, str(tmp_path / "t.pt2"))
    eep = E.load(str(tmp_path / "t.pt2"))
    assert _sig(eep) == _sig(tep2)
    ref2 = MODELS[name](torch)
    ref2.load_state_dict(tm.state_dict())
    _run_both(ref2, eep.module(), _inputs(name, rng))


def test_dynamic_batch_survives_run_decompositions():
    em = _bn(ember)
    ep = E.export(em, (ember.randn(5, 3),), dynamic_shapes=({0: E.Dim("b", max=64)},))
    d = ep.run_decompositions()
    assert [str(v) for v in d.range_constraints.values()] == \
        [str(v) for v in ep.range_constraints.values()]
    ref = _bn(ember)
    ref.load_state_dict(em.state_dict())
    mod = d.module()
    for b in (3, 9):
        x = ember.randn(b, 3)
        _close(mod(x), ref(x))
        _close(mod.state_dict()["1.running_mean"], ref.state_dict()["1.running_mean"])
    with pytest.raises(AssertionError, match="<= 64"):
        mod(ember.randn(65, 3))


def test_run_decompositions_computes_sizes_from_inputs():
    """A graph whose ops take sizes (view(2*b, ...)) re-traced: the sizes stay expressions of
    the input's symbolic size, so other batch sizes run (they were specialized before)."""
    class Fold(ember.nn.Module):
        def forward(self, x):
            b, n = x.shape
            return (x.view(b * 2, n // 2) * 3).sum(1)
    ep = E.export(Fold(), (ember.randn(5, 4),), dynamic_shapes=({0: E.Dim("b")},))
    mod = ep.run_decompositions().module()
    for b in (3, 7):
        x = ember.randn(b, 4)
        _close(mod(x), Fold()(x))
