"""DistributedDataParallel: replicas of a module whose gradients are averaged over the group
during backward, bucket by bucket, from post-accumulate-grad hooks.

Buckets hold parameters in reverse registration order (roughly the order backward produces their
gradients): the first up to 1 MiB (so that communication starts early in backward, as PyTorch's
first bucket), the others up to bucket_cap_mb. Each bucket owns one flat buffer, allocated once:
a bucket's gradients are copied into it and its all-reduce starts, asynchronously, as soon as its
last gradient is accumulated; buckets start in index order on every rank (collectives must
match), and the last one waits for all and writes the averages back into `.grad`. With
gradient_as_bucket_view=True, `.grad` becomes a view of the buffer instead: backward then
accumulates straight into it and neither copy happens again.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

import ember
from ember import nn

from ._collectives import all_reduce, broadcast
from ._group import _resolve
from ._types import ReduceOp

__all__ = ["DistributedDataParallel", "GradBucket"]


_FIRST_BUCKET_BYTES = 1024 * 1024  # torch.distributed's dist._DEFAULT_FIRST_BUCKET_BYTES


class _Bucket:
    def __init__(self, params):
        self.params = params
        self.ready: set[int] = set()
        self.flat = None    # the flat buffer, made on first use and kept
        self.views = []     # one view of it per parameter, shaped like the parameter
        self.work = None
        self.fut = None

    def buffer(self):
        if self.flat is None:
            p0 = self.params[0]
            self.flat = ember.zeros(sum(p.numel() for p in self.params), dtype=p0.dtype,
                                    device=p0.device)
            off = 0
            for p in self.params:
                self.views.append(self.flat[off:off + p.numel()].view(p.shape))
                off += p.numel()
        return self.flat


def _aliases(g, v) -> bool:
    """g is (a tensor over the same memory as) the bucket view v."""
    return g is v or (g._storage is v._storage and g._offset == v._offset
                      and g._shape == v._shape and g._stride == v._stride
                      and g.dtype == v.dtype)


def _copy(dst, src) -> None:
    """dst.copy_(src) under no_grad; CPU tensors of one dtype straight through numpy (this runs
    twice per parameter per step: the dispatcher's per-call cost adds up on small parameters)."""
    if dst.device.type == "cpu" and src.device.type == "cpu" and dst.dtype == src.dtype:
        np.copyto(dst._np, src._np)
        dst._bump()
    else:
        dst.copy_(src)


class GradBucket:
    """What a DDP comm hook gets (torch.distributed.GradBucket): the bucket's gradients as one
    flat buffer; the hook returns a Future of the reduced buffer (averaged: the hook divides)."""

    def __init__(self, index, buffer, params, last):
        self._index, self._buffer, self._params, self._last = index, buffer, params, last

    def index(self) -> int:
        return self._index

    def buffer(self):
        return self._buffer

    def set_buffer(self, buffer) -> None:
        self._buffer = buffer

    def is_last(self) -> bool:
        return self._last

    def parameters(self) -> list:
        return list(self._params)

    def gradients(self) -> list:
        out, off = [], 0
        for p in self._params:
            out.append(self._buffer[off:off + p.numel()].view(p.shape))
            off += p.numel()
        return out


class DistributedDataParallel(nn.Module):
    """Data-parallel training of `module` over `process_group` (torch's constructor arguments;
    device_ids/output_device/static_graph are accepted and need no action here;
    gradient_as_bucket_view=True makes each `.grad` a view of its bucket's buffer)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, init_sync=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None,
                 mixed_precision=None, device_mesh=None):
        super().__init__()
        self.module = module
        self.process_group = _resolve(process_group)
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.static_graph = static_graph
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self._params = [p for p in module.parameters() if p.requires_grad]
        if init_sync:
            self._sync_module_states()
        cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
        self._buckets = self._make_buckets(cap, min(cap, _FIRST_BUCKET_BYTES))
        self._where = {id(p): (i, b) for i, b in enumerate(self._buckets) for p in b.params}
        self._armed = False
        self._next = 0
        self._comm_hook = self._comm_state = None
        self._handles = [p.register_post_accumulate_grad_hook(self._on_grad)
                         for p in self._params]

    # ---- setup ---------------------------------------------------------------------------
    def _sync_module_states(self):
        """Every rank starts from rank 0's parameters and buffers."""
        g = self.process_group
        if g.size() == 1:
            return
        with ember.no_grad():
            for t in [*self.module.parameters(), *self.module.buffers()]:
                broadcast(t, src=g.ranks[0], group=g)

    def _make_buckets(self, cap, first_cap):
        buckets, cur, size = [], [], 0
        for p in reversed(self._params):
            nbytes = p.numel() * p.element_size()
            limit = cap if buckets else first_cap
            if cur and (size + nbytes > limit or p.dtype != cur[0].dtype
                        or p.device != cur[0].device):
                buckets.append(_Bucket(cur))
                cur, size = [], 0
            cur.append(p)
            size += nbytes
        if cur:
            buckets.append(_Bucket(cur))
        return buckets

    # ---- forward ---------------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        if self._armed and any(b.ready for b in self._buckets):
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a "
                "new one. This error indicates that your module has parameters that were not "
                "used in producing loss. You can enable unused parameter detection by passing "
                "the keyword argument `find_unused_parameters=True` to "
                "`DistributedDataParallel`")
        g = self.process_group
        if self.broadcast_buffers and self.require_forward_param_sync and g.size() > 1:
            with ember.no_grad():
                for b in self.module.buffers():
                    broadcast(b, src=g.ranks[0], group=g)
        out = self.module(*inputs, **kwargs)
        self._armed = ember.is_grad_enabled() and self.require_backward_grad_sync
        for b in self._buckets:
            b.ready.clear()
        self._next = 0
        if self._armed and self.find_unused_parameters:
            used = _reachable_leaves(out)
            for p in self._params:
                if id(p) not in used:
                    self._mark(p)
        return out

    @contextmanager
    def no_sync(self):
        """Backward passes inside accumulate gradients locally; the next one outside syncs."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def register_comm_hook(self, state, hook) -> None:
        """`hook(state, bucket: GradBucket) -> Future` reduces each bucket instead of the
        built-in all-reduce (see ember.distributed.algorithms.ddp_comm_hooks)."""
        if self._comm_hook is not None:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be "
                               "called once.")
        if not callable(hook):
            raise TypeError("register_comm_hook: hook must be callable")
        self._comm_hook, self._comm_state = hook, state

    # ---- backward hooks --------------------------------------------------------------------
    def _on_grad(self, p):
        if self._armed:
            self._mark(p)

    def _mark(self, p):
        _, b = self._where[id(p)]
        b.ready.add(id(p))
        for x in self._buckets[:self._next]:  # let MPI progress the ones in flight
            if x.work is not None:
                x.work.is_completed()
        while self._next < len(self._buckets):
            nb = self._buckets[self._next]
            if len(nb.ready) < len(nb.params):
                return
            self._launch(nb)
            self._next += 1
        self._finish()

    def _launch(self, b):
        b.buffer()
        with ember.no_grad():
            if not self._gather_cpu(b):
                self._fill(b)
        if self._comm_hook is not None:
            i = self._buckets.index(b)
            bucket = GradBucket(i, b.flat, b.params, i == len(self._buckets) - 1)
            b.fut = self._comm_hook(self._comm_state, bucket)
            return
        b.work = all_reduce(b.flat, ReduceOp.AVG, group=self.process_group, async_op=True)

    def _gather_cpu(self, b) -> bool:
        """The common case in one numpy call: every gradient present, on the CPU, of the
        buffer's dtype and not yet a view of it: concatenated straight into the buffer. False
        (nothing done) otherwise."""
        grads = [p.grad for p in b.params]
        flat = b.flat
        if flat.device.type != "cpu" or any(
                g is None or g.device.type != "cpu" or g.dtype != flat.dtype
                or g._storage is flat._storage for g in grads):
            return False
        np.concatenate([g._np.reshape(-1) for g in grads], out=flat._np)
        flat._bump()
        if self.gradient_as_bucket_view:
            for p, v in zip(b.params, b.views):
                p.grad = v
        return True

    def _fill(self, b):
        """Copy the bucket's gradients into its buffer one by one (zeros for a missing one);
        with gradient_as_bucket_view, `.grad` becomes its view."""
        for p, v in zip(b.params, b.views):
            g = p.grad
            if g is None:
                v.zero_()
            elif not _aliases(g, v):
                _copy(v, g)
                if self.gradient_as_bucket_view:
                    p.grad = v

    def _finish(self):
        with ember.no_grad():
            for b in self._buckets:
                if b.fut is not None:
                    r = b.fut.wait()
                    r = r[0] if isinstance(r, (list, tuple)) else r
                    if r is not b.flat:
                        b.flat.copy_(r.reshape(-1))
                else:
                    b.work.wait()
                for p, avg in zip(b.params, b.views):
                    if p.grad is None:
                        if bool((avg != 0).any()):
                            p.grad = avg if self.gradient_as_bucket_view else avg.clone()
                    elif not _aliases(p.grad, avg):
                        _copy(p.grad, avg)
                b.work = b.fut = None
        self._armed = False
        self._next = 0


def _reachable_leaves(out) -> set:
    """ids of the leaf tensors the autograd graph of `out` reaches (find_unused_parameters)."""
    roots = [t.grad_fn for t in _tensors(out) if t.grad_fn is not None]
    seen, used, stack = set(), set(), roots
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        var = getattr(node, "variable", None)
        if var is not None:
            used.add(id(var))
        stack.extend(n for n, _ in getattr(node, "next_functions", ()))
    return used


def _tensors(obj):
    if isinstance(obj, ember.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x)
