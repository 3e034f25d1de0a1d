"""ember.compile of optimizer steps: a compiled train step (forward, backward, `opt.step()`) and
a compiled `opt.step` alone give PyTorch's eager parameters over several steps (SGD with
momentum, Adam, AdamW); after the first step (which creates the state) the whole update is one
graph without breaks; attribute stores on the optimizer are replayed each call."""
import numpy as np
import pytest
from compile_helpers import _reset  # noqa: F401  (_reset: autouse)

import ember
import ember._dynamo as dynamo
import ember.nn as nn
import ember.nn.functional as F

torch = pytest.importorskip("torch")

OPTS = {
    "sgd_momentum": (lambda m, p: m.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01)),
    "sgd_nesterov": (lambda m, p: m.SGD(p, lr=0.05, momentum=0.8, nesterov=True)),
    "adam": (lambda m, p: m.Adam(p, lr=0.01)),
    "adamw": (lambda m, p: m.AdamW(p, lr=0.01, weight_decay=0.1)),
}


def _models():
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    t = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    with torch.no_grad():
        for p, q in zip(t.parameters(), m.parameters()):
            p.copy_(torch.tensor(q.detach().numpy()))
    return m, t


def _data(n=5):
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((6, 4)).astype(np.float32),
             rng.standard_normal((6, 2)).astype(np.float32)) for _ in range(n)]


def _torch_run(t, opt_name, data):
    opt = OPTS[opt_name](torch.optim, t.parameters())
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(t(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _step(m, opt, x, y):
    opt.zero_grad()
    loss = F.mse_loss(m(x), y)
    loss.backward()
    opt.step()
    return loss


def _check(m, t, losses, tlosses):
    np.testing.assert_allclose(losses, tlosses, rtol=1e-5, atol=1e-6)
    for p, q in zip(m.parameters(), t.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("opt_name", list(OPTS))
def test_compiled_train_step_equals_torch_eager(opt_name, backend):
    m, t = _models()
    opt = OPTS[opt_name](ember.optim, m.parameters())
    step = ember.compile(_step, backend=backend)
    data = _data()
    losses = [step(m, opt, ember.tensor(x), ember.tensor(y)).item() for x, y in data]
    _check(m, t, losses, _torch_run(t, opt_name, data))


@pytest.mark.parametrize("opt_name", list(OPTS))
def test_compiled_opt_step_equals_torch_eager(opt_name):
    m, t = _models()
    opt = OPTS[opt_name](ember.optim, m.parameters())
    cstep = ember.compile(opt.step, backend="aot_eager")
    data = _data()
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = F.mse_loss(m(ember.tensor(x)), ember.tensor(y))
        loss.backward()
        cstep()
        losses.append(loss.item())
    _check(m, t, losses, _torch_run(t, opt_name, data))


@pytest.mark.parametrize("opt_name", ["sgd_momentum", "adam"])
def test_opt_step_is_one_graph_after_state_exists(opt_name):
    m, _ = _models()
    opt = OPTS[opt_name](ember.optim, m.parameters())
    for _ in range(2):
        F.mse_loss(m(ember.randn(6, 4)), ember.randn(6, 2)).backward()
        opt.step()
    e = dynamo.explain(opt.step)()
    assert (e.graph_count, e.graph_break_count) == (1, 0)
    # the graph updates parameters and state in place: 4 parameters, no per-step recompile
    be_graphs = []

    def counting(gm, ex):
        be_graphs.append(gm)
        return gm
    cstep = ember.compile(opt.step, backend=counting)
    for _ in range(4):
        F.mse_loss(m(ember.randn(6, 4)), ember.randn(6, 2)).backward()
        cstep()
    assert len(be_graphs) == 1
    assert opt._opt_called is True


def test_attribute_store_replayed_each_call():
    class Box:
        pass
    b = Box()
    b.n = 0

    def f(box, x):
        box.flag = "seen"
        box.last = 3
        return x * box.last
    be_graphs = []

    def counting(gm, ex):
        be_graphs.append(gm)
        return gm
    cf = ember.compile(f, backend=counting)
    x = ember.ones(2)
    assert cf(b, x).tolist() == [3.0, 3.0]
    del b.flag
    cf(b, x)
    assert b.flag == "seen" and len(be_graphs) == 1


def test_first_step_runs_eagerly_then_one_graph():
    m, _ = _models()
    opt = ember.optim.Adam(m.parameters(), lr=0.1)
    graphs = []

    def counting(gm, ex):
        graphs.append(gm)
        return gm
    cstep = ember.compile(opt.step, backend=counting)
    for i in range(4):
        F.mse_loss(m(ember.randn(6, 4)), ember.randn(6, 2)).backward()
        cstep()
        assert len(graphs) == (0 if i == 0 else 1)   # the state is made eagerly at step 1
    assert len(opt.state) == 4 and float(opt.state[m[0].weight]["step"]) == 4.0
