"""Helpers shared by the distributions (torch.distributions.utils)."""
from __future__ import annotations

import functools
import numbers

import ember

__all__ = ["broadcast_all", "logits_to_probs", "probs_to_logits", "clamp_probs",
           "lazy_property", "sum_rightmost", "sample_seed"]


def broadcast_all(*values):
    """Tensors (numbers become tensors of the default dtype) broadcast to one shape."""
    if not all(isinstance(v, (ember.Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, "
                         "torch.Tensor or objects implementing __torch_function__.")
    if not all(isinstance(v, ember.Tensor) for v in values):
        like = next((v for v in values if isinstance(v, ember.Tensor)), None)
        dtype = like.dtype if like is not None else ember.get_default_dtype()
        values = [v if isinstance(v, ember.Tensor) else ember.tensor(v, dtype=dtype)
                  for v in values]
    return ember.broadcast_tensors(*values)


def clamp_probs(probs):
    eps = ember.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary: bool = False):
    return ember.sigmoid(logits) if is_binary else ember.softmax(logits, dim=-1)


def probs_to_logits(probs, is_binary: bool = False):
    ps = clamp_probs(probs)
    if is_binary:
        return ember.log(ps) - ember.log1p(-ps)
    return ember.log(ps)


def sum_rightmost(value, dim: int):
    """Sum out the rightmost `dim` dims."""
    if dim == 0:
        return value
    return value.reshape(value.shape[:value.dim() - dim] + (-1,)).sum(-1)


class lazy_property:
    """A property computed once per instance on first access (then stored on it)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        functools.update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def sample_seed() -> int:
    """A seed drawn from ember's generator, for samplers that run in numpy (gamma, binomial):
    ember.manual_seed makes them reproducible."""
    return int(ember.randint(0, 2 ** 62, (1,)).item())
