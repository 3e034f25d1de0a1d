"""Adam/AdamW's C++ fused CPU step: bitwise equal to the numpy fused step, close to PyTorch."""
import numpy as np
import pytest
import torch

import ember
from ember.optim import _cpu_fused
from ember.optim import adam as A

CASES = [(0.01, True, False), (0.1, False, True), (0.0, False, False)]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("wd,decoupled,maximize", CASES)
def test_cpp_step_equals_numpy_step(dt, wd, decoupled, maximize, monkeypatch):
    rng = np.random.default_rng(0)
    arrs = [rng.standard_normal(70000).astype(dt) for _ in range(4)]
    arrs[3] = np.abs(arrs[3])
    cpp = [ember.tensor(x.copy()) for x in arrs]
    ref = [ember.tensor(x.copy()) for x in arrs]
    hyper = (3, 1e-3, 0.9, 0.999, 1e-8, wd, decoupled, maximize)
    assert _cpu_fused.adam(*(t._np.copy() for t in cpp), *hyper) or not \
        ember._ops._cpujit.available()
    A._adam_fused(*cpp, *hyper)
    monkeypatch.setattr(_cpu_fused, "adam", lambda *a: False)
    A._adam_fused(*ref, *hyper)
    for a, b in zip(cpp, ref):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
def test_steps_match_torch(cls):
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((300, 200)).astype(np.float32)
    grads = [rng.standard_normal((300, 200)).astype(np.float32) for _ in range(4)]
    pe, pt = ember.tensor(w0.copy(), requires_grad=True), torch.tensor(w0.copy(),
                                                                       requires_grad=True)
    oe = getattr(ember.optim, cls)([pe], lr=1e-2, weight_decay=0.05)
    ot = getattr(torch.optim, cls)([pt], lr=1e-2, weight_decay=0.05)
    for g in grads:
        pe.grad, pt.grad = ember.tensor(g), torch.tensor(g)
        oe.step()
        ot.step()
    np.testing.assert_allclose(pe.detach().numpy(), pt.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_non_contiguous_falls_back():
    x = np.zeros((4, 4), np.float32)[:, ::2]
    assert not _cpu_fused.adam(x, x, x, x, 1, 1e-3, 0.9, 0.999, 1e-8, 0.0, False, False)


SGD_CASES = [(0.0, 0.0, False, False), (0.01, 0.1, False, True), (0.05, 0.0, True, False)]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("wd,damp,nesterov,maximize", SGD_CASES)
def test_sgd_cpp_step_equals_numpy_step(dt, wd, damp, nesterov, maximize, monkeypatch):
    from ember.optim import sgd as S
    rng = np.random.default_rng(2)
    arrs = [rng.standard_normal(70000).astype(dt) for _ in range(3)]
    cpp = [ember.tensor(x.copy()) for x in arrs]
    ref = [ember.tensor(x.copy()) for x in arrs]
    hyper = (0.03, 0.9, damp, wd, nesterov, maximize)
    assert _cpu_fused.sgd(*(t._np.copy() for t in cpp), *hyper) or not \
        ember._ops._cpujit.available()
    S._sgd_fused(*cpp, *hyper)
    monkeypatch.setattr(_cpu_fused, "sgd", lambda *a: False)
    S._sgd_fused(*ref, *hyper)
    for a, b in zip(cpp, ref):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("kw", [dict(momentum=0.9), dict(momentum=0.9, nesterov=True,
                                                         weight_decay=0.01),
                                dict(momentum=0.5, dampening=0.2, maximize=True)])
def test_sgd_steps_match_torch(kw):
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((300, 200)).astype(np.float32)
    grads = [rng.standard_normal((300, 200)).astype(np.float32) for _ in range(4)]
    pe, pt = ember.tensor(w0.copy(), requires_grad=True), torch.tensor(w0.copy(),
                                                                       requires_grad=True)
    oe, ot = ember.optim.SGD([pe], lr=1e-2, **kw), torch.optim.SGD([pt], lr=1e-2, **kw)
    for g in grads:
        pe.grad, pt.grad = ember.tensor(g), torch.tensor(g)
        oe.step()
        ot.step()
    np.testing.assert_allclose(pe.detach().numpy(), pt.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_sgd_mixed_or_strided_falls_back():
    x = np.zeros((4, 4), np.float32)
    assert not _cpu_fused.sgd(x[:, ::2], x[:, ::2], x[:, ::2], 0.1, 0.9, 0.0, 0.0, False, False)
    assert not _cpu_fused.sgd(x, x.astype(np.float64), x, 0.1, 0.9, 0.0, 0.0, False, False)
