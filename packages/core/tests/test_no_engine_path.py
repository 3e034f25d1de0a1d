"""Without ember-autograd (core alone), an op on a requires_grad=True tensor records nothing and
takes the plain path (issue 11, defect 21: it took the slow path, 4x the plain op's cost; the
figure is `op_overhead_grad_no_engine_us` in benchmarks/workloads.py). The engine is absent here
as it is when the wheel is not installed: `_dispatch.autograd_hook` is None."""

import numpy as np
import pytest

import ember
from ember import _dispatch

torch = pytest.importorskip("torch")


@pytest.fixture
def no_engine(monkeypatch):
    monkeypatch.setattr(_dispatch, "autograd_hook", None)
    slow = []
    execute = _dispatch.execute

    def counted(*a, **k):
        slow.append(a[0].name)
        return execute(*a, **k)
    monkeypatch.setattr(_dispatch, "execute", counted)
    return slow


@pytest.mark.parametrize("expr", ["x * y", "x + y", "(x * 2).exp()", "y - x", "x / y"])
def test_ops_on_requires_grad_tensors_take_the_plain_path(no_engine, expr):
    a = np.random.default_rng(0).standard_normal((2, 3))
    b = np.random.default_rng(1).standard_normal((2, 3))
    x = ember.tensor(a, requires_grad=True)
    y = ember.tensor(b)
    no_engine.clear()  # making the inputs ran factories through the slow path
    r = eval(expr, {"x": x, "y": y})
    want = eval(expr, {"x": torch.tensor(a), "y": torch.tensor(b)})
    np.testing.assert_allclose(r.numpy(), want.numpy(), rtol=1e-12)
    assert r.grad_fn is None and not r.requires_grad  # nothing recorded without the engine
    assert no_engine == [], f"took the slow path for {no_engine}"


def test_plain_tensors_take_the_same_path(no_engine):
    x, y = ember.ones(3), ember.ones(3)
    no_engine.clear()
    r = x * y
    assert no_engine == [] and r.tolist() == [1.0, 1.0, 1.0]
