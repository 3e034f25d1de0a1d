"""Collectives and point-to-point ops on tensors (torch.distributed's functions).

Each call checks its arguments, resolves the group (src/dst are global ranks; group_src/group_dst
are ranks within the group), picks the engine for the tensors' device and returns a Work when
async_op=True, else waits (up to the group's timeout) and returns None.
"""
from __future__ import annotations

import datetime

from ._group import _resolve, get_group_rank
from ._types import GroupMember, P2POp, ReduceOp, Work

__all__ = ["all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
           "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single",
           "gather", "scatter", "send", "recv", "isend", "irecv", "batch_isend_irecv",
           "barrier", "monitored_barrier"]


def _done(w: Work, async_op: bool):
    if async_op:
        return w
    w.wait()
    return None


def _skip(group) -> bool:
    return group is GroupMember.NON_GROUP_MEMBER


def _check_tensor(t, what, name="tensor"):
    from ember import Tensor
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: {name} must be a Tensor, got {type(t).__name__}")


def _group_rank(pg, rank, group_rank, what):
    if group_rank is not None:
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"{what}: group rank {group_rank} is out of range [0, {pg.size()})")
        return group_rank
    if pg is _resolve(None):
        if not 0 <= rank < pg.size():
            raise ValueError(f"{what}: rank {rank} is out of range [0, {pg.size()})")
        return rank
    return get_group_rank(pg, rank)


def _comm_device(group=None) -> str:
    """The device type a group's own traffic (barrier, broadcasts of loaded state) goes over:
    cpu where its MPI engine is up, else cuda (a job with NCCL only, or started without
    mpiexec)."""
    pg = _resolve(group)
    b = pg._device_backends
    return "cpu" if "cpu" in b and (pg._mpi_comm is not None or "cuda" not in b) else "cuda"


def _engine(pg, tensors, what):
    dev = tensors[0].device.type
    for t in tensors:
        if t.device.type != dev:
            raise RuntimeError(f"{what}: tensors must be on one device, got {dev} and "
                               f"{t.device.type}")
    return pg.engine(dev, what, tensors[0].device.index)


def _bump(*tensors):
    for t in tensors:
        if t is not None:
            t._bump()


def _same(tensors, ref, what):
    for t in tensors:
        if t.dtype != ref.dtype:
            raise TypeError(f"{what}: tensors must all have dtype {ref.dtype}, got {t.dtype}")


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `tensor` over all ranks, in place, on every rank."""
    if _skip(group):
        return None
    _check_tensor(tensor, "all_reduce")
    pg = _resolve(group)
    w = _engine(pg, [tensor], "all_reduce").all_reduce(tensor, op)
    _bump(tensor)
    return _done(w, async_op)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Copy `tensor` of rank `src` into `tensor` of every rank."""
    if _skip(group):
        return None
    _check_tensor(tensor, "broadcast")
    pg = _resolve(group)
    s = _group_rank(pg, 0 if src is None else src, group_src, "broadcast")
    w = _engine(pg, [tensor], "broadcast").broadcast(tensor, s)
    _bump(tensor)
    return _done(w, async_op)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduce `tensor` over all ranks into `tensor` of rank `dst`."""
    if _skip(group):
        return None
    _check_tensor(tensor, "reduce")
    pg = _resolve(group)
    d = _group_rank(pg, 0 if dst is None else dst, group_dst, "reduce")
    w = _engine(pg, [tensor], "reduce").reduce(tensor, d, op)
    _bump(tensor)
    return _done(w, async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[i] = rank i's `tensor`, on every rank."""
    if _skip(group):
        return None
    _check_tensor(tensor, "all_gather")
    pg = _resolve(group)
    if len(tensor_list) != pg.size():
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors for a group "
                         f"of {pg.size()}")
    _same(tensor_list, tensor, "all_gather")
    w = _engine(pg, [tensor, *tensor_list], "all_gather").all_gather(list(tensor_list), tensor)
    _bump(*tensor_list)
    return _done(w, async_op)


def _chunks(t, n, what):
    if not t.is_contiguous():
        raise ValueError(f"{what}: tensors must be contiguous")
    if t.numel() % n:
        raise ValueError(f"{what}: a tensor of {t.numel()} elements does not split into {n} "
                         "equal parts")
    return list(t.reshape(n, -1).unbind(0)) if t.numel() else [t.reshape(-1)] * n


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Gather every rank's `input_tensor` into `output_tensor` (concatenated or stacked)."""
    if _skip(group):
        return None
    pg = _resolve(group)
    if output_tensor.numel() != input_tensor.numel() * pg.size():
        raise ValueError(f"all_gather_into_tensor: output of {output_tensor.numel()} elements "
                         f"for inputs of {input_tensor.numel()} on {pg.size()} ranks")
    _same([output_tensor], input_tensor, "all_gather_into_tensor")
    outs = _chunks(output_tensor, pg.size(), "all_gather_into_tensor")
    w = _engine(pg, [input_tensor, output_tensor], "all_gather_into_tensor").all_gather(
        outs, input_tensor)
    w._result = [output_tensor]
    _bump(output_tensor)
    return _done(w, async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """output = reduction over ranks of input_list[my rank]."""
    if _skip(group):
        return None
    pg = _resolve(group)
    if len(input_list) != pg.size():
        raise ValueError(f"reduce_scatter: input_list has {len(input_list)} tensors for a "
                         f"group of {pg.size()}")
    _same(input_list, output, "reduce_scatter")
    w = _engine(pg, [output, *input_list], "reduce_scatter").reduce_scatter(
        output, list(input_list), op)
    _bump(output)
    return _done(w, async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """output = reduction over ranks of my rank's chunk of `input` (split along dim 0)."""
    if _skip(group):
        return None
    pg = _resolve(group)
    if input.numel() != output.numel() * pg.size():
        raise ValueError(f"reduce_scatter_tensor: input of {input.numel()} elements for an "
                         f"output of {output.numel()} on {pg.size()} ranks")
    _same([input], output, "reduce_scatter_tensor")
    ins = _chunks(input, pg.size(), "reduce_scatter_tensor")
    w = _engine(pg, [output, input], "reduce_scatter_tensor").reduce_scatter(output, ins, op)
    _bump(output)
    return _done(w, async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """output_tensor_list[i] = rank i's input_tensor_list[my rank]."""
    if _skip(group):
        return None
    pg = _resolve(group)
    n = pg.size()
    if len(output_tensor_list) != n or len(input_tensor_list) != n:
        raise ValueError(f"all_to_all: need {n} input and {n} output tensors, got "
                         f"{len(input_tensor_list)} and {len(output_tensor_list)}")
    _same([*output_tensor_list, *input_tensor_list], output_tensor_list[0], "all_to_all")
    w = _engine(pg, [*output_tensor_list, *input_tensor_list], "all_to_all").all_to_all(
        list(output_tensor_list), list(input_tensor_list))
    _bump(*output_tensor_list)
    return _done(w, async_op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False):
    """all_to_all over dim-0 slices of one input and one output tensor."""
    if _skip(group):
        return None
    pg = _resolve(group)
    n = pg.size()

    def split(t, sizes, name):
        if sizes is None or len(sizes) == 0:
            if t.shape[0] % n:
                raise ValueError(f"all_to_all_single: {name} dim 0 ({t.shape[0]}) does not "
                                 f"split into {n} equal parts")
            sizes = [t.shape[0] // n] * n
        if len(sizes) != n or sum(sizes) != t.shape[0]:
            raise ValueError(f"all_to_all_single: {name}_split_sizes {list(sizes)} do not split "
                             f"dim 0 of size {t.shape[0]} among {n} ranks")
        return list(t.split(list(sizes), dim=0))
    if not output.is_contiguous():
        raise ValueError("all_to_all_single: output must be contiguous")
    outs = split(output, output_split_sizes, "output")
    ins = split(input, input_split_sizes, "input")
    w = _engine(pg, [output, input], "all_to_all_single").all_to_all(outs, ins)
    w._result = [output]
    _bump(output)
    return _done(w, async_op)


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """gather_list[i] on rank `dst` = rank i's `tensor`."""
    if _skip(group):
        return None
    pg = _resolve(group)
    d = _group_rank(pg, 0 if dst is None else dst, group_dst, "gather")
    if pg.rank() == d:
        if gather_list is None or len(gather_list) != pg.size():
            raise ValueError(f"gather: the destination needs gather_list of {pg.size()} tensors")
        _same(gather_list, tensor, "gather")
    elif gather_list:
        raise ValueError("gather: gather_list must be given only on the destination rank")
    w = _engine(pg, [tensor], "gather").gather(tensor, list(gather_list or []), d)
    _bump(*(gather_list or []))
    return _done(w, async_op)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """`tensor` on rank i = scatter_list[i] of rank `src`."""
    if _skip(group):
        return None
    pg = _resolve(group)
    s = _group_rank(pg, 0 if src is None else src, group_src, "scatter")
    if pg.rank() == s:
        if scatter_list is None or len(scatter_list) != pg.size():
            raise ValueError(f"scatter: the source needs scatter_list of {pg.size()} tensors")
        _same(scatter_list, tensor, "scatter")
    elif scatter_list:
        raise ValueError("scatter: scatter_list must be given only on the source rank")
    w = _engine(pg, [tensor], "scatter").scatter(tensor, list(scatter_list or []), s)
    _bump(tensor)
    return _done(w, async_op)


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Send `tensor` to rank `dst` without waiting: a Work."""
    if _skip(group):
        return None
    pg = _resolve(group)
    d = _group_rank(pg, dst, group_dst, "isend")
    if d == pg.rank():
        raise ValueError("isend: invalid destination rank: should not be the same as the rank "
                         "of the current process")
    return _engine(pg, [tensor], "isend").send(tensor, d, tag)


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into `tensor` from `src` (None: any rank) without waiting: a Work."""
    if _skip(group):
        return None
    pg = _resolve(group)
    s = None if src is None and group_src is None else _group_rank(pg, src, group_src, "irecv")
    w = _engine(pg, [tensor], "irecv").recv(tensor, s, tag)
    _bump(tensor)
    return w


def send(tensor, dst=None, group=None, tag=0, group_dst=None) -> None:
    w = isend(tensor, dst, group, tag, group_dst)
    if w is not None:
        w.wait()


def recv(tensor, src=None, group=None, tag=0, group_src=None) -> int:
    """Receive into `tensor`; returns the sender's rank (global: -1 outside the group)."""
    w = irecv(tensor, src, group, tag, group_src)
    if w is None:
        return -1
    w.wait()
    pg = _resolve(group)
    return pg.ranks[w._source["src"]]


def batch_isend_irecv(p2p_op_list) -> list[Work]:
    """Start every P2POp (isend or irecv) of the list; returns their Works."""
    works = []
    for p in p2p_op_list:
        if not isinstance(p, P2POp):
            raise TypeError("batch_isend_irecv: expects a list of P2POp")
        if p.op in (isend, send):
            works.append(isend(p.tensor, p.peer, p.group, p.tag, p.group_peer))
        elif p.op in (irecv, recv):
            works.append(irecv(p.tensor, p.peer, p.group, p.tag, p.group_peer))
        else:
            raise ValueError("batch_isend_irecv: P2POp.op must be dist.isend or dist.irecv")
    return works


def barrier(group=GroupMember.WORLD, async_op=False, device_ids=None):
    """Wait until every rank of the group calls barrier (raises after the group's timeout)."""
    if _skip(group):
        return None
    pg = _resolve(group)
    w = pg.engine(_comm_device(pg), "barrier").barrier()
    return _done(w, async_op)


def monitored_barrier(group=GroupMember.WORLD, timeout=None, wait_all_ranks=False) -> None:
    """A barrier through the store: rank 0 names the ranks that did not arrive in time."""
    if _skip(group):
        return None
    pg = _resolve(group)
    secs = (timeout or pg.timeout)
    secs = secs.total_seconds() if isinstance(secs, datetime.timedelta) else float(secs)
    pg._tag += 1
    key = f"monitored_barrier/{pg._tag}"
    pg.store.set(f"{key}/{pg.rank()}", "1")
    if pg.rank() == 0:
        import time
        deadline = time.monotonic() + secs
        missing = list(range(1, pg.size()))
        while missing and time.monotonic() < deadline:
            missing = [r for r in missing if not pg.store.check([f"{key}/{r}"])]
            time.sleep(0.005 if missing else 0)
        if missing:
            who = missing if wait_all_ranks else missing[:1]
            raise RuntimeError(f"monitored_barrier: rank(s) {who} failed to pass "
                               f"monitoredBarrier in {secs:.1f} s")
        pg.store.set(f"{key}/done", "1")
    else:
        pg.store.wait([f"{key}/done"], datetime.timedelta(seconds=secs))
    return None

