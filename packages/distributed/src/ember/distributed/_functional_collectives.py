"""Functional collectives (torch.distributed._functional_collectives): they return new tensors
and leave their inputs alone. `group` is a ProcessGroup, a list of ranks, a DeviceMesh or
(mesh, dim). They run eagerly (wait included); ember.compile does not trace them yet."""
from __future__ import annotations

import ember

from . import _collectives as C
from ._types import ReduceOp

__all__ = ["all_reduce", "all_gather_tensor", "reduce_scatter_tensor", "all_to_all_single",
           "broadcast", "wait_tensor", "all_reduce_coalesced", "all_gather_into_tensor_coalesced"]


def _op(op):
    if isinstance(op, str):
        return getattr(ReduceOp, op.upper())
    return op


def _pg(group):
    from ._device_mesh import DeviceMesh
    from ._group import _W, _resolve
    if isinstance(group, tuple) and len(group) == 2 and isinstance(group[0], DeviceMesh):
        return group[0].get_group(group[1])
    if isinstance(group, DeviceMesh):
        if group.ndim != 1:
            raise ValueError("functional collectives: a DeviceMesh group must be 1-D (or pass "
                             "(mesh, dim))")
        return group.get_group(0)
    if isinstance(group, (list, tuple)):
        ranks = sorted(group)
        for g in _W.groups:
            if g.ranks == ranks:
                return g
        raise ValueError(f"functional collectives: no existing group has ranks {ranks}; make "
                         "one with new_group first")
    return _resolve(group)


def wait_tensor(tensor):
    """Results are already complete here: returns `tensor`."""
    return tensor


def all_reduce(self, reduceOp, group, tag: str = ""):
    out = self.clone()
    C.all_reduce(out, _op(reduceOp), group=_pg(group))
    return out


def all_gather_tensor(self, gather_dim: int, group, tag: str = ""):
    pg = _pg(group)
    x = self.contiguous()
    out = ember.empty((pg.size() * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
    C.all_gather_into_tensor(out, x, group=pg)
    if gather_dim % max(x.dim(), 1) != 0:
        out = ember.cat(out.chunk(pg.size()), dim=gather_dim)
    return out


def reduce_scatter_tensor(self, reduceOp, scatter_dim: int, group, tag: str = ""):
    pg = _pg(group)
    x = self
    if scatter_dim % max(x.dim(), 1) != 0:
        x = ember.cat(x.chunk(pg.size(), dim=scatter_dim), dim=0)
    x = x.contiguous()
    out = ember.empty((x.shape[0] // pg.size(), *x.shape[1:]), dtype=x.dtype, device=x.device)
    C.reduce_scatter_tensor(out, x, _op(reduceOp), group=pg)
    return out


def all_to_all_single(self, output_split_sizes, input_split_sizes, group, tag: str = ""):
    pg = _pg(group)
    rows = sum(output_split_sizes) if output_split_sizes else self.shape[0]
    out = ember.empty((rows, *self.shape[1:]), dtype=self.dtype, device=self.device)
    C.all_to_all_single(out, self.contiguous(), output_split_sizes, input_split_sizes, group=pg)
    return out


def broadcast(self, src: int, group, tag: str = ""):
    out = self.clone()
    C.broadcast(out, src=src, group=_pg(group))
    return out


def all_reduce_coalesced(self, reduceOp, group, tag: str = ""):
    return [all_reduce(t, reduceOp, group) for t in self]


def all_gather_into_tensor_coalesced(self, group, tag: str = ""):
    return [all_gather_tensor(t, 0, group) for t in self]
