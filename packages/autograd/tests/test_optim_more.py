"""Adadelta, ASGD, Rprop, LBFGS, SparseAdam and swa_utils against torch.optim: trajectories from
the same start with the same loss, state_dict round trips, errors."""
import numpy as np
import pytest
from harness import torch
from test_optim import _convert, _to_ember, _to_torch, loss_fn, params, train

import ember

CASES = [
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True)),
    ("ASGD", dict(lr=0.05)),
    ("ASGD", dict(lr=0.05, lambd=1e-2, alpha=0.5, t0=5, weight_decay=0.1)),
    ("Rprop", dict(lr=0.01)),
    ("Rprop", dict(lr=0.02, etas=(0.3, 1.5), step_sizes=(1e-4, 0.05), maximize=True)),
]


@pytest.mark.parametrize("name,kw", CASES)
def test_trajectory_matches_torch(name, kw):
    ep, tp = params(ember), params(torch)
    eo, to = getattr(ember.optim, name)(ep, **kw), getattr(torch.optim, name)(tp, **kw)
    e, t = train(ember, eo, ep, 25), train(torch, to, tp, 25)
    for a, b in zip(e, t):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for k, v in to.state_dict()["state"][0].items():
        got = eo.state_dict()["state"][0][k]
        want = v.numpy() if isinstance(v, torch.Tensor) else v
        np.testing.assert_allclose(np.asarray(got.numpy() if isinstance(got, ember.Tensor)
                                              else got), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,kw", [CASES[1], CASES[3], CASES[5]])
def test_state_dict_round_trip(name, kw):
    ep = params(ember)
    eo = getattr(ember.optim, name)(ep, **kw)
    train(ember, eo, ep, 7)
    tp = [torch.tensor(p.detach().numpy().copy(), requires_grad=True) for p in ep]
    to = getattr(torch.optim, name)(tp, **kw)
    to.load_state_dict(_convert(eo.state_dict(), _to_torch))
    e, t = train(ember, eo, ep, 7), train(torch, to, tp, 7)
    for a, b in zip(e, t):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    ep2 = [ember.tensor(p.detach().numpy().copy(), requires_grad=True) for p in tp]
    eo2 = getattr(ember.optim, name)(ep2, **kw)
    eo2.load_state_dict(_convert(to.state_dict(), _to_ember))
    e, t = train(ember, eo2, ep2, 7), train(torch, to, tp, 7)
    for a, b in zip(e, t):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _rosenbrock(t, x):
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2 + ((x[2:] - 0.5) ** 2).sum()


def _lbfgs_run(t, kw, steps, dtype):
    x = t.tensor([-1.5, 2.0, 0.3, -0.7], dtype=dtype, requires_grad=True)
    opt = t.optim.LBFGS([x], **kw)
    losses = []

    def closure():
        opt.zero_grad()
        loss = _rosenbrock(t, x)
        loss.backward()
        return loss
    for _ in range(steps):
        losses.append(float(opt.step(closure)))
    st = opt.state[x]
    return x.detach().numpy().copy(), losses, st["func_evals"], st["n_iter"], opt


LBFGS_CASES = [
    dict(lr=0.1),
    dict(lr=1, line_search_fn="strong_wolfe"),
    dict(lr=1, line_search_fn="strong_wolfe", history_size=3, max_iter=7),
    dict(lr=0.5, max_iter=4, max_eval=6, line_search_fn="strong_wolfe"),
]


@pytest.mark.parametrize("kw", LBFGS_CASES)
def test_lbfgs_matches_torch(kw):
    ex, el, ef, en, _ = _lbfgs_run(ember, kw, 4, "float64")
    tx, tl, tf, tn, _ = _lbfgs_run(torch, kw, 4, torch.float64)
    np.testing.assert_allclose(ex, tx, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(el, tl, rtol=1e-9, atol=1e-10)
    assert (ef, en) == (tf, tn)


def test_lbfgs_float32_and_state_dict():
    kw = dict(lr=1, line_search_fn="strong_wolfe")
    ex, el, *_ , eo = _lbfgs_run(ember, kw, 3, ember.float32)
    tx, tl, *_ = _lbfgs_run(torch, kw, 3, torch.float32)
    np.testing.assert_allclose(ex, tx, rtol=1e-4, atol=1e-5)
    sd = eo.state_dict()
    assert {"func_evals", "n_iter", "d", "t", "old_dirs", "old_stps", "ro", "H_diag",
            "prev_flat_grad", "prev_loss", "al"} <= set(sd["state"][0])
    assert sd["param_groups"][0]["max_eval"] == 25


def test_lbfgs_converges_on_quadratic():
    w = ember.zeros(3, requires_grad=True)
    target = ember.tensor([1.0, -2.0, 3.0])
    opt = ember.optim.LBFGS([w], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = ((w - target) ** 2).sum()
        loss.backward()
        return loss
    opt.step(closure)
    np.testing.assert_allclose(w.detach().numpy(), [1.0, -2.0, 3.0], atol=1e-5)


def test_lbfgs_errors_match_torch():
    for t in (ember, torch):
        a, b = t.zeros(2, requires_grad=True), t.zeros(2, requires_grad=True)
        with pytest.raises(ValueError, match="doesn't support per-parameter options"):
            t.optim.LBFGS([{"params": [a]}, {"params": [b]}])
        with pytest.raises(ValueError, match="Invalid learning rate"):
            t.optim.LBFGS([a], lr=-1)
        opt = t.optim.LBFGS([a], line_search_fn="armijo")

        def closure():
            opt.zero_grad()
            loss = (a - 1).square().sum()
            loss.backward()
            return loss
        with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
            opt.step(closure)


def test_constructor_errors_match_torch():
    for t in (ember, torch):
        p = [t.zeros(2, requires_grad=True)]
        for name, kw, msg in [("Adadelta", dict(rho=1.5), "Invalid rho value"),
                              ("Adadelta", dict(lr=-1), "Invalid learning rate"),
                              ("ASGD", dict(weight_decay=-1), "Invalid weight_decay value"),
                              ("Rprop", dict(etas=(1.2, 0.5)), "Invalid eta values"),
                              ("SparseAdam", dict(lr=0), "Invalid learning rate"),
                              ("SparseAdam", dict(eps=0), "Invalid epsilon value"),
                              ("SparseAdam", dict(betas=(0.9, 1.0)), "beta parameter at index 1")]:
            with pytest.raises(ValueError, match=msg):
                getattr(t.optim, name)(p, **kw)


def test_sparse_adam_refuses_dense_gradients_like_torch():
    for t in (ember, torch):
        w = t.zeros(3, 2, requires_grad=True)
        opt = t.optim.SparseAdam([w])
        (w * 2).sum().backward()
        with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
            opt.step()
        with pytest.raises(ValueError, match="SparseAdam does not support complex"):
            t.optim.SparseAdam([t.zeros(2, dtype=t.complex64, requires_grad=True)])


# ---- swa_utils -------------------------------------------------------------------------------
def _net(t):
    t.manual_seed(0)
    net = t.nn.Sequential(t.nn.Linear(3, 4), t.nn.BatchNorm1d(4), t.nn.ReLU(), t.nn.Linear(4, 2))
    rng = np.random.default_rng(1)
    with t.no_grad():
        for p in net.parameters():
            p.copy_(t.tensor(rng.normal(size=tuple(p.shape)).astype("float32")))
    return net


@pytest.mark.parametrize("how", ["swa", "ema", "avg_fn", "buffers"])
def test_averaged_model_matches_torch(how):
    outs = []
    for t in (ember, torch):
        net = _net(t)
        su = t.optim.swa_utils
        kw = {"swa": {}, "ema": dict(multi_avg_fn=su.get_ema_multi_avg_fn(0.9)),
              "avg_fn": dict(avg_fn=su.get_ema_avg_fn(0.8)), "buffers": dict(use_buffers=True)}
        avg = su.AveragedModel(net, **kw[how])
        opt = t.optim.SGD(net.parameters(), lr=0.1)
        x = t.tensor(np.random.default_rng(2).normal(size=(6, 3)).astype("float32"))
        for _ in range(4):
            opt.zero_grad()
            net(x).square().mean().backward()
            opt.step()
            avg.update_parameters(net)
        outs.append(([p.detach().numpy().copy() for p in avg.parameters()],
                     [b.detach().numpy().copy() for b in avg.buffers()],
                     avg(x).detach().numpy()))
    (ep, eb, ey), (tp, tb, ty) = outs
    for a, b in zip(ep + eb, tp + tb):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ey, ty, rtol=1e-5, atol=1e-5)


def test_update_bn_matches_torch():
    res = []
    for t in (ember, torch):
        net = _net(t)
        rng = np.random.default_rng(3)
        loader = [(t.tensor(rng.normal(size=(5, 3)).astype("float32")), 0) for _ in range(3)]
        net.eval()
        t.optim.swa_utils.update_bn(loader, net)
        bn = net[1]
        res.append((net.training, bn.momentum, bn.running_mean.numpy().copy(),
                    bn.running_var.numpy().copy(), int(bn.num_batches_tracked)))
    assert res[0][:2] == res[1][:2] and res[0][4] == res[1][4]
    np.testing.assert_allclose(res[0][2], res[1][2], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res[0][3], res[1][3], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kw", [dict(swa_lr=0.05), dict(swa_lr=0.01, anneal_epochs=3,
                                                           anneal_strategy="linear"),
                                dict(swa_lr=0.02, anneal_epochs=0)])
def test_swalr_matches_torch(kw):
    def trace(t):
        p = t.zeros(2, requires_grad=True)
        opt = t.optim.SGD([p], lr=0.5)
        s = t.optim.swa_utils.SWALR(opt, **kw)
        out = []
        for _ in range(15):
            opt.step()
            s.step()
            out.append(s.get_last_lr()[0])
        return out, s.state_dict()
    (e, esd), (t, tsd) = trace(ember), trace(torch)
    np.testing.assert_allclose(e, t, rtol=1e-12)
    assert set(esd) >= {"anneal_epochs", "_anneal_strategy", "base_lrs", "last_epoch"}
    with pytest.raises(ValueError, match="anneal_strategy must be one of"):
        ember.optim.swa_utils.SWALR(ember.optim.SGD([ember.zeros(1, requires_grad=True)],
                                                    lr=0.1), 0.1, anneal_strategy="exp")
