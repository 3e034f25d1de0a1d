"""Discrete distributions: Bernoulli, Categorical, OneHotCategorical, Poisson, Binomial."""
from __future__ import annotations

import numpy as np

import ember
import ember.nn.functional as F

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits, sample_seed

__all__ = ["Bernoulli", "Categorical", "OneHotCategorical", "Poisson", "Binomial"]


def _one_of(probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


def _expand_lazy(self, cls, batch_shape, _instance, event=()):
    new = self._get_checked_instance(cls, _instance)
    batch_shape = ember.Size(batch_shape)
    shape = batch_shape + ember.Size(event)
    if "probs" in self.__dict__:
        new.probs = self.probs.expand(shape)
        new._param = new.probs
    if "logits" in self.__dict__:
        new.logits = self.logits.expand(shape)
        new._param = new.logits
    return new, batch_shape


class Bernoulli(Distribution):
    """Bernoulli(probs=... | logits=...)."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new, batch_shape = _expand_lazy(self, Bernoulli, batch_shape, _instance)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    mean = property(lambda self: self.probs)
    variance = property(lambda self: self.probs * (1 - self.probs))

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return mode.masked_fill(self.probs == 0.5, float("nan"))

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            return ember.bernoulli(self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand: bool = True):
        values = ember.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


class Categorical(Distribution):
    """Categorical over {0, ..., K-1} from probs (normalized) or logits (log-normalized)."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(
        constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.size()[-1]
        batch = self._param.size()[:-1] if self._param.ndim > 1 else ember.Size()
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new, batch_shape = _expand_lazy(self, type(self), batch_shape, _instance,
                                        (self._num_events,))
        new._num_events = self._num_events
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    param_shape = property(lambda self: self._param.size())
    mean = property(lambda self: ember.full(self._extended_shape(), float("nan"),
                                            dtype=self.probs.dtype))
    mode = property(lambda self: self.probs.argmax(dim=-1))
    variance = mean

    def sample(self, sample_shape=()):
        sample_shape = ember.Size(tuple(sample_shape))
        n = 1
        for s in sample_shape:
            n *= s
        probs_2d = self.probs.reshape(-1, self._num_events)
        with ember.no_grad():
            samples_2d = ember.multinomial(probs_2d, n, True).T
        return samples_2d.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = ember.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        min_real = ember.finfo(self.logits.dtype).min
        logits = ember.clamp(self.logits, min=min_real)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True):
        values = ember.arange(self._num_events, dtype=ember.long, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


class OneHotCategorical(Distribution):
    """Categorical with one-hot vectors as values."""
    arg_constraints = Categorical.arg_constraints
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        p = self._categorical._param
        super().__init__(p.size()[:-1], p.size()[-1:], validate_args=validate_args)

    probs = property(lambda self: self._categorical.probs)
    logits = property(lambda self: self._categorical.logits)
    mean = property(lambda self: self._categorical.probs)
    variance = property(lambda self: self._categorical.probs * (1 - self._categorical.probs))

    def sample(self, sample_shape=()):
        idx = self._categorical.sample(sample_shape)
        return F.one_hot(idx, self._categorical._num_events).to(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.max(-1)[1])

    def entropy(self):
        return self._categorical.entropy()


class Poisson(Distribution):
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Poisson, _instance)
        new.rate = self.rate.expand(ember.Size(batch_shape))
        Distribution.__init__(new, ember.Size(batch_shape), validate_args=False)
        new._validate_args = self._validate_args
        return new

    mean = property(lambda self: self.rate)
    mode = property(lambda self: self.rate.floor())
    variance = property(lambda self: self.rate)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            return ember.poisson(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return ember.xlogy(value, rate) - rate - ember.lgamma(value + 1)


def _clamp_by_zero(x):
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(Distribution):
    """Binomial(total_count, probs=... | logits=...)."""
    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.to(self.probs.dtype)
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.to(self.logits.dtype)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(self._param.size(), validate_args=validate_args)

    @property
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    mean = property(lambda self: self.total_count * self.probs)
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        rng = np.random.default_rng(sample_seed())
        n = self.total_count.detach().expand(shape).cpu().numpy().astype(np.int64)
        p = self.probs.detach().expand(shape).cpu().numpy().astype(np.float64)
        return ember.tensor(rng.binomial(n, p), dtype=self.probs.dtype,
                            device=self.probs.device)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n = self.total_count
        log_factorial_n = ember.lgamma(n + 1)
        log_factorial_k = ember.lgamma(value + 1)
        log_factorial_nmk = ember.lgamma(n - value + 1)
        normalize_term = (n * _clamp_by_zero(self.logits)
                          + n * ember.log1p(ember.exp(-ember.abs(self.logits)))
                          - log_factorial_n)
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term

    def entropy(self):
        total = int(self.total_count.max())
        if not bool((self.total_count == total).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(ember.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True):
        total = int(self.total_count.max())
        if not bool((self.total_count == total).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by "
                                      "`enumerate_support`.")
        values = ember.arange(1 + total, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values
