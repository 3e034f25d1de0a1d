"""TransformedDistribution (a base distribution pushed through transforms) and LogNormal."""
from __future__ import annotations

import ember

from . import constraints
from .continuous import Normal
from .distribution import Distribution
from .multivariate import Independent
from .transforms import ComposeTransform, ExpTransform, Transform
from .utils import sum_rightmost

__all__ = ["TransformedDistribution", "LogNormal"]


class TransformedDistribution(Distribution):
    """X ~ base_distribution, Y = transforms[-1](...transforms[0](X)); log_prob by the change
    of variables formula."""
    arg_constraints: dict = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            self.transforms = [transforms]
        elif isinstance(transforms, list):
            if not all(isinstance(t, Transform) for t in transforms):
                raise ValueError("transforms must be a Transform or a list of Transforms")
            self.transforms = transforms
        else:
            raise ValueError(f"transforms must be a Transform or list, but was {transforms}")
        base_shape = base_distribution.batch_shape + base_distribution.event_shape
        base_event_dim = len(base_distribution.event_shape)
        transform = ComposeTransform(self.transforms)
        domain_event_dim = transform.domain.event_dim
        if len(base_shape) < domain_event_dim:
            raise ValueError(f"base_distribution needs to have shape with size at least "
                             f"{domain_event_dim}, but got {base_shape}.")
        reinterpreted = domain_event_dim - base_event_dim
        if reinterpreted > 0:
            base_distribution = Independent(base_distribution, reinterpreted)
        self.base_dist = base_distribution
        forward_shape = ember.Size(transform.forward_shape(tuple(base_shape)))
        event_dim = transform.codomain.event_dim + max(base_event_dim - domain_event_dim, 0)
        cut = len(forward_shape) - event_dim
        super().__init__(forward_shape[:cut], forward_shape[cut:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(TransformedDistribution, _instance)
        batch_shape = ember.Size(batch_shape)
        shape = batch_shape + self.event_shape
        for t in reversed(self.transforms):
            shape = ember.Size(t.inverse_shape(tuple(shape)))
        base_batch = shape[:len(shape) - len(self.base_dist.event_shape)]
        new.base_dist = self.base_dist.expand(base_batch)
        new.transforms = self.transforms
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def support(self):
        if not self.transforms:
            return self.base_dist.support
        support = self.transforms[-1].codomain
        if len(self.event_shape) > support.event_dim:
            support = constraints.independent(support, len(self.event_shape)
                                              - support.event_dim)
        return support

    has_rsample = property(lambda self: self.base_dist.has_rsample)

    def sample(self, sample_shape=()):
        with ember.no_grad():
            x = self.base_dist.sample(sample_shape)
            for t in self.transforms:
                x = t(x)
            return x

    def rsample(self, sample_shape=()):
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self.event_shape)
        log_prob = 0.0
        y = value
        for t in reversed(self.transforms):
            x = t.inv(y)
            event_dim += t.domain.event_dim - t.codomain.event_dim
            log_prob = log_prob - sum_rightmost(t.log_abs_det_jacobian(x, y),
                                                event_dim - t.domain.event_dim)
            y = x
        return log_prob + sum_rightmost(self.base_dist.log_prob(y),
                                        event_dim - len(self.base_dist.event_shape))

    def _monotone_sign(self):
        sign = 1
        for t in self.transforms:
            sign = sign * t.sign
        if isinstance(sign, int) and sign == 1:
            return 1
        if isinstance(sign, int):
            return sign
        raise NotImplementedError("cdf with transforms of unknown sign")

    def cdf(self, value):
        for t in self.transforms[::-1]:
            value = t.inv(value)
        value = self.base_dist.cdf(value)
        return value if self._monotone_sign() == 1 else 1 - value

    def icdf(self, value):
        value = value if self._monotone_sign() == 1 else 1 - value
        value = self.base_dist.icdf(value)
        for t in self.transforms:
            value = t(value)
        return value


class LogNormal(TransformedDistribution):
    """exp(Normal(loc, scale))."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        super().__init__(Normal(loc, scale, validate_args=validate_args), ExpTransform(),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    loc = property(lambda self: self.base_dist.loc)
    scale = property(lambda self: self.base_dist.scale)
    mean = property(lambda self: (self.loc + self.scale.pow(2) / 2).exp())
    mode = property(lambda self: (self.loc - self.scale.square()).exp())

    @property
    def variance(self):
        s2 = self.scale.pow(2)
        return s2.expm1() * (2 * self.loc + s2).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc
