"""DTensor as a container: a local tensor, its mesh, one placement per mesh dim and the global
shape; distribute_tensor, from_local, to_local, full_tensor, redistribute.

Redistribution plan (correct, not minimal): for mesh dims whose placement changes, last dim
first, bring Shard/Partial to Replicate (all_gather / all_reduce in that dim's group); then, first
dim first, Replicate to the target (take this rank's chunk, or keep the value on one rank for a
Partial sum). Nested shards of one tensor dim therefore come apart and go together in order.
"""
from __future__ import annotations

import ember

from .. import _collectives as C
from .._types import ReduceOp
from ._placements import Partial, Replicate, Shard, shard_sizes

__all__ = ["DTensor", "distribute_tensor"]

_OPS = {"sum": ReduceOp.SUM, "avg": ReduceOp.AVG, "max": ReduceOp.MAX, "min": ReduceOp.MIN,
        "product": ReduceOp.PRODUCT}


def _norm(placements, mesh, ndim):
    ps = [Replicate()] * mesh.ndim if placements is None else list(placements)
    if len(ps) != mesh.ndim:
        raise ValueError(f"`placements` must have the same length as `device_mesh.ndim`! Found "
                         f"placements length: {len(ps)}, and device_mesh.ndim: {mesh.ndim}.")
    for i, p in enumerate(ps):
        if isinstance(p, Shard) and p.dim < 0:
            ps[i] = Shard(p.dim + ndim)
    return tuple(ps)


def _chunk(t, dim, parts, index):
    sizes = shard_sizes(t.shape[dim], parts)
    start = sum(sizes[:index])
    return t.narrow(dim, start, sizes[index]).contiguous()


def _gather(t, dim, group):
    """Concatenate the group's pieces of t along dim (pieces may differ in size there)."""
    n = C._resolve(group).size()
    size = ember.tensor([t.shape[dim]], dtype=ember.int64)
    sizes = [ember.zeros(1, dtype=ember.int64) for _ in range(n)]
    C.all_gather(sizes, size, group=group)
    moved = t.movedim(dim, 0).contiguous()
    outs = [ember.empty((int(s.item()), *moved.shape[1:]), dtype=t.dtype, device=t.device)
            for s in sizes]
    C.all_gather(outs, moved, group=group)
    return ember.cat(outs, 0).movedim(0, dim)


def _to_replicate(t, p, mesh, m):
    g = mesh.get_group(m)
    if isinstance(p, Shard):
        return _gather(t, p.dim, g)
    if isinstance(p, Partial):
        t = t.clone()
        C.all_reduce(t, _OPS[p.reduce_op], group=g)
    return t


def _from_replicate(t, p, mesh, m):
    if isinstance(p, Shard):
        return _chunk(t, p.dim, mesh.size(m), mesh.get_local_rank(m))
    if isinstance(p, Partial) and p.reduce_op == "sum" and mesh.get_local_rank(m) != 0:
        return ember.zeros_like(t)
    return t


def _plan(cur, tgt) -> list[int]:
    """Mesh dims to take apart and rebuild: those whose placement changes, plus any later dim
    that shards a tensor dim one of them shards (a nested shard comes apart with its parent)."""
    todo = {m for m in range(len(cur)) if cur[m] != tgt[m]}
    grew = True
    while grew:
        grew = False
        for m2 in range(len(cur)):
            if m2 in todo or not isinstance(cur[m2], Shard):
                continue
            d = cur[m2].dim
            if any(m < m2 and (Shard(d) in (cur[m], tgt[m])) for m in todo):
                todo.add(m2)
                grew = True
    return sorted(todo)


class DTensor:
    """A tensor spread over a DeviceMesh (torch.distributed.tensor.DTensor's data model)."""

    def __init__(self, local_tensor, device_mesh, placements, shape, requires_grad=False):
        self._local_tensor = local_tensor
        self.device_mesh = device_mesh
        self.placements = tuple(placements)
        self._shape = ember.Size(shape)

    # ---- construction -------------------------------------------------------------------
    @staticmethod
    def from_local(local_tensor, device_mesh=None, placements=None, *, run_check=False,
                   shape=None, stride=None) -> DTensor:
        """Wrap each rank's local piece; the global shape assumes even shards unless given."""
        from .._device_mesh import DeviceMesh
        if not isinstance(device_mesh, DeviceMesh):
            raise TypeError("DTensor.from_local: device_mesh must be a DeviceMesh")
        ps = _norm(placements, device_mesh, local_tensor.dim())
        if shape is None:
            shape = list(local_tensor.shape)
            for m, p in enumerate(ps):
                if isinstance(p, Shard):
                    shape[p.dim] *= device_mesh.size(m)
        return DTensor(local_tensor, device_mesh, ps, tuple(shape))

    # ---- queries ------------------------------------------------------------------------
    @property
    def shape(self):
        return self._shape

    def size(self, dim=None):
        return self._shape if dim is None else self._shape[dim]

    @property
    def dtype(self):
        return self._local_tensor.dtype

    @property
    def device(self):
        return self._local_tensor.device

    def dim(self) -> int:
        return len(self._shape)

    ndim = property(dim)

    def to_local(self, *, grad_placements=None):
        return self._local_tensor

    def __repr__(self):
        return (f"DTensor(local_tensor={self._local_tensor}, device_mesh={self.device_mesh}, "
                f"placements={self.placements})")

    # ---- movement -----------------------------------------------------------------------
    def redistribute(self, device_mesh=None, placements=None, *, async_op=False) -> DTensor:
        mesh = device_mesh or self.device_mesh
        if mesh is not self.device_mesh and mesh.shape != self.device_mesh.shape:
            raise NotImplementedError("redistribute: moving to another mesh is not supported")
        cur, tgt = self.placements, _norm(placements, mesh, self.dim())
        t = self._local_tensor
        changed = _plan(cur, tgt)
        for m in reversed(changed):
            t = _to_replicate(t, cur[m], mesh, m)
        for m in changed:
            t = _from_replicate(t, tgt[m], mesh, m)
        return DTensor(t, mesh, tgt, self._shape)

    def full_tensor(self, *, grad_placements=None):
        """The whole tensor on every rank."""
        return self.redistribute(placements=[Replicate()] * self.device_mesh.ndim).to_local()


def distribute_tensor(tensor, device_mesh=None, placements=None, *, src_data_rank=0) -> DTensor:
    """Spread a tensor that every rank holds (rank src_data_rank's values win) over the mesh."""
    from .._device_mesh import init_device_mesh
    mesh = device_mesh or init_device_mesh("cpu", (C._resolve(None).size(),))
    ps = _norm(placements, mesh, tensor.dim())
    t = tensor.detach().clone().contiguous()
    if src_data_rank is not None:
        C.broadcast(t, src=src_data_rank)
    for m, p in enumerate(ps):
        t = _from_replicate(t, p, mesh, m)
    return DTensor(t, mesh, ps, tuple(tensor.shape))
