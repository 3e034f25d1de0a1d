"""ember.distributions against torch.distributions: log_prob (and its gradients), entropy,
moments, cdf/icdf, shapes, KL divergences, validation errors, and sampling (shapes, support,
moments of many draws, reparameterized gradients)."""
import numpy as np
import pytest
from harness import torch

import ember

R = np.random.default_rng(0)


def A(*shape, lo=-2.0, hi=2.0):
    return R.uniform(lo, hi, size=shape).astype("float64")


def _simplex(*shape):
    x = R.uniform(0.1, 1.0, size=shape)
    return x / x.sum(-1, keepdims=True)


def _spd(n, batch=()):
    m = R.normal(size=batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


P_NORMAL = dict(loc=A(3), scale=A(3, lo=0.5, hi=2.0))
# name -> (params as numpy / python, values to score)
CASES = {
    "Normal": (P_NORMAL, A(4, 3)),
    "Uniform": (dict(low=A(3, lo=-2, hi=-1), high=A(3, lo=1, hi=2)), A(4, 3, lo=-0.9, hi=0.9)),
    "Laplace": (dict(loc=A(3), scale=A(3, lo=0.5, hi=2)), A(4, 3)),
    "Exponential": (dict(rate=A(3, lo=0.5, hi=2)), A(4, 3, lo=0.1, hi=3)),
    "Gamma": (dict(concentration=A(3, lo=0.5, hi=3), rate=A(3, lo=0.5, hi=2)),
              A(4, 3, lo=0.1, hi=3)),
    "Beta": (dict(concentration1=A(3, lo=0.5, hi=3), concentration0=A(3, lo=0.5, hi=3)),
             A(4, 3, lo=0.05, hi=0.95)),
    "Dirichlet": (dict(concentration=A(2, 4, lo=0.5, hi=3)), _simplex(5, 2, 4)),
    "Bernoulli": (dict(probs=A(3, lo=0.1, hi=0.9)), (R.random((4, 3)) > 0.5).astype("float64")),
    "Bernoulli_logits": (dict(logits=A(3)), (R.random((4, 3)) > 0.5).astype("float64")),
    "Categorical": (dict(probs=_simplex(2, 5)), R.integers(0, 5, (4, 2)).astype("float64")),
    "Categorical_logits": (dict(logits=A(2, 5)), R.integers(0, 5, (4, 2)).astype("float64")),
    "Poisson": (dict(rate=A(3, lo=0.5, hi=4)), R.integers(0, 6, (4, 3)).astype("float64")),
    "Binomial": (dict(total_count=10.0, probs=A(3, lo=0.1, hi=0.9)),
                 R.integers(0, 11, (4, 3)).astype("float64")),
    "Binomial_logits": (dict(total_count=7.0, logits=A(3)),
                        R.integers(0, 8, (4, 3)).astype("float64")),
    "MultivariateNormal": (dict(loc=A(2, 3), covariance_matrix=_spd(3, (2,))), A(4, 2, 3)),
    "MultivariateNormal_tril": (dict(loc=A(3), scale_tril=np.linalg.cholesky(_spd(3))),
                                A(4, 3)),
    "MultivariateNormal_prec": (dict(loc=A(3), precision_matrix=_spd(3)), A(4, 3)),
    "LogNormal": (dict(loc=A(3), scale=A(3, lo=0.5, hi=1.5)), A(4, 3, lo=0.1, hi=4)),
}
NO_ENTROPY = {"Poisson"}
NO_MOMENTS = {"Categorical", "Categorical_logits"}   # nan in both


def _build(t, name, params, grad=False):
    cls = getattr(t.distributions, name.split("_")[0])
    kw = {}
    for k, v in params.items():
        if isinstance(v, np.ndarray):
            kw[k] = t.tensor(v, requires_grad=grad)
        else:
            kw[k] = v
    return cls(**kw), kw


def _np(x):
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name):
    params, values = CASES[name]
    ed, ekw = _build(ember, name, params, grad=True)
    td, tkw = _build(torch, name, params, grad=True)
    assert tuple(ed.batch_shape) == tuple(td.batch_shape)
    assert tuple(ed.event_shape) == tuple(td.event_shape)
    elp, tlp = ed.log_prob(ember.tensor(values)), td.log_prob(torch.tensor(values))
    np.testing.assert_allclose(_np(elp), _np(tlp), rtol=1e-6, atol=1e-8)
    elp.sum().backward()
    tlp.sum().backward()
    for k in ekw:
        if isinstance(ekw[k], ember.Tensor):
            np.testing.assert_allclose(_np(ekw[k].grad), _np(tkw[k].grad), rtol=1e-5,
                                       atol=1e-8, err_msg=k)
    if name not in NO_ENTROPY:
        np.testing.assert_allclose(_np(ed.entropy()), _np(td.entropy()), rtol=1e-6, atol=1e-8)
    if name not in NO_MOMENTS:
        for m in ("mean", "variance", "stddev"):
            np.testing.assert_allclose(_np(getattr(ed, m)), _np(getattr(td, m)), rtol=1e-6,
                                       atol=1e-8, err_msg=m)
    else:
        assert np.isnan(_np(ed.mean)).all() and ed.mean.shape == td.mean.shape


@pytest.mark.parametrize("name", ["Normal", "Uniform", "Laplace", "Exponential", "LogNormal"])
def test_cdf_icdf_match_torch(name):
    params, values = CASES[name]
    ed, _ = _build(ember, name, params)
    td, _ = _build(torch, name, params)
    np.testing.assert_allclose(_np(ed.cdf(ember.tensor(values))),
                               _np(td.cdf(torch.tensor(values))), rtol=1e-6, atol=1e-8)
    q = A(4, 3, lo=0.05, hi=0.95)
    np.testing.assert_allclose(_np(ed.icdf(ember.tensor(q))), _np(td.icdf(torch.tensor(q))),
                               rtol=1e-6, atol=1e-8)


# sample mean/var of 20000 draws vs the distribution's (tolerance: several standard errors)
@pytest.mark.parametrize("name", [n for n in CASES if "Categorical" not in n])
def test_samples_shape_support_and_moments(name):
    ember.manual_seed(0)
    params, _ = CASES[name]
    d, _ = _build(ember, name, params)
    s = d.sample((20000,))
    assert tuple(s.shape) == (20000,) + tuple(d.batch_shape) + tuple(d.event_shape)
    assert bool(d.support.check(s).all())
    mean, var = _np(d.mean), _np(d.variance)
    se = np.sqrt(var / 20000)
    assert np.all(np.abs(_np(s).mean(0) - mean) < 6 * se + 1e-3), name


def test_categorical_samples():
    ember.manual_seed(0)
    p = _simplex(5)
    d = ember.distributions.Categorical(probs=ember.tensor(p))
    s = _np(d.sample((20000,)))
    assert s.dtype == np.int64 and s.shape == (20000,)
    np.testing.assert_allclose(np.bincount(s, minlength=5) / 20000, p, atol=0.02)
    assert d.enumerate_support().tolist() == [0, 1, 2, 3, 4]


def test_rsample_gradients_are_reparameterized():
    loc = ember.tensor([0.5, -1.0], requires_grad=True)
    scale = ember.tensor([2.0, 0.5], requires_grad=True)
    x = ember.distributions.Normal(loc, scale).rsample((50,))
    (x ** 2).sum().backward()
    eps = (x.detach() - loc.detach()) / scale.detach()
    np.testing.assert_allclose(_np(loc.grad), _np((2 * x.detach()).sum(0)), rtol=1e-5)
    np.testing.assert_allclose(_np(scale.grad), _np((2 * x.detach() * eps).sum(0)), rtol=1e-5)
    L = ember.tensor([[1.0, 0.0], [0.3, 0.7]], requires_grad=True)
    m = ember.distributions.MultivariateNormal(ember.zeros(2), scale_tril=L)
    y = m.rsample((10,))
    y.sum().backward()
    assert L.grad is not None and bool((L.grad != 0).any())
    g = ember.distributions.Gamma(ember.tensor([2.0], requires_grad=True), ember.tensor([1.0]))
    with pytest.raises(NotImplementedError, match="concentration"):
        g.rsample()
    assert g.sample((3,)).shape == (3, 1)


KL_PAIRS = [("Normal", dict(loc=A(3), scale=A(3, lo=0.5, hi=2)),
             dict(loc=A(3), scale=A(3, lo=0.5, hi=2))),
            ("Bernoulli", dict(probs=A(3, lo=0.1, hi=0.9)), dict(probs=A(3, lo=0.1, hi=0.9))),
            ("Categorical", dict(probs=_simplex(2, 4)), dict(probs=_simplex(2, 4))),
            ("Beta", dict(concentration1=A(3, lo=0.5, hi=3), concentration0=A(3, lo=0.5, hi=3)),
             dict(concentration1=A(3, lo=0.5, hi=3), concentration0=A(3, lo=0.5, hi=3))),
            ("Gamma", dict(concentration=A(3, lo=0.5, hi=3), rate=A(3, lo=0.5, hi=2)),
             dict(concentration=A(3, lo=0.5, hi=3), rate=A(3, lo=0.5, hi=2))),
            ("Dirichlet", dict(concentration=A(2, 3, lo=0.5, hi=3)),
             dict(concentration=A(2, 3, lo=0.5, hi=3))),
            ("Uniform", dict(low=A(3, lo=-1, hi=-0.5), high=A(3, lo=0.5, hi=1)),
             dict(low=A(3, lo=-2, hi=-0.8), high=A(3, lo=0.8, hi=2))),
            ("Laplace", dict(loc=A(3), scale=A(3, lo=0.5, hi=2)),
             dict(loc=A(3), scale=A(3, lo=0.5, hi=2))),
            ("Exponential", dict(rate=A(3, lo=0.5, hi=2)), dict(rate=A(3, lo=0.5, hi=2))),
            ("Poisson", dict(rate=A(3, lo=0.5, hi=2)), dict(rate=A(3, lo=0.5, hi=2))),
            ("Binomial", dict(total_count=5.0, probs=A(3, lo=0.1, hi=0.9)),
             dict(total_count=5.0, probs=A(3, lo=0.1, hi=0.9))),
            ("MultivariateNormal", dict(loc=A(2, 3), covariance_matrix=_spd(3, (2,))),
             dict(loc=A(3), scale_tril=np.linalg.cholesky(_spd(3)))),
            ("LogNormal", dict(loc=A(3), scale=A(3, lo=0.5, hi=2)),
             dict(loc=A(3), scale=A(3, lo=0.5, hi=2)))]


@pytest.mark.parametrize("name,pp,qp", KL_PAIRS, ids=[k[0] for k in KL_PAIRS])
def test_kl_divergence_matches_torch(name, pp, qp):
    ep, _ = _build(ember, name, pp)
    eq, _ = _build(ember, name, qp)
    tp, _ = _build(torch, name, pp)
    tq, _ = _build(torch, name, qp)
    np.testing.assert_allclose(_np(ember.distributions.kl_divergence(ep, eq)),
                               _np(torch.distributions.kl_divergence(tp, tq)), rtol=1e-6,
                               atol=1e-8)


def test_independent_and_transformed_match_torch():
    loc, scale, v = A(2, 3), A(2, 3, lo=0.5, hi=2), A(5, 2, 3)
    yv = _simplex(5, 4)
    res = []
    for t in (ember, torch):
        D = t.distributions
        T = D.transforms
        base = D.Normal(t.tensor(loc), t.tensor(scale))
        ind = D.Independent(base, 1)
        tr = D.TransformedDistribution(base, [T.AffineTransform(1.0, 2.0), T.SigmoidTransform()])
        tanh = D.TransformedDistribution(D.Independent(base, 1), [T.TanhTransform()])
        sb = D.TransformedDistribution(D.Normal(t.zeros(3, dtype=t.float64),
                                                t.ones(3, dtype=t.float64)),
                                       T.StickBreakingTransform())
        res.append([ind.log_prob(t.tensor(v)), ind.entropy(), tr.log_prob(t.tensor(v) * 0.1 + 0.5),
                    tanh.log_prob(t.tensor(v) * 0.3), sb.log_prob(t.tensor(yv)),
                    D.kl_divergence(ind, D.Independent(D.Normal(t.tensor(loc) + 1,
                                                                t.tensor(scale)), 1)),
                    t.tensor([tuple(ind.batch_shape) == (2,), tuple(tanh.event_shape) == (3,),
                              tuple(sb.event_shape) == (4,)])])
    for a, b in zip(*res):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-6, atol=1e-8)


def test_transforms_match_torch():
    x = A(4, 3)
    for name, args in [("ExpTransform", ()), ("SigmoidTransform", ()), ("TanhTransform", ()),
                       ("AffineTransform", (0.5, -3.0)), ("SoftplusTransform", ()),
                       ("PowerTransform", (2.0,))]:
        xs = np.abs(x) + 0.1 if name == "PowerTransform" else x
        e = getattr(ember.distributions.transforms, name)(*args)
        t = getattr(torch.distributions.transforms, name)(*args)
        ey, ty = e(ember.tensor(xs)), t(torch.tensor(xs))
        np.testing.assert_allclose(_np(ey), _np(ty), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(_np(e.inv(ey)), _np(t.inv(ty)), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(_np(e.log_abs_det_jacobian(ember.tensor(xs), ey)),
                                   _np(t.log_abs_det_jacobian(torch.tensor(xs), ty)),
                                   rtol=1e-6, atol=1e-8)
    for c in ("positive", "unit_interval", "simplex", "real"):
        e = ember.distributions.biject_to(getattr(ember.distributions.constraints, c))
        t = torch.distributions.biject_to(getattr(torch.distributions.constraints, c))
        z = A(3)
        np.testing.assert_allclose(_np(e(ember.tensor(z))), _np(t(torch.tensor(z))), rtol=1e-6)


def test_validation_errors_match_torch():
    for t in (ember, torch):
        D = t.distributions
        with pytest.raises(ValueError, match="Expected parameter scale"):
            D.Normal(t.tensor([0.0]), t.tensor([-1.0]))
        with pytest.raises(ValueError, match="Expected value argument"):
            D.Exponential(t.tensor([1.0])).log_prob(t.tensor([-1.0]))
        with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
            D.Bernoulli()
        with pytest.raises(ValueError, match="Exactly one of covariance_matrix"):
            D.MultivariateNormal(t.zeros(2))
        with pytest.raises(ValueError, match="must match event_shape"):
            D.Dirichlet(t.ones(3)).log_prob(t.ones(2) / 2)
        with pytest.raises(NotImplementedError):
            D.kl_divergence(D.Normal(0.0, 1.0), D.Poisson(t.tensor(1.0)))
        assert D.Normal(t.tensor([0.0]), t.tensor([-1.0]), validate_args=False).scale.item() == -1


def test_register_kl_most_specific_wins():
    D = ember.distributions

    class MyNormal(D.Normal):
        pass

    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        return ember.tensor(42.0)
    assert D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(0.0, 1.0)).item() == 42.0
    assert D.kl_divergence(D.Normal(0.0, 1.0), D.Normal(0.0, 1.0)).item() == 0.0


def test_expand_matches_torch():
    for name in ("Normal", "Bernoulli", "Categorical", "Gamma", "Dirichlet", "Beta",
                 "MultivariateNormal_tril", "LogNormal"):
        params, values = CASES[name]
        ed, _ = _build(ember, name, params)
        td, _ = _build(torch, name, params)
        shape = (5,) + tuple(td.batch_shape)
        ee, te = ed.expand(shape), td.expand(shape)
        assert tuple(ee.batch_shape) == tuple(te.batch_shape) == shape
        np.testing.assert_allclose(_np(ee.log_prob(ember.tensor(values[:1]))),
                                   _np(te.log_prob(torch.tensor(values[:1]))), rtol=1e-6)
