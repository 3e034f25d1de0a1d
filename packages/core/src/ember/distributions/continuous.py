"""Continuous distributions: Normal, Uniform, Laplace, Exponential, Gamma, Beta, Dirichlet
(PyTorch's formulas for log_prob, entropy, moments; rsample by reparameterization where PyTorch
has it)."""
from __future__ import annotations

import math

import numpy as np

import ember

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, sample_seed

__all__ = ["Normal", "Uniform", "Laplace", "Exponential", "Gamma", "Beta", "Dirichlet"]


def _expand_params(self, cls, batch_shape, names, _instance):
    new = self._get_checked_instance(cls, _instance)
    batch_shape = ember.Size(batch_shape)
    for n in names:
        setattr(new, n, getattr(self, n).expand(batch_shape + self._event_shape
                                                if n == "concentration"
                                                and cls is Dirichlet else batch_shape))
    Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
    new._validate_args = self._validate_args
    return new


def _standard_gamma(concentration):
    """Gamma(concentration, 1) samples (numpy's sampler seeded from ember's generator).
    No gradient flows to the concentration: rsample refuses when one is needed."""
    rng = np.random.default_rng(sample_seed())
    c = concentration.detach().cpu().numpy().astype(np.float64)
    out = rng.standard_gamma(c)
    t = ember.tensor(out, dtype=concentration.dtype, device=concentration.device)
    return t.clamp(min=ember.finfo(concentration.dtype).tiny)


def _needs_concentration_grad(name, *tensors):
    if ember.is_grad_enabled() and any(t.requires_grad for t in tensors):
        raise NotImplementedError(
            f"{name}.rsample: gradients with respect to the concentration (the implicit "
            "reparameterization of the gamma sampler) are not implemented in ember; use "
            ".sample() or keep the concentration fixed")


class Normal(Distribution):
    """Normal(loc, scale), as torch.distributions.Normal.

    >>> import ember
    >>> round(ember.distributions.Normal(0.0, 1.0).log_prob(ember.tensor(0.0)).item(), 4)
    -0.9189
    """
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Normal, batch_shape, ("loc", "scale"), _instance)

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)
    stddev = property(lambda self: self.scale)
    variance = property(lambda self: self.stddev.pow(2))

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            return ember.normal(self.loc.expand(shape), self.scale.expand(shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = ember.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        return -((value - self.loc) ** 2) / (2 * var) - self.scale.log() \
            - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ember.erf((value - self.loc) * self.scale.reciprocal()
                                    / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * ember.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + ember.log(self.scale)


class Uniform(Distribution):
    """Uniform on [low, high)."""
    arg_constraints = {"low": constraints.dependent(is_discrete=False, event_dim=0),
                       "high": constraints.dependent(is_discrete=False, event_dim=0)}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.size(), validate_args=validate_args)
        if self._validate_args and not bool(ember.lt(self.low, self.high).all()):
            raise ValueError("Uniform is not defined when low>= high")

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Uniform, batch_shape, ("low", "high"), _instance)

    @property
    def support(self):
        return constraints.interval(self.low, self.high)

    mean = property(lambda self: (self.high + self.low) / 2)
    mode = property(lambda self: ember.full_like(self.high, float("nan")))
    stddev = property(lambda self: (self.high - self.low) / 12 ** 0.5)
    variance = property(lambda self: (self.high - self.low).pow(2) / 12)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        rand = ember.rand(shape, dtype=self.low.dtype, device=self.low.device)
        return self.low + rand * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lb = self.low.le(value).to(self.low.dtype)
        ub = self.high.gt(value).to(self.low.dtype)
        return ember.log(lb * ub) - ember.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return ember.log(self.high - self.low)


class Laplace(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Laplace, batch_shape, ("loc", "scale"), _instance)

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)
    variance = property(lambda self: 2 * self.scale.pow(2))
    stddev = property(lambda self: (2 ** 0.5) * self.scale)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = ember.finfo(self.loc.dtype).eps
        u = ember.rand(shape, dtype=self.loc.dtype, device=self.loc.device) * (2 - eps) \
            + (eps - 1)                                           # uniform on (eps - 1, 1)
        return self.loc - self.scale * u.sign() * ember.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -ember.log(2 * self.scale) - ember.abs(value - self.loc) / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * ember.expm1(
            -(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * ember.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + ember.log(2 * self.scale)


class Exponential(Distribution):
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Exponential, batch_shape, ("rate",), _instance)

    mean = property(lambda self: self.rate.reciprocal())
    mode = property(lambda self: ember.zeros_like(self.rate))
    stddev = property(lambda self: self.rate.reciprocal())
    variance = property(lambda self: self.rate.pow(-2))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = ember.rand(shape, dtype=self.rate.dtype, device=self.rate.device)
        tiny = ember.finfo(self.rate.dtype).tiny
        return -ember.log((1 - u).clamp(min=tiny)) / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - ember.exp(-self.rate * value)

    def icdf(self, value):
        return -ember.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - ember.log(self.rate)


class Gamma(Distribution):
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Gamma, batch_shape, ("concentration", "rate"), _instance)

    mean = property(lambda self: self.concentration / self.rate)
    mode = property(lambda self: ((self.concentration - 1) / self.rate).clamp(min=0))
    variance = property(lambda self: self.concentration / self.rate.pow(2))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        _needs_concentration_grad("Gamma", self.concentration)
        value = _standard_gamma(self.concentration.detach().expand(shape)) / self.rate.expand(
            shape)
        return value.clamp(min=ember.finfo(value.dtype).tiny)

    def log_prob(self, value):
        value = ember.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        c, r = self.concentration, self.rate
        return ember.xlogy(c, r) + ember.xlogy(c - 1, value) - r * value - ember.lgamma(c)

    def entropy(self):
        c = self.concentration
        return c - ember.log(self.rate) + ember.lgamma(c) + (1.0 - c) * ember.digamma(c)


class Dirichlet(Distribution):
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        shape = concentration.shape
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Dirichlet, batch_shape, ("concentration",), _instance)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        _needs_concentration_grad("Dirichlet", self.concentration)
        g = _standard_gamma(self.concentration.detach().expand(shape))
        return g / g.sum(-1, keepdim=True)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return (ember.xlogy(c - 1.0, value).sum(-1) + ember.lgamma(c.sum(-1))
                - ember.lgamma(c).sum(-1))

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        cm1 = (self.concentration - 1).clamp(min=0.0)
        return cm1 / cm1.sum(-1, keepdim=True)

    @property
    def variance(self):
        con0 = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def entropy(self):
        c = self.concentration
        k = c.size(-1)
        a0 = c.sum(-1)
        return (ember.lgamma(c).sum(-1) - ember.lgamma(a0) - (k - a0) * ember.digamma(a0)
                - ((c - 1.0) * ember.digamma(c)).sum(-1))


class Beta(Distribution):
    """Beta(concentration1, concentration0) on [0, 1]; through a two-component Dirichlet."""
    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        c1, c0 = broadcast_all(concentration1, concentration0)
        self._dirichlet = Dirichlet(ember.stack([c1, c0], -1), validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Beta, _instance)
        new._dirichlet = self._dirichlet.expand(batch_shape)
        Distribution.__init__(new, ember.Size(batch_shape), validate_args=False)
        new._validate_args = self._validate_args
        return new

    concentration1 = property(lambda self: self._dirichlet.concentration[..., 0])
    concentration0 = property(lambda self: self._dirichlet.concentration[..., 1])

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        heads_tails = ember.stack([value, 1.0 - value], -1)
        return self._dirichlet.log_prob(heads_tails)

    def entropy(self):
        return self._dirichlet.entropy()
