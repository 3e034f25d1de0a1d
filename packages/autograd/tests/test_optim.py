"""ember.optim against torch.optim: 20-step trajectories, state_dict round trips, schedulers."""
import numpy as np
import pytest
from harness import torch

import ember

RNG = np.random.default_rng(0)
X = RNG.normal(size=(8, 3)).astype("float32")
Y = RNG.normal(size=(8, 2)).astype("float32")
W0 = RNG.normal(size=(2, 3)).astype("float32")
B0 = RNG.normal(size=(2,)).astype("float32")


def loss_fn(t, w, b):
    pred = (t.tensor(X).unsqueeze(1) * w).sum(-1) + b      # (8, 2)
    return ((pred - t.tensor(Y)) ** 2).mean()


def params(t):
    return [t.tensor(W0.copy(), requires_grad=True), t.tensor(B0.copy(), requires_grad=True)]


def train(t, opt, ps, steps, sched=None):
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(t, *ps)
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
    return [p.detach().numpy().copy() for p in ps]


CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.05, maximize=True)),
    ("AdamW", dict(lr=0.05)),
    ("AdamW", dict(lr=0.05, amsgrad=True, maximize=True, weight_decay=0.2)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1)),
    ("Adamax", dict(lr=0.05, weight_decay=0.1)),
    ("NAdam", dict(lr=0.05)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.05)),
    ("RAdam", dict(lr=0.05, weight_decay=0.1)),
]


@pytest.mark.parametrize("name,kw", CASES)
def test_trajectory_matches_torch(name, kw):
    ep, tp = params(ember), params(torch)
    e = train(ember, getattr(ember.optim, name)(ep, **kw), ep, 20)
    t = train(torch, getattr(torch.optim, name)(tp, **kw), tp, 20)
    for a, b in zip(e, t):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _to_torch(v):
    if isinstance(v, ember.Tensor):
        return torch.from_numpy(v.detach().numpy().copy())
    if isinstance(v, dict):
        return {k: _to_torch(x) for k, x in v.items()}
    return v


def _to_ember(v):
    if isinstance(v, torch.Tensor):
        return ember.tensor(v.detach().numpy().copy())
    if isinstance(v, dict):
        return {k: _to_ember(x) for k, x in v.items()}
    return v


def _convert(sd, f):
    return {"state": {k: f(v) for k, v in sd["state"].items()},
            "param_groups": [dict(g) for g in sd["param_groups"]]}


@pytest.mark.parametrize("name,kw", [CASES[1], CASES[4], CASES[9], CASES[10], CASES[12]])
def test_state_dict_round_trip(name, kw):
    ep = params(ember)
    eo = getattr(ember.optim, name)(ep, **kw)
    train(ember, eo, ep, 5)
    sd = eo.state_dict()
    tsd = torch.optim.SGD([torch.zeros(1, requires_grad=True)]).state_dict()
    assert set(sd) == set(tsd)
    # ember -> torch: torch continues where ember stopped
    tp = [torch.tensor(p.detach().numpy().copy(), requires_grad=True) for p in ep]
    to = getattr(torch.optim, name)(tp, **kw)
    to.load_state_dict(_convert(sd, _to_torch))
    assert to.state_dict()["param_groups"] == sd["param_groups"]
    e = train(ember, eo, ep, 5)
    t = train(torch, to, tp, 5)
    for a, b in zip(e, t):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # torch -> ember
    ep2 = [ember.tensor(p.detach().numpy().copy(), requires_grad=True) for p in tp]
    eo2 = getattr(ember.optim, name)(ep2, **kw)
    eo2.load_state_dict(_convert(to.state_dict(), _to_ember))
    assert sorted(eo2.state_dict()["state"][0]) == sorted(to.state_dict()["state"][0])
    e = train(ember, eo2, ep2, 5)
    t = train(torch, to, tp, 5)
    for a, b in zip(e, t):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_optimizer_api():
    w, b = params(ember)
    opt = ember.optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    calls = []
    h = opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
    loss_fn(ember, w, b).backward()
    opt.step()
    h.remove()
    opt.step()
    assert calls == ["pre", "post", "post"]
    opt.zero_grad(set_to_none=False)
    assert w.grad.tolist() == [[0.0] * 3] * 2
    opt.zero_grad()
    assert w.grad is None
    with pytest.raises(ValueError, match="some parameters appear in more than one"):
        opt.add_param_group({"params": [w]})
    with pytest.raises(ValueError, match="empty parameter list"):
        ember.optim.Adam([])
    extra = ember.zeros(2, requires_grad=True)
    opt.add_param_group({"params": extra})
    assert opt.param_groups[2]["momentum"] == 0.9
    assert opt.step(lambda: 3.0) == 3.0


SCHEDS = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.5)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=0.001)),
    ("LambdaLR", dict(lr_lambda=lambda e: 1 / (e + 1))),
    ("LinearLR", dict(start_factor=0.2, total_iters=6)),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=25)),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=25, three_phase=True, anneal_strategy="linear")),
    ("CosineAnnealingWarmRestarts", dict(T_0=4, T_mult=2, eta_min=0.01)),
]


def _lr_trace(t, name, kw, opt_name="SGD", opt_kw=None):
    p = t.zeros(2, requires_grad=True)
    opt_kw = dict(momentum=0.9) if opt_kw is None else opt_kw
    opt = getattr(t.optim, opt_name)([p], lr=0.1, **opt_kw)
    s = getattr(t.optim.lr_scheduler, name)(opt, **kw)
    trace = []
    for _ in range(20):
        opt.step()
        s.step()
        g = opt.param_groups[0]
        trace.append((s.get_last_lr()[0], g.get("momentum"), g.get("betas")))
    return trace


@pytest.mark.parametrize("name,kw", SCHEDS)
def test_schedulers_match_torch(name, kw):
    e, t = _lr_trace(ember, name, kw), _lr_trace(torch, name, kw)
    np.testing.assert_allclose([x[0] for x in e], [x[0] for x in t], rtol=1e-12)
    assert [x[1] for x in e] == pytest.approx([x[1] for x in t])


def test_onecycle_adam_betas():
    kw = dict(max_lr=0.5, total_steps=25)
    e = _lr_trace(ember, "OneCycleLR", kw, "Adam", {})
    t = _lr_trace(torch, "OneCycleLR", kw, "Adam", {})
    assert [x[2][0] for x in e] == pytest.approx([x[2][0] for x in t])


def test_sequential_and_plateau():
    def seq(t):
        p = t.zeros(2, requires_grad=True)
        opt = t.optim.SGD([p], lr=0.1)
        s1 = t.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=3)
        s2 = t.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
        s = t.optim.lr_scheduler.SequentialLR(opt, [s1, s2], milestones=[3])
        out = []
        for _ in range(10):
            opt.step()
            s.step()
            out.append(opt.param_groups[0]["lr"])
        return out
    np.testing.assert_allclose(seq(ember), seq(torch), rtol=1e-12)

    def plateau(t):
        p = t.zeros(2, requires_grad=True)
        opt = t.optim.SGD([p], lr=0.1)
        s = t.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=2, factor=0.5, cooldown=1)
        out = []
        for m in [1.0, 0.9, 0.95, 0.96, 0.97, 0.98, 0.5, 0.6, 0.7, 0.8, 0.9, 0.9]:
            s.step(m)
            out.append(opt.param_groups[0]["lr"])
        return out
    assert plateau(ember) == pytest.approx(plateau(torch))
