"""Autocast's per-op policy and GradScaler, compared with PyTorch on CPU."""
import numpy as np
import pytest
from harness import torch

import ember


@pytest.mark.parametrize("expr,want", [
    ("a @ b", "bfloat16"),
    ("t.mm(a, b)", "bfloat16"),
    ("a + 1", "float32"),
    ("(a @ b).float().sum()", "float32"),
    ("t.nn.functional.linear(a, b.t())", "bfloat16"),
    ("t.nn.functional.mse_loss((a @ b), t.zeros(2, 4))", "float32"),
    ("t.cat([a @ b, t.ones(2, 4)])", "float32"),
])
def test_cpu_autocast_policy(expr, want):
    for t in (torch, ember):
        a, b = t.ones(2, 3), t.ones(3, 4)
        with t.autocast("cpu", dtype=t.bfloat16):
            r = eval(expr, {"t": t, "a": a, "b": b})
        assert str(r.dtype).split(".")[-1] == want, (t.__name__, expr, r.dtype)


def test_autocast_disabled_and_nested():
    a = ember.ones(2, 2)
    with ember.autocast("cpu"):
        with ember.autocast("cpu", enabled=False):
            assert (a @ a).dtype == ember.float32
        assert (a @ a).dtype == ember.bfloat16
    assert (a @ a).dtype == ember.float32


def test_autocast_grads_reach_fp32_params():
    w = ember.ones(3, 4, requires_grad=True)
    x = ember.ones(2, 3)
    with ember.autocast("cpu"):
        y = (x @ w).float().sum()
    y.backward()
    assert w.grad.dtype == ember.float32
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 4), 2.0))


def _scaler_run(t, grads):
    p = t.nn.Parameter(t.ones(3))
    opt = t.optim.SGD([p], lr=0.1)
    s = t.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    scales = []
    for g in grads:
        opt.zero_grad()
        loss = (p * t.tensor(g)).sum()
        s.scale(loss).backward()
        s.step(opt)
        s.update()
        scales.append(s.get_scale())
    return p.detach().numpy().copy(), scales


def test_grad_scaler_matches_torch():
    grads = [[1.0, 2.0, 3.0], [float("inf"), 0.0, 1.0], [0.5, 0.5, 0.5], [1.0, 1.0, 1.0],
             [float("nan"), 1.0, 1.0], [2.0, 0.0, -1.0]]
    ep, es = _scaler_run(ember, grads)
    tp, ts = _scaler_run(torch, grads)
    assert es == ts
    np.testing.assert_allclose(ep, tp, rtol=1e-6)


def test_grad_scaler_state_dict_and_errors():
    s = ember.amp.GradScaler("cpu", init_scale=16.0)
    sd = s.state_dict()
    assert sd["scale"] == 16.0 and sd["growth_interval"] == 2000
    s2 = ember.amp.GradScaler("cpu")
    s2.load_state_dict(sd)
    assert s2.get_scale() == 16.0
    with pytest.raises(ValueError):
        ember.amp.GradScaler("cpu", growth_factor=0.5)
