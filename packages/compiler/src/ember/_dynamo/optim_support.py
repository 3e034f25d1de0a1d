"""Capturing `optimizer.step()`: ember.optim's steps are interpreted like user code, except for
a few helpers replaced while capturing (as PyTorch's capturable path does): the numpy fused
updates are off (the graph must see every op), the step counter is incremented by an op, and
the step count stays a 0-d tensor, so bias corrections are graph ops and one graph serves
every step instead of one per step value."""
from __future__ import annotations

import sys

from .tracer import V

__all__ = ["substitute"]

_TABLE: dict = {}


def _false(frame, args, kwargs):
    return V(False)


def _none(frame, args, kwargs):
    return V(None)


def _inc_step(frame, args, kwargs):
    return frame.tr.call_library(lambda t: t.add_(1), args, {}, "optimizer step += 1",
                                 trusted=True)


def _get_value(frame, args, kwargs):
    from ember._subclasses.fake_tensor import FakeTensor
    if isinstance(args[0].val, FakeTensor):
        return args[0]          # the tensor itself: what follows computes on it
    return args[0]


def substitute(fn):
    """The capture-time handler `(frame, args, kwargs) -> V` standing in for fn, or None."""
    if not _TABLE and "ember.optim" in sys.modules:
        from ember.optim import _foreach, adam, optimizer
        _TABLE.update({adam._fusable: _false, adam._accel: _none, _foreach.backend_foreach: _none,
                       optimizer._inc_step: _inc_step, optimizer._get_value: _get_value})
        for name in ("sgd", "rmsprop", "adadelta"):
            mod = sys.modules.get(f"ember.optim.{name}")
            for helper in ("_fusable", "_accel"):
                f = getattr(mod, helper, None) if mod is not None else None
                if f is not None and f not in _TABLE:
                    _TABLE[f] = _false if helper == "_fusable" else _none
    try:
        return _TABLE.get(fn)
    except TypeError:
        return None
