"""jacrev / jacfwd as one vmapped pass over the identity basis (one backward pass in all, not
one per output element), hessian = jacfwd(jacrev): values against torch.func."""
import numpy as np
import pytest
import torch
import torch.func as tfunc

import ember
import ember.autograd._engine as engine
import ember.func as efunc

RNG = np.random.default_rng(5)
X = RNG.standard_normal((6, 5))
Y = RNG.standard_normal((5,))


def f_mat(m, x):
    return m.tanh(x @ x.T).sum(0) * x[:, 0] + m.sin(x).sum(1)          # (6,)


def f_two(m, x, y):
    return (x @ y).exp(), (x * y).sum(0) ** 2                            # (6,), (5,)


CASES = {
    "mat": (f_mat, (X,), 0),
    "two_outputs_argnums": (f_two, (X, Y), (0, 1)),
    "scalar": (lambda m, x: (x.sin() * x).sum(), (X,), 0),
    "norm_softmax": (lambda m, x: m.softmax(x, -1) * m.nn.functional.layer_norm(x, (5,)),
                     (X,), 0),
}


def _flat(r):
    if isinstance(r, (tuple, list)):
        return [y for x in r for y in _flat(x)]
    return [r]


def _compare(a, b):
    fa, fb = _flat(a), _flat(b)
    assert len(fa) == len(fb)
    for x, y in zip(fa, fb):
        assert tuple(x.shape) == tuple(y.shape)
        np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=1e-9,
                                   atol=1e-12)


@pytest.mark.parametrize("mode", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_jacobians_match_torch(name, mode):
    fn, args, argnums = CASES[name]
    e = getattr(efunc, mode)(lambda *a: fn(ember, *a), argnums)(
        *[ember.tensor(a) for a in args])
    t = getattr(tfunc, mode)(lambda *a: fn(torch, *a), argnums)(
        *[torch.tensor(a) for a in args])
    _compare(e, t)


@pytest.mark.parametrize("name", ["mat", "scalar"])
def test_hessian_matches_torch(name):
    fn, args, _ = CASES[name]
    e = efunc.hessian(lambda x: fn(ember, x).sum())(ember.tensor(args[0]))
    t = tfunc.hessian(lambda x: fn(torch, x).sum())(torch.tensor(args[0]))
    _compare(e, t)


@pytest.mark.parametrize("mode,calls", [("jacrev", 1), ("jacfwd", 1 + 1)])
def test_one_batched_pass(monkeypatch, mode, calls):
    # jacrev: one backward over the 6-row basis; jacfwd: the double-vjp's reverse pass and
    # one backward over the 30-column basis (a loop would make 6 and 31)
    n = [0]
    real = engine.run_backward

    def counting(*a, **k):
        n[0] += 1
        return real(*a, **k)
    monkeypatch.setattr(engine, "run_backward", counting)
    getattr(efunc, mode)(lambda x: f_mat(ember, x))(ember.tensor(X))
    assert n[0] == calls


def test_inside_vmap_still_per_example():
    # under an outer vmap the per-element path runs: values as torch's
    xs = RNG.standard_normal((3, 4))
    e = efunc.vmap(efunc.jacrev(lambda x: x.sin() * x.sum()))(ember.tensor(xs))
    t = tfunc.vmap(tfunc.jacrev(lambda x: x.sin() * x.sum()))(torch.tensor(xs))
    _compare(e, t)
