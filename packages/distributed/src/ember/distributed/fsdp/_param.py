"""FSDP2's per-parameter collectives and the state one fully_shard tree shares: all-gathers
issued ahead of use (async; the unit that needs them waits), reduce-scatters issued as each
gradient arrives and waited for once, when the backward pass ends.

A parameter is sharded on dim 0 over the unit's data-parallel group. With tensor parallelism
(FSDP + TP on a 2-D mesh) it is a TP DTensor first: FSDP shards its TP-local piece over "dp", and
the gathered value is that TP DTensor again.
"""
from __future__ import annotations

import ember

from .. import _collectives as C
from .._types import ReduceOp
from ..tensor._dtensor import DTensor
from ..tensor._placements import shard_sizes

__all__ = ["FSDPState", "FSDPParam", "all_gather_param", "set_trace"]

_TRACE: list | None = None


def set_trace(events: list | None) -> None:
    """Record (event, module) pairs into `events` (None: stop): "all_gather" when a unit's
    all-gathers are issued, "all_gather_wait" when it waits for them, "forward" when its forward
    starts, "reduce_scatter" per gradient issued, "reduce_scatter_wait" per gradient waited,
    "backward_end" when the backward pass's reduce-scatters are all done. Tests check the order."""
    global _TRACE
    _TRACE = events


def trace(event: str, unit) -> None:
    if _TRACE is not None:
        _TRACE.append((event, unit.module))


class FSDPState:
    """What the units of one fully_shard tree share (the root's call adopts the inner units'):
    the forward order of this iteration, the reduce-scatters in flight."""

    def __init__(self):
        self.units: list = []
        self.post_order: list = []  # units in the order their forward ended
        self.pending_rs: list = []  # (param, work, output, input) in issue order
        self.callback_queued = False

    def queue_finish(self):
        """Have finish_backward run when the backward pass in progress ends (once)."""
        if not self.callback_queued:
            from ember.autograd._engine import queue_callback
            try:
                queue_callback(self.finish_backward)
            except RuntimeError:  # not inside a backward pass (saved tensors read directly)
                return
            self.callback_queued = True

    def finish_backward(self):
        """End of backward: wait for every reduce-scatter (in issue order), set the sharded
        gradients, drop prefetched all-gathers nobody used."""
        self.callback_queued = False
        pending, self.pending_rs = self.pending_rs, []
        for fp, work, out, _ in pending:
            fp.finish_reduce_scatter(work, out)
        for u in self.units:
            for fp in u.params:
                fp.drop_pending()
                fp.bwd_full = None
            u.bwd_started = False
        if pending:
            trace("backward_end", self.units[-1])


class FSDPParam:
    """One sharded parameter of a unit: where it is registered and its collectives."""

    def __init__(self, unit, owner, name, sharded, tp=None):
        self.unit, self.owner, self.name, self.sharded = unit, owner, name, sharded
        self.shape = tuple(sharded.shape)  # global shape
        # tp: (tp mesh, tp placements) when the parameter is a TP DTensor; then the dp group
        # gathers its TP-local piece, of shape lshape
        self.tp = tp
        self.lshape = tuple(tp[2]) if tp is not None else self.shape
        self.full = None            # the gathered tensor registered during forward
        self.bwd_full = None        # re-gathered for backward (reshard_after_forward)
        self.grad_acc = None        # whole gradient accumulated without sync
        self.pending = None         # (work, output, input) of an all-gather in flight

    def _rows(self):
        n = self.unit.group.size()
        return -(-self.lshape[0] // n) if self.lshape[0] else 0, n

    # ---- all-gather ----------------------------------------------------------------------
    def start_gather(self) -> bool:
        """Issue the all-gather of the whole parameter (rows padded to equal pieces), unless one
        is in flight. True if one was issued."""
        if self.pending is not None:
            return False
        self.adopt_assigned()
        local = self.sharded._local_tensor.detach()
        if self.unit.offload is not None and local.device.type != self.unit.device:
            local = local.to(self.unit.device, non_blocking=True)  # host shard -> device
        if len(self.lshape) == 0:
            self.pending = (None, local.clone(), None)
            return True
        c, n = self._rows()
        pad = c - local.shape[0]
        if pad:
            local = ember.cat([local, local.new_zeros((pad, *local.shape[1:]))], 0)
        local = local.contiguous()
        out = ember.empty((n * c, *self.lshape[1:]), dtype=local.dtype, device=local.device)
        work = C.all_gather_into_tensor(out, local, group=self.unit.group, async_op=True)
        self.pending = (work, out, local)
        return True

    def adopt_assigned(self):
        """load_state_dict(assign=True) put a new sharded parameter in the module: use it."""
        cur = self.owner._parameters.get(self.name)
        if cur is self.sharded or cur is self.full or not isinstance(cur, DTensor):
            return
        if cur.placements != self.sharded.placements or tuple(cur.shape) != self.shape:
            raise RuntimeError(
                f"fully_shard: parameter {self.name!r} was replaced by a DTensor of shape "
                f"{tuple(cur.shape)} placed {cur.placements}; expected {self.shape} placed "
                f"{self.sharded.placements}")
        self.sharded = cur

    def gather(self):
        """The whole parameter (TP-local piece under TP): the all-gather in flight, or a new one."""
        self.start_gather()
        work, out, _ = self.pending
        self.pending = None
        if work is not None:
            work.wait()
        return out[:self.lshape[0]] if len(self.lshape) else out

    def drop_pending(self):
        if self.pending is not None:
            if self.pending[0] is not None:
                self.pending[0].wait()
            self.pending = None

    def wrap_full(self, full):
        """The gathered tensor as the module sees it (a TP DTensor under TP)."""
        if self.tp is None:
            return full
        return DTensor._wrap(full, self.tp[0], self.tp[1], self.shape)

    # ---- reduce-scatter ------------------------------------------------------------------
    def start_reduce_scatter(self, g):
        """Issue the reduce-scatter (sum) of the whole gradient g; finish_backward waits."""
        n = self.unit.group.size()
        if len(self.lshape) == 0:
            out = g.clone()
            work = C.all_reduce(out, ReduceOp.SUM, group=self.unit.group, async_op=True)
        else:
            c, _ = self._rows()
            pad = n * c - g.shape[0]
            if pad:
                g = ember.cat([g, g.new_zeros((pad, *g.shape[1:]))], 0)
            g = g.contiguous()
            out = ember.empty((c, *g.shape[1:]), dtype=g.dtype, device=g.device)
            work = C.reduce_scatter_tensor(out, g, ReduceOp.SUM, group=self.unit.group,
                                           async_op=True)
        trace("reduce_scatter", self.unit)
        self.unit.state.pending_rs.append((self, work, out, g))
        self.unit.state.queue_finish()

    def finish_reduce_scatter(self, work, out):
        """Wait, average over ranks (and replicas under HSDP), add into the shard's .grad."""
        work.wait()
        trace("reduce_scatter_wait", self.unit)
        n = self.unit.group.size()
        if len(self.lshape):
            out = out[:shard_sizes(self.lshape[0], n)[self.unit.group.rank()]].contiguous()
        rep = self.unit.replicate_group
        if rep is not None and rep.size() > 1:
            C.all_reduce(out, ReduceOp.SUM, group=rep)
            n *= rep.size()
        local = (out / n).to(self.sharded.dtype)
        if local.device != self.sharded._local_tensor.device:  # CPU offload: back to the host
            local = local.to(self.sharded._local_tensor.device)
        grad = DTensor._wrap(local, self.sharded.device_mesh, self.sharded.placements, self.shape)
        p = self.sharded
        with ember.no_grad():
            p.grad = grad if p.grad is None else p.grad + grad


def _gather_fn():
    from ember.autograd import Function

    class FSDPAllGather(Function):
        """shard -> whole parameter; backward hands the whole gradient to the reduce-scatter
        (the shard's .grad is set when the backward pass ends, so this returns None)."""

        @staticmethod
        def forward(ctx, sharded, fp):
            ctx.fp = fp
            full = fp.gather()
            dt = fp.unit.mp.param_dtype
            return fp.wrap_full(full.to(dt) if dt is not None else full)

        @staticmethod
        def backward(ctx, g):
            fp = ctx.fp
            fp.unit.state.queue_finish()  # (also without sync: drops unused prefetches)
            fp.bwd_full = None  # every use of the whole parameter is behind us
            if isinstance(g, DTensor):  # TP: the gradient of this rank's TP piece
                g = g.redistribute(fp.tp[0], fp.tp[1])._local_tensor
            rd = fp.unit.mp.reduce_dtype
            g = g.to(rd if rd is not None else fp.sharded.dtype)
            if fp.grad_acc is not None:
                g = g + fp.grad_acc.to(g.dtype)
                fp.grad_acc = None
            if not fp.unit.sync:
                fp.grad_acc = g.detach()
            else:
                fp.start_reduce_scatter(g.detach())
            return None, None
    return FSDPAllGather


_GATHER = []


def all_gather_param(fp):
    """The whole parameter, recorded by autograd (its backward reduce-scatters)."""
    if not _GATHER:
        _GATHER.append(_gather_fn())
    return _GATHER[0].apply(fp.sharded, fp)
