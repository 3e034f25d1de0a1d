"""loss_parallel: cross-entropy on logits sharded on the class dim without gathering them
(torch.distributed.tensor.parallel.loss_parallel).

Inside the context, log_softmax over a sharded dim and nll_loss on log-probabilities sharded on
the class dim run as reductions over the shards (max, sum of exp, the target's entry picked by a
one-hot mask): only (N,)-sized values are communicated, forward and backward. Outside it the same
calls are still correct but gather the logits first.

>>> # with loss_parallel():
>>> #     loss = F.cross_entropy(logits_sharded_on_classes, labels); loss.backward()
"""
from __future__ import annotations

from contextlib import contextmanager

import ember

from .._dispatch import DECOMPS
from .._placements import Shard

__all__ = ["loss_parallel"]

_ON = [0]
_MEAN, _SUM = 1, 2


@contextmanager
def loss_parallel():
    """Within the block, cross_entropy / log_softmax / nll_loss keep class-sharded DTensors
    sharded."""
    _ON[0] += 1
    try:
        yield
    finally:
        _ON[0] -= 1


def _sharded_on(x, dim) -> bool:
    return _ON[0] > 0 and getattr(x, "placements", None) is not None and any(
        isinstance(p, Shard) and p.dim == dim % x.dim() for p in x.placements)


def _log_softmax(x, dim, dtype=None):
    if not _sharded_on(x, dim):
        return NotImplemented
    if dtype is not None:
        x = x.to(dtype)
    z = x - x.amax(dim, keepdim=True)           # a Partial max, reduced for the subtraction
    return z - z.exp().sum(dim, keepdim=True).log()


def _target_weights(target, weight, ignore_index):
    t = target.full_tensor() if hasattr(target, "full_tensor") else target
    keep = t != ignore_index
    safe = ember.where(keep, t, ember.zeros_like(t))
    w = keep.to(ember.float32) if weight is None else (
        (weight.full_tensor() if hasattr(weight, "full_tensor") else weight)[safe] * keep)
    return safe, w


def _onehot(x, safe, cdim):
    # a plain (N, C) mask: inside a DTensor decomposition it counts as Replicate and each rank
    # keeps its class columns
    oh = ember.nn.functional.one_hot(safe, x.shape[cdim]).to(x.dtype)
    return oh if cdim == x.dim() - 1 else oh.movedim(-1, cdim)


def _nll_forward(x, target, weight, reduction, ignore_index):
    cdim = 1 if x.dim() >= 2 else 0
    if not _sharded_on(x, cdim) or x.dim() > 2:
        return NotImplemented
    safe, w = _target_weights(target, weight, ignore_index)
    w = w.to(x.dtype)
    picked = (x * _onehot(x, safe, cdim)).sum(cdim)  # (N,): Partial over the class shards
    losses = -picked * w
    total = w.sum()
    if reduction == _MEAN:
        return losses.sum() / total, total
    if reduction == _SUM:
        return losses.sum(), total
    return losses, total


def _nll_backward(g, x, target, weight, reduction, ignore_index, total_weight):
    cdim = 1 if x.dim() >= 2 else 0
    if not _sharded_on(x, cdim) or x.dim() > 2:
        return NotImplemented
    safe, w = _target_weights(target, weight, ignore_index)
    coef = w.to(x.dtype)
    if reduction == _MEAN:
        coef = coef / (total_weight.full_tensor() if hasattr(total_weight, "full_tensor")
                       else total_weight)
    coef = coef * g if reduction not in (_MEAN, _SUM) else coef * g.reshape(())
    if x.dim() == 2:
        coef = coef.unsqueeze(1)
    return -(_onehot(x, safe, cdim) * coef)


DECOMPS["log_softmax"] = _log_softmax
DECOMPS["nll_loss_forward"] = _nll_forward
DECOMPS["nll_loss_backward"] = _nll_backward
