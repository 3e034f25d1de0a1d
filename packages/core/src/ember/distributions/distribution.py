"""`Distribution`: batch and event shapes, argument validation against `arg_constraints`,
`sample` / `rsample` / `log_prob` / `entropy` / moments, as torch.distributions.Distribution."""
from __future__ import annotations

import ember

from . import constraints
from .utils import lazy_property

__all__ = ["Distribution"]


def _all_true(valid) -> bool:
    return bool(valid.all()) if isinstance(valid, ember.Tensor) else bool(valid)


class Distribution:
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__
    arg_constraints: dict = {}
    support = None

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = ember.Size(batch_shape)
        self._event_shape = ember.Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None),
                                                              lazy_property):
                    continue
                value = getattr(self, param)
                if not _all_true(constraint.check(value)):
                    raise ValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        raise NotImplementedError

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        with ember.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError

    def sample_n(self, n: int):
        return self.sample(ember.Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return ember.exp(self.entropy())

    def _extended_shape(self, sample_shape=()):
        return ember.Size(tuple(sample_shape)) + self._batch_shape + self._event_shape

    def _validate_sample(self, value) -> None:
        if not isinstance(value, ember.Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        start = value.dim() - len(self._event_shape)
        if tuple(value.shape[start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{value.size()} vs {self._event_shape}.")
        actual, expected = value.size(), self._batch_shape + self._event_shape
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{actual} vs {expected}.")
        if not _all_true(self.support.check(value)):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape "
                             f"{tuple(value.shape)}) to be within the support "
                             f"({self.support!r}) of the distribution {self!r}, but found "
                             f"invalid values:\n{value}")

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(f"Subclass {self.__class__.__name__} of {cls.__name__} "
                                      "that defines a custom __init__ method must also define "
                                      "a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
            for p in names)
        return self.__class__.__name__ + "(" + args + ")"
