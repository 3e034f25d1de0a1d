"""Moving a DTensor's local piece between placements with collectives, and the local shape of a
global shape under placements.

Plan (correct, not minimal): for mesh dims whose placement changes, last dim first, bring
Shard/Partial to Replicate (all_gather / all_reduce in that dim's group); then, first dim first,
Replicate to the target (take this rank's chunk, or keep the value on one rank for a Partial
sum). Nested shards of one tensor dim therefore come apart and go together in order.
"""
from __future__ import annotations

import ember

from .. import _collectives as C
from .._types import ReduceOp
from ._placements import Partial, Replicate, Shard, _StridedShard, shard_sizes

__all__ = ["normalize_placements", "redistribute_local", "local_shape", "local_offsets"]

_OPS = {"sum": ReduceOp.SUM, "avg": ReduceOp.AVG, "max": ReduceOp.MAX, "min": ReduceOp.MIN,
        "product": ReduceOp.PRODUCT}


def normalize_placements(placements, mesh, ndim) -> tuple:
    """One placement per mesh dim (default Replicate), Shard dims made non-negative."""
    ps = [Replicate()] * mesh.ndim if placements is None else list(placements)
    if len(ps) != mesh.ndim:
        raise ValueError(f"`placements` must have the same length as `device_mesh.ndim`! Found "
                         f"placements length: {len(ps)}, and device_mesh.ndim: {mesh.ndim}.")
    for i, p in enumerate(ps):
        if not isinstance(p, (Shard, Replicate, Partial)):
            raise TypeError(f"placements must be Shard, Replicate or Partial, got {p!r}")
        if isinstance(p, Shard):
            if not -ndim <= p.dim < max(ndim, 1):
                raise IndexError(f"Shard(dim={p.dim}) is out of range for a {ndim}-d tensor")
            if p.dim < 0:
                ps[i] = Shard(p.dim + ndim)
    return tuple(ps)


def _order(placements) -> list[int]:
    """Mesh dims in the order their shards apply: in order, _StridedShard ones last."""
    n = len(placements)
    return ([m for m in range(n) if not isinstance(placements[m], _StridedShard)]
            + [m for m in range(n) if isinstance(placements[m], _StridedShard)])


def local_shape(shape, mesh, placements) -> tuple:
    """This rank's piece of a tensor of global `shape` (torch.chunk sizes, mesh dims in order)."""
    s = list(shape)
    coord = mesh.get_coordinate()
    for m in _order(placements):
        p = placements[m]
        if isinstance(p, Shard):
            s[p.dim] = shard_sizes(s[p.dim], mesh.size(m))[coord[m]]
    return tuple(s)


def local_offsets(shape, mesh, placements) -> tuple:
    """Where this rank's piece starts in the global tensor, per tensor dim."""
    s, off = list(shape), [0] * len(shape)
    coord = mesh.get_coordinate()
    for m in _order(placements):
        p = placements[m]
        if isinstance(p, Shard):
            sizes = shard_sizes(s[p.dim], mesh.size(m))
            off[p.dim] += sum(sizes[:coord[m]])
            s[p.dim] = sizes[coord[m]]
    return tuple(off)


def _chunk(t, dim, parts, index):
    sizes = shard_sizes(t.shape[dim], parts)
    start = sum(sizes[:index])
    return t.narrow(dim, start, sizes[index]).contiguous()


def _gather(t, dim, group):
    """Concatenate the group's pieces of t along dim (pieces may differ in size there)."""
    n = C._resolve(group).size()
    # (on t's device: an NCCL-only group has no engine for CPU tensors)
    size = ember.tensor([t.shape[dim]], dtype=ember.int64).to(t.device)
    sizes = [ember.zeros(1, dtype=ember.int64, device=t.device) for _ in range(n)]
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


def _reduce_scatter(t, p, dim, mesh, m):
    """Partial(sum|avg) -> Shard(dim) on mesh dim m in one reduce-scatter (rows padded to equal
    pieces; torch.chunk's sizes after trimming)."""
    n, me = mesh.size(m), mesh.get_local_rank(m)
    moved = t.movedim(dim, 0)
    rows = moved.shape[0]
    c = -(-rows // n) if rows else 0
    if n * c != rows:
        moved = ember.cat([moved, moved.new_zeros((n * c - rows, *moved.shape[1:]))], 0)
    out = ember.empty((c, *moved.shape[1:]), dtype=t.dtype, device=t.device)
    C.reduce_scatter_tensor(out, moved.contiguous(), ReduceOp.SUM, group=mesh.get_group(m))
    out = out[:shard_sizes(rows, n)[me]]
    if p.reduce_op == "avg":
        out = out / n
    return out.movedim(0, dim).contiguous()


def redistribute_local(t, mesh, cur, tgt):
    """The local piece of the same global tensor under placements tgt (t: the piece under cur).
    Runs without recording autograd (the DTensor-level op records it)."""
    strided = any(isinstance(p, _StridedShard) for p in (*cur, *tgt))
    if tuple(cur) == tuple(tgt) and (not strided or [type(p) for p in cur] == [type(p) for p
                                                                           in tgt]):
        return t
    if strided:  # the whole way through Replicate, in the shards' order
        with ember.no_grad():
            for m in reversed(_order(cur)):
                t = _to_replicate(t, cur[m], mesh, m)
            return from_full(t, mesh, tgt)
    changed = _plan(cur, tgt)
    if len(changed) == 1:
        m = changed[0]
        p, q = cur[m], tgt[m]
        if isinstance(p, Partial) and p.reduce_op in ("sum", "avg") and isinstance(q, Shard):
            with ember.no_grad():
                return _reduce_scatter(t, p, q.dim, mesh, m)
    with ember.no_grad():
        for m in reversed(changed):
            t = _to_replicate(t, cur[m], mesh, m)
        for m in changed:
            t = _from_replicate(t, tgt[m], mesh, m)
    return t


def from_full(t, mesh, placements):
    """This rank's piece of t (every rank holds all of t) under placements."""
    with ember.no_grad():
        for m in _order(placements):
            t = _from_replicate(t, placements[m], mesh, m)
    return t
