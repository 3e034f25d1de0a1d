"""kl_divergence(p, q) with a registry of closed forms keyed by (type(p), type(q)), the most
specific registered pair winning (as torch.distributions.kl)."""
from __future__ import annotations

import math

import ember
import ember.nn.functional as F

from .continuous import Beta, Dirichlet, Exponential, Gamma, Laplace, Normal, Uniform
from .discrete import Bernoulli, Binomial, Categorical, OneHotCategorical, Poisson
from .multivariate import Independent, MultivariateNormal, _batch_mahalanobis
from .transformed import TransformedDistribution
from .utils import sum_rightmost

__all__ = ["register_kl", "kl_divergence"]

_KL_REGISTRY: dict = {}
_KL_MEMOIZE: dict = {}


def register_kl(type_p, type_q):
    """Decorator registering fn(p, q) as the KL divergence of type_p from type_q."""
    if not isinstance(type_p, type) or not isinstance(type_q, type):
        raise TypeError("Expected type_p and type_q to be subclasses of Distribution")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()
        return fun
    return decorator


def _dispatch_kl(type_p, type_q):
    matches = [(p, q) for p, q in _KL_REGISTRY if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return NotImplemented
    mro_p, mro_q = type_p.__mro__, type_q.__mro__
    best = min(matches, key=lambda pq: (mro_p.index(pq[0]), mro_q.index(pq[1])))
    return _KL_REGISTRY[best]


def kl_divergence(p, q):
    """KL(p || q), computed over the batch (summed over event dims).

    >>> import ember
    >>> from ember.distributions import Normal, kl_divergence
    >>> round(kl_divergence(Normal(0.0, 1.0), Normal(1.0, 1.0)).item(), 3)
    0.5
    """
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _KL_MEMOIZE[type(p), type(q)] = _dispatch_kl(type(p), type(q))
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{p.__class__.__name__} and q type {q.__class__.__name__}")
    return fun(p, q)


def _inf_where(cond, t):
    return ember.where(cond, ember.full_like(t, math.inf), t)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = _inf_where(q.probs == 0, t1)
    t1 = ember.where(p.probs == 0, ember.zeros_like(t1), t1)
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = _inf_where(q.probs == 1, t2)
    t2 = ember.where(p.probs == 1, ember.zeros_like(t2), t2)
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _inf_where((q.probs == 0).expand_as(t), t)
    t = ember.where((p.probs == 0).expand_as(t), ember.zeros_like(t), t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sp = p.concentration1 + p.concentration0
    sq = q.concentration1 + q.concentration0
    lg, dg = ember.lgamma, ember.digamma
    t1 = lg(q.concentration1) + lg(q.concentration0) + lg(sp)
    t2 = lg(p.concentration1) + lg(p.concentration0) + lg(sq)
    t3 = (p.concentration1 - q.concentration1) * dg(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * dg(p.concentration0)
    t5 = (sq - sp) * dg(sp)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * ember.log(p.rate / q.rate)
    t2 = ember.lgamma(q.concentration) - ember.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * ember.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = ember.lgamma(sum_p) - ember.lgamma(sum_q)
    t2 = (ember.lgamma(p.concentration) - ember.lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = ember.digamma(p.concentration) - ember.digamma(sum_p).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _inf_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * ember.exp(-loc_abs_diff / p.scale)
    return t1 + t2 + t3 - 1


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count "
                                  "is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p()
                          - (-q.probs).log1p())
    return _inf_where(p.total_count > q.total_count, kl)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different "
                         "event shapes cannot be computed")
    Lp, Lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = (Lq.diagonal(dim1=-2, dim2=-1).log().sum(-1)
                  - Lp.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    batch = ember.broadcast_shapes(Lq.shape[:-2], Lp.shape[:-2])
    n = p.event_shape[0]
    sol = ember.linalg.solve_triangular(Lq.expand(batch + (n, n)), Lp.expand(batch + (n, n)),
                                        upper=False)
    term2 = sol.pow(2).sum((-2, -1))
    term3 = _batch_mahalanobis(Lq, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)
