"""backend="inductor" on graphs with symbolic sizes: one wrapper (and one set of kernels) serves
every size of a dynamic dim, its sizes read from the inputs at each call (inference graphs and
AOT autograd's forward and backward graphs, which use sizes as values); values and gradients
equal eager."""
import numpy as np
import pytest
from inductor_helpers import Recorder

import ember
import ember._dynamo as dynamo
import ember.nn as nn
import ember.nn.functional as F


@pytest.fixture(autouse=True)
def _reset():
    dynamo.reset()
    yield
    dynamo.reset()


FNS = [
    lambda x, y: (ember.softmax(x * 2, -1) + x.mean()) * y.sum(),
    lambda x, y: ember.nn.functional.layer_norm(x, (16,)).relu() + y[:, None],
    lambda x, y: (x.t() @ x).tanh() + y.sum(),
    lambda x, y: ember.logsumexp(x, 0) * 2 + y.amax(),
]


@pytest.mark.parametrize("fn", FNS)
@pytest.mark.parametrize("how", ["automatic", "dynamic_true", "mark_dynamic"])
def test_one_wrapper_for_every_size(fn, how):
    rec = Recorder()
    f = ember.compile(fn, backend=rec, dynamic=True if how == "dynamic_true" else None)
    wrappers = []
    for b in (3, 4, 5, 6, 9):
        x, y = ember.randn(b, 16), ember.randn(b)
        if how == "mark_dynamic":
            dynamo.mark_dynamic(x, 0)
            dynamo.mark_dynamic(y, 0)
        with ember.no_grad():
            out = f(x, y)
        np.testing.assert_allclose(out.numpy(), fn(x, y).numpy(), rtol=1e-5, atol=1e-5)
        wrappers.append(rec.graphs[-1].last.wrapper_src)
    sym = rec.graphs[-1]
    # automatic dynamic: size 3 compiles a static graph, size 4 the symbolic one, then no more
    first = 1 if how == "automatic" else 0
    assert len(rec.graphs) == first + 1
    assert sym.n_compiles == 1 and len(sym.variants) == 0 and len(sym.sym_variants) == 1
    assert len(set(wrappers[first:])) == 1
    assert "_KSA(" in wrappers[-1] and "s0 = in" in wrappers[-1]


def test_static_dims_still_checked_and_noncontiguous_inputs_specialize():
    rec = Recorder()
    fn = lambda x: (x * 2).sum(0)   # noqa: E731
    f = ember.compile(fn, backend=rec, dynamic=True)
    for b in (3, 5):
        x = ember.randn(b, 6)
        np.testing.assert_allclose(f(x).numpy(), fn(x).numpy(), rtol=1e-5, atol=1e-6)
    x = ember.randn(6, 7).t()   # non-contiguous: a per-layout wrapper, still correct
    np.testing.assert_allclose(f(x).numpy(), fn(x).numpy(), rtol=1e-5, atol=1e-6)
    assert rec.graphs[-1].n_compiles >= 1


def test_training_step_forward_and_backward_one_wrapper_each():
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))

    def step(x, y):
        loss = F.mse_loss(m(x), y)
        loss.backward()
        return loss
    rec = Recorder()
    f = ember.compile(step, backend=rec, dynamic=True)
    for b in (3, 4, 5, 7):
        x, y = ember.randn(b, 8), ember.randn(b, 4)
        loss = f(x, y).item()
        grads = [p.grad.clone() for p in m.parameters()]
        m.zero_grad(set_to_none=True)
        ref = step(x, y).item()
        np.testing.assert_allclose(loss, ref, rtol=1e-5)
        for g, p in zip(grads, m.parameters()):
            np.testing.assert_allclose(g.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-5)
        m.zero_grad(set_to_none=True)
    assert len(rec.graphs) == 2   # forward, backward
    assert [(g.n_compiles, len(g.variants)) for g in rec.graphs] == [(1, 0), (1, 0)]
