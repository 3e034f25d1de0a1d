"""backend="inductor" on graphs that mutate their inputs (functionalized by AOT autograd: the new
values are computed by generated kernels and copied into the inputs at the end): optimizer steps
(SGD with momentum, Adam, AdamW) and BatchNorm in train mode equal eager over several steps
(losses, parameters, optimizer state, running statistics), with their kernel counts."""
import numpy as np
import pytest
from inductor_helpers import Recorder

import ember
import ember._dynamo as dynamo
import ember.nn as nn
import ember.nn.functional as F

OPTS = {
    "sgd_momentum": lambda p: ember.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01),
    "adam": lambda p: ember.optim.Adam(p, lr=0.01),
    "adamw": lambda p: ember.optim.AdamW(p, lr=0.01, weight_decay=0.1),
}


@pytest.fixture(autouse=True)
def _reset():
    dynamo.reset()
    yield
    dynamo.reset()


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_input_mutation_compiles_to_one_kernel_and_a_write_back():
    def f(x, buf):
        buf.add_(1)
        return x * buf
    x, b1, b2 = ember.randn(3), ember.zeros(3), ember.zeros(3)
    rec = Recorder()
    cf = ember.compile(f, backend=rec)
    for _ in range(3):
        _close(cf(x, b1).numpy(), f(x, b2).numpy())
        _close(b1.numpy(), b2.numpy())
    assert rec.counts() == [(1, 0)]
    assert "_wb(in" in rec.graphs[0].last.wrapper_src


def test_sgd_momentum_update_of_one_parameter_is_one_kernel():
    w = ember.randn(4, 3, requires_grad=True)
    w2 = w.detach().clone().requires_grad_(True)
    o1 = ember.optim.SGD([w], lr=0.1, momentum=0.9, weight_decay=0.01)
    o2 = ember.optim.SGD([w2], lr=0.1, momentum=0.9, weight_decay=0.01)
    rec = Recorder()
    step = ember.compile(o1.step, backend=rec)
    for _ in range(4):
        g = ember.randn(4, 3)
        w.grad, w2.grad = g.clone(), g.clone()
        step()
        o2.step()
        _close(w.detach().numpy(), w2.detach().numpy())
        _close(o1.state[w]["momentum_buffer"].numpy(), o2.state[w2]["momentum_buffer"].numpy())
    assert rec.counts() == [(1, 0)]   # buf = m * buf + (g + wd * w); w -= lr * buf


def _model():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def _train_step(m, opt, x, y):
    opt.zero_grad()
    loss = F.mse_loss(m(x), y)
    loss.backward()
    opt.step()
    return loss


@pytest.mark.parametrize("opt_name", list(OPTS))
def test_compiled_train_step_equals_eager(opt_name):
    m1, m2 = _model(), _model()
    o1, o2 = OPTS[opt_name](m1.parameters()), OPTS[opt_name](m2.parameters())
    rec = Recorder()
    step = ember.compile(_train_step, backend=rec)
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = ember.tensor(rng.standard_normal((6, 4)).astype(np.float32))
        y = ember.tensor(rng.standard_normal((6, 2)).astype(np.float32))
        _close(step(m1, o1, x, y).item(), _train_step(m2, o2, x, y).item())
    for p, q in zip(m1.parameters(), m2.parameters()):
        _close(p.detach().numpy(), q.detach().numpy())
        for k, v in o2.state[q].items():
            _close(ember.as_tensor(o1.state[p][k]).numpy(), ember.as_tensor(v).numpy())
    # the optimizer's graph (the last one compiled) ran through kernels, no extern call
    assert rec.counts() and rec.counts()[-1][0] >= 1 and rec.counts()[-1][1] == 0


@pytest.mark.parametrize("grad", [True, False])
def test_batchnorm_train_running_stats_equal_eager(grad):
    ember.manual_seed(0)
    b1, b2 = nn.BatchNorm1d(5), nn.BatchNorm1d(5)
    b1.train(), b2.train()
    rec = Recorder()
    f = ember.compile(lambda x: b1(x).relu().sum() if grad else b1(x), backend=rec)
    ref = (lambda x: b2(x).relu().sum()) if grad else b2
    for i in range(3):
        x = ember.randn(8, 5) * (i + 1) + i
        xa, xb = x.clone().requires_grad_(grad), x.clone().requires_grad_(grad)
        if grad:
            f(xa).backward()
            ref(xb).backward()
            _close(xa.grad.numpy(), xb.grad.numpy())
        else:
            with ember.no_grad():
                _close(f(xa).numpy(), ref(xb).numpy())
        _close(b1.running_mean.numpy(), b2.running_mean.numpy())
        _close(b1.running_var.numpy(), b2.running_var.numpy())
        assert int(b1.num_batches_tracked) == int(b2.num_batches_tracked) == i + 1
    assert rec.counts() and all(k >= 1 for k, _ in rec.counts())
