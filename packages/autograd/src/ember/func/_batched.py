"""vmap's batched tensors and its dispatch mode: one `VmapLevel` per vmap call.

A `BatchedTensor` shows the per-sample (logical) shape and holds the physical tensor with the
batch dimension somewhere (`bdim`). While a level is on the dispatcher's mode stack every op call
reaches `VmapLevel.__ember_dispatch__`, which moves the batch dims of this level's tensors to the
front and runs the op's batching rule (`_rules.py`) on the physical tensors; the rule's calls go
further down the stack (outer vmap levels, autograd, the kernel), so levels nest.
"""
from __future__ import annotations

import itertools

from ember import _dispatch
from ember._size import contiguous_strides
from ember._state import state
from ember._tensor import Tensor

__all__ = ["BatchedTensor", "VmapLevel", "is_batched_at", "unwrap_to_front", "active_levels"]

_levels = itertools.count(1)
_DATA_MSG = ("vmap: It looks like you're calling .item() on a Tensor (or reading its values). "
             "We don't support vmap over calling .item() on a Tensor, please try to rewrite what "
             "you're doing with other operations.")


class BatchedTensor(Tensor):
    """A per-sample view of a physical tensor batched at `bdim` for vmap level `level`."""

    @classmethod
    def wrap(cls, phys: Tensor, bdim: int, level: VmapLevel) -> BatchedTensor:
        shape = tuple(phys.shape)
        logical = shape[:bdim] + shape[bdim + 1:]
        t = cls._make(None, logical, contiguous_strides(logical), 0, phys.dtype, phys.device)
        t._phys = phys
        t._bdim = bdim
        t._level = level
        if phys.requires_grad:
            t._requires_grad = True
        return t

    @property
    def _np(self):
        raise RuntimeError(_DATA_MSG)

    @property
    def _storage(self):
        raise RuntimeError(_DATA_MSG)

    def _host(self):
        raise RuntimeError(_DATA_MSG)

    def data_ptr(self) -> int:
        raise RuntimeError(_DATA_MSG)

    def __repr__(self, *, tensor_contents=None) -> str:
        return (f"BatchedTensor(lvl={self._level.depth}, bdim={self._bdim}, "
                f"value={self._phys!r})")


def is_batched_at(x, level) -> bool:
    return isinstance(x, BatchedTensor) and x._level is level


def to_front(x: BatchedTensor) -> Tensor:
    """The physical tensor with this level's batch dim first."""
    p = x._phys
    return p if x._bdim == 0 else p.movedim(x._bdim, 0)


def active_levels() -> list:
    return [m for m in state.modes if isinstance(m, VmapLevel)]


class VmapLevel(_dispatch.DispatchMode):
    """One vmap call's batching mode: batch size, randomness mode and depth (1 = outermost)."""

    def __init__(self, size: int, randomness: str = "error"):
        self.size = size
        self.randomness = randomness
        self.id = next(_levels)
        self.depth = len(active_levels()) + 1

    def __ember_dispatch__(self, op, args, out):
        from ._rules import run_rule
        batched = False
        for i in op.tensor_idx:
            if is_batched_at(args[i], self):
                batched = True
                break
        else:
            for i in op.list_idx:
                if any(is_batched_at(a, self) for a in args[i]):
                    batched = True
                    break
        if not batched and "random" not in op.tags:
            return _dispatch.call(op, args, out)
        result = run_rule(self, op, args)
        if out is not None:
            return _write_out(result, out)
        return result

    def wrap(self, r):
        """Physical results (batch dim first) -> this level's BatchedTensors."""
        if isinstance(r, Tensor):
            return BatchedTensor.wrap(r, 0, self)
        if isinstance(r, tuple):
            vals = [self.wrap(x) for x in r]
            return type(r)(*vals) if hasattr(r, "_fields") else tuple(vals)
        if isinstance(r, list):
            return [self.wrap(x) for x in r]
        return r


def _write_out(result, out):
    if isinstance(result, (tuple, list)):
        for r, o in zip(result, out):
            _write_out(r, o)
        return out
    out.copy_(result)
    return out


def unwrap_to_front(x, levels):
    """A tensor seen at the innermost of `levels` -> the plain tensor with one leading dim per
    level (outermost first), expanding where x is not batched at a level."""
    for lv in reversed(levels):
        with suspended(lv):
            if is_batched_at(x, lv):
                x = to_front(x)
            else:
                x = x.unsqueeze(0).expand((lv.size,) + tuple(x.shape))
    return x


def rewrap(x, levels):
    """The inverse of unwrap_to_front: leading dims (outermost first) -> BatchedTensors."""
    for lv in levels:
        x = BatchedTensor.wrap(x, 0, lv)
    return x


class suspended:
    """Run with `level` and every mode above it off the stack (ops then see its physical
    tensors as plain tensors of the levels below)."""

    def __init__(self, level):
        self.level = level

    def __enter__(self):
        modes = state.modes
        k = modes.index(self.level)
        self.saved = modes[k:]
        del modes[k:]

    def __exit__(self, *exc):
        state.modes.extend(self.saved)
