"""MultivariateNormal and Independent."""
from __future__ import annotations

import math

import ember

from . import constraints
from .distribution import Distribution
from .utils import lazy_property, sum_rightmost

__all__ = ["MultivariateNormal", "Independent"]


def _batch_mahalanobis(bL, bx):
    """|L^{-1} x|^2 over the last dim, L lower-triangular (broadcast over batches)."""
    shape = ember.broadcast_shapes(bL.shape[:-2], bx.shape[:-1])
    L = bL.expand(shape + bL.shape[-2:])
    x = bx.expand(shape + bx.shape[-1:])
    sol = ember.linalg.solve_triangular(L, x.unsqueeze(-1), upper=False).squeeze(-1)
    return sol.pow(2).sum(-1)


class MultivariateNormal(Distribution):
    """N(loc, Sigma) with Sigma given as covariance_matrix, precision_matrix or scale_tril."""
    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + \
                (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        given = next(m for m in (scale_tril, covariance_matrix, precision_matrix)
                     if m is not None)
        if given.dim() < 2:
            raise ValueError("scale_tril matrix must be at least two-dimensional, with "
                             "optional leading batch dimensions"
                             if scale_tril is not None else
                             "covariance_matrix must be at least two-dimensional, with "
                             "optional leading batch dimensions"
                             if covariance_matrix is not None else
                             "precision_matrix must be at least two-dimensional, with "
                             "optional leading batch dimensions")
        batch_shape = ember.broadcast_shapes(given.shape[:-2], loc.shape[:-1])
        mat_shape = batch_shape + given.shape[-2:]
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(mat_shape)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(mat_shape)
        else:
            self.precision_matrix = precision_matrix.expand(mat_shape)
        self.loc = loc.expand(batch_shape + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = ember.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = ember.linalg.cholesky(
                ember.linalg.inv(precision_matrix))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = ember.Size(batch_shape)
        new.loc = self.loc.expand(batch_shape + self._event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        mat = batch_shape + self._event_shape + self._event_shape
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(mat))
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._batch_shape + self._event_shape
                                                     + self._event_shape)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._batch_shape + self._event_shape + self._event_shape)

    @lazy_property
    def precision_matrix(self):
        return ember.linalg.inv(self.covariance_matrix)

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(
            self._batch_shape + self._event_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = ember.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        k = self._event_shape[0]
        return -0.5 * (k * math.log(2 * math.pi) + M) - self._half_log_det()

    def entropy(self):
        k = self._event_shape[0]
        H = 0.5 * k * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return H.expand(self._batch_shape) if len(self._batch_shape) else H


class Independent(Distribution):
    """Reinterprets the rightmost `reinterpreted_batch_ndims` batch dims of `base_distribution`
    as event dims (log_prob and entropy sum over them)."""
    arg_constraints: dict = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims: int, validate_args=None):
        if reinterpreted_batch_ndims > len(base_distribution.batch_shape):
            raise ValueError("Expected reinterpreted_batch_ndims <= len(base_distribution."
                             f"batch_shape), actual {reinterpreted_batch_ndims} vs "
                             f"{len(base_distribution.batch_shape)}")
        shape = base_distribution.batch_shape + base_distribution.event_shape
        event_dim = reinterpreted_batch_ndims + len(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Independent, _instance)
        batch_shape = ember.Size(batch_shape)
        new.base_dist = self.base_dist.expand(
            batch_shape + self._event_shape[:self.reinterpreted_batch_ndims])
        new.reinterpreted_batch_ndims = self.reinterpreted_batch_ndims
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    has_rsample = property(lambda self: self.base_dist.has_rsample)

    @property
    def has_enumerate_support(self):
        return False if self.reinterpreted_batch_ndims > 0 else \
            self.base_dist.has_enumerate_support

    @property
    def support(self):
        result = self.base_dist.support
        if self.reinterpreted_batch_ndims:
            result = constraints.independent(result, self.reinterpreted_batch_ndims)
        return result

    mean = property(lambda self: self.base_dist.mean)
    mode = property(lambda self: self.base_dist.mode)
    variance = property(lambda self: self.base_dist.variance)

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return (f"{self.__class__.__name__}({self.base_dist}, "
                f"{self.reinterpreted_batch_ndims})")
