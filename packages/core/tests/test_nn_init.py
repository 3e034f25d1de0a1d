"""ember.nn.init (bounds, statistics, exact fills, errors), ember.nn.utils (gradient clipping,
parameter vectors), and full backward hooks on modules, vs torch."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from harness import compare

import ember
import ember.nn.init as init

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("args", [("linear",), ("conv2d",), ("sigmoid",), ("tanh",), ("relu",),
                                  ("leaky_relu",), ("leaky_relu", 0.2), ("leaky_relu", 3),
                                  ("selu",)])
def test_calculate_gain(args):
    assert init.calculate_gain(*args) == torch.nn.init.calculate_gain(*args)


def test_calculate_gain_errors():
    for args in (("foo",), ("leaky_relu", True), ("leaky_relu", "x")):
        with pytest.raises(ValueError) as te:
            torch.nn.init.calculate_gain(*args)
        with pytest.raises(ValueError) as ee:
            init.calculate_gain(*args)
        assert str(ee.value) == str(te.value)


@pytest.mark.parametrize("shape", [(3, 4), (5, 2, 3), (4, 2, 3, 3)])
def test_fan_in_and_fan_out(shape):
    assert init._calculate_fan_in_and_fan_out(ember.empty(shape)) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))


def _stats(fn, shape=(200, 300)):
    t = ember.empty(shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(t)
    assert out is t
    a = t.numpy()
    return a.min(), a.max(), a.mean(), a.std()


def test_uniform_family_bounds_and_spread():
    fan_in, fan_out = 300, 200
    cases = [
        (lambda t: init.uniform_(t, -0.3, 0.7), -0.3, 0.7),
        (lambda t: init.xavier_uniform_(t, gain=2.0),
         -2 * math.sqrt(6 / (fan_in + fan_out)), 2 * math.sqrt(6 / (fan_in + fan_out))),
        (lambda t: init.kaiming_uniform_(t, a=math.sqrt(5)),
         -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in)),
        (lambda t: init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu"),
         -math.sqrt(6 / fan_out), math.sqrt(6 / fan_out)),
    ]
    for fn, lo, hi in cases:
        mn, mx, mean, std = _stats(fn)
        assert lo <= mn < lo + (hi - lo) * 0.01 and hi - (hi - lo) * 0.01 < mx <= hi
        assert abs(mean - (lo + hi) / 2) < (hi - lo) * 0.01
        assert abs(std - (hi - lo) / math.sqrt(12)) < (hi - lo) * 0.01


def test_normal_family_statistics():
    fan_in, fan_out = 300, 200
    for fn, mean, std in [
        (lambda t: init.normal_(t, 0.5, 2.0), 0.5, 2.0),
        (lambda t: init.xavier_normal_(t), 0.0, math.sqrt(2 / (fan_in + fan_out))),
        (lambda t: init.kaiming_normal_(t, nonlinearity="relu"), 0.0, math.sqrt(2 / fan_in)),
        (lambda t: init.kaiming_normal_(t, a=0.1, mode="fan_out"), 0.0,
         math.sqrt(2 / (1 + 0.01)) / math.sqrt(fan_out)),
    ]:
        _, _, m, s = _stats(fn)
        assert abs(m - mean) < 0.02 * std + 1e-3 and abs(s / std - 1) < 0.02


def test_trunc_normal():
    mn, mx, mean, std = _stats(lambda t: init.trunc_normal_(t, mean=1.0, std=2.0, a=0.0, b=3.0))
    assert 0.0 <= mn < 0.01 and 2.99 < mx <= 3.0
    # mean of N(1, 2^2) truncated to [0, 3] is 1 + 2 (phi(-0.5) - phi(1)) / (Phi(1) - Phi(-0.5))
    assert abs(mean - 1.4133) < 0.01


def test_exact_fills_match_torch():
    for f in (lambda t, x: t.nn.init.constant_(x, 0.3), lambda t, x: t.nn.init.ones_(x),
              lambda t, x: t.nn.init.zeros_(x), lambda t, x: t.nn.init.eye_(x)):
        compare(f(ember, ember.empty(3, 4)), f(torch, torch.empty(3, 4)))
    for shape, groups in (((4, 2, 3), 1), ((6, 2, 3, 3), 2), ((2, 2, 2, 3, 3), 1)):
        compare(init.dirac_(ember.empty(shape), groups),
                torch.nn.init.dirac_(torch.empty(shape), groups))


def test_init_does_not_record_grad():
    p = ember.nn.Parameter(ember.empty(3, 3))
    for fn in (init.uniform_, init.normal_, init.ones_, init.xavier_uniform_, init.eye_):
        fn(p)
        assert p.is_leaf and p.grad_fn is None and p.requires_grad


def test_orthogonal():
    for shape in ((4, 6), (6, 4), (3, 2, 2)):
        t = init.orthogonal_(ember.empty(shape), gain=2.0)
        a = t.numpy().reshape(shape[0], -1)
        small = a @ a.T if shape[0] <= a.shape[1] else a.T @ a
        np.testing.assert_allclose(small, 4 * np.eye(small.shape[0]), atol=1e-5)


def test_sparse():
    t = init.sparse_(ember.empty(10, 6), sparsity=0.3, std=0.5)
    zeros_per_col = (t.numpy() == 0).sum(0)
    assert (zeros_per_col >= 3).all()


def test_init_errors_match_torch():
    for f in (lambda t: t.nn.init.xavier_uniform_(t.empty(3)),
              lambda t: t.nn.init.kaiming_normal_(t.empty(3, 3), mode="fan_avg"),
              lambda t: t.nn.init.eye_(t.empty(2, 2, 2)),
              lambda t: t.nn.init.dirac_(t.empty(2, 2)),
              lambda t: t.nn.init.dirac_(t.empty(3, 2, 2), groups=2),
              lambda t: t.nn.init.orthogonal_(t.empty(3)),
              lambda t: t.nn.init.sparse_(t.empty(3, 3, 3), 0.1)):
        with pytest.raises(Exception) as te:
            f(torch)
        with pytest.raises(Exception) as ee:
            f(ember)
        assert type(ee.value) is type(te.value) and str(ee.value) == str(te.value)


def test_init_reproducible_with_manual_seed():
    ember.manual_seed(3)
    a = ember.nn.Linear(4, 4).weight.detach().numpy().copy()
    ember.manual_seed(3)
    b = ember.nn.Linear(4, 4).weight.detach().numpy()
    np.testing.assert_array_equal(a, b)


# ---- nn.utils ------------------------------------------------------------------------------------
def _params_with_grads(t, grads):
    ps = []
    for g in grads:
        p = t.nn.Parameter(t.zeros(g.shape, dtype=t.float64))
        p.grad = t.tensor(g)
        ps.append(p)
    return ps


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, float("inf")])
def test_clip_grad_norm(norm_type):
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    for max_norm in (0.5, 100.0):
        ep, tp = _params_with_grads(ember, grads), _params_with_grads(torch, grads)
        tn = torch.nn.utils.clip_grad_norm_(tp, max_norm, norm_type)
        en = ember.nn.utils.clip_grad_norm_(ep, max_norm, norm_type, foreach=True)
        compare(en, tn)
        for a, b in zip(ep, tp):
            compare(a.grad, b.grad)


def test_clip_grad_norm_nonfinite_and_single_tensor():
    p = ember.nn.Parameter(ember.zeros(2))
    p.grad = ember.tensor([float("inf"), 1.0])
    with pytest.raises(RuntimeError, match="is non-finite"):
        ember.nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    q = ember.nn.Parameter(ember.zeros(2))
    q.grad = ember.tensor([3.0, 4.0])
    assert ember.nn.utils.clip_grad_norm_(q, 1.0).item() == pytest.approx(5.0)
    np.testing.assert_allclose(q.grad.numpy(), [0.6, 0.8], rtol=1e-5)


def test_clip_grad_value():
    rng = np.random.default_rng(1)
    grads = [rng.standard_normal((3, 4)) * 3]
    ep, tp = _params_with_grads(ember, grads), _params_with_grads(torch, grads)
    ember.nn.utils.clip_grad_value_(ep, 1.5)
    torch.nn.utils.clip_grad_value_(tp, 1.5)
    compare(ep[0].grad, tp[0].grad)


def test_parameters_to_vector_and_back():
    lin = ember.nn.Linear(3, 2)
    vec = ember.nn.utils.parameters_to_vector(lin.parameters())
    assert tuple(vec.shape) == (8,)
    np.testing.assert_array_equal(vec.detach().numpy()[:6],
                                  lin.weight.detach().numpy().reshape(-1))
    ember.nn.utils.vector_to_parameters(ember.arange(8.0), lin.parameters())
    assert lin.weight.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert lin.bias.tolist() == [6.0, 7.0] and isinstance(lin.bias, ember.nn.Parameter)
    with pytest.raises(TypeError, match="expected torch.Tensor"):
        ember.nn.utils.vector_to_parameters([1.0], lin.parameters())


# ---- full backward hooks -------------------------------------------------------------------------
def _hook_log(t):
    log = []
    m = t.nn.Linear(3, 2)
    with t.no_grad():
        m.weight.fill_(0.5)
        m.bias.fill_(0.1)
    m.register_full_backward_pre_hook(
        lambda mod, go: log.append(("pre", [tuple(g.shape) for g in go])))
    m.register_full_backward_hook(lambda mod, gi, go: log.append(
        ("full", [None if g is None else g.tolist() for g in gi], [g.tolist() for g in go])))
    x = t.ones(4, 3, requires_grad=True)
    (m(x) * 2).sum().backward()
    log.append(x.grad.tolist())
    m2 = t.nn.Linear(3, 2)  # no input requires grad: the hook still runs, grad_input None
    m2.register_full_backward_hook(lambda mod, gi, go: log.append(("full2", gi, len(go))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m2(t.ones(1, 3)).sum().backward()
    m3 = t.nn.Identity()  # a hook may replace grad_input
    m3.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 10,))
    x3 = t.ones(2, requires_grad=True)
    m3(x3 * 1).sum().backward()
    log.append(x3.grad.tolist())
    m4 = t.nn.Identity()  # a pre-hook may replace grad_output
    m4.register_full_backward_pre_hook(lambda mod, go: (go[0] * 3,))
    x4 = t.ones(2, requires_grad=True)
    m4(x4 * 1).sum().backward()
    log.append(x4.grad.tolist())
    return log


def test_full_backward_hooks_match_torch():
    assert _hook_log(ember) == _hook_log(torch)


def test_backward_hook_kinds_cannot_mix():
    m = ember.nn.Linear(1, 1)
    m.register_full_backward_hook(lambda *a: None)
    with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks"):
        m.register_backward_hook(lambda *a: None)


def _hook_log_nested(t):
    log = []
    t.manual_seed(0)
    e = t.nn.Embedding(5, 2)  # integer input: grad_input is (None,)
    e.register_full_backward_hook(
        lambda m, gi, go: log.append(("emb", gi, [tuple(g.shape) for g in go])))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e(t.tensor([1, 2])).sum().backward()
    lstm = t.nn.LSTM(2, 3)  # output (out, (h, c)): grad_output has None for the tuple
    lstm.register_full_backward_pre_hook(
        lambda m, go: log.append(("pre", [g is None for g in go])))
    lstm.register_full_backward_hook(lambda m, gi, go: log.append(
        ("full", [None if g is None else tuple(g.shape) for g in gi], len(go))))
    out, _ = lstm(t.ones(4, 1, 2, requires_grad=True))
    out.sum().backward()
    return log


def test_full_backward_hooks_with_non_tensor_inputs_and_outputs():
    assert _hook_log_nested(ember) == _hook_log_nested(torch)
