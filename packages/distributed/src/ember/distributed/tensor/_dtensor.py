"""DTensor: an ember.Tensor whose value is spread over a DeviceMesh (torch's DTensor data model).

The DTensor object has the global shape, dtype and device; its data is this rank's local piece
(`to_local()`) under one placement per mesh dim. Ops on DTensors reach `__ember_dispatch__` below
autograd (core's subclass hook): sharding propagation picks placements, redistributes inputs, runs
the op on local pieces and wraps the results (see _dispatch.py). Autograd records DTensor ops like
any others, so gradients are DTensors; from_local / to_local / redistribute are differentiable.
"""
from __future__ import annotations

import ember
from ember._size import contiguous_strides
from ember._tensor import Tensor
from ember.nn.parameter import Parameter

from .. import _collectives as C
from ._placements import Partial, Replicate, Shard
from ._redistribute import from_full, normalize_placements, redistribute_local

__all__ = ["DTensor", "distribute_tensor"]


def _grad_ok(placements):
    """Placements of a gradient flowing back to a tensor that had `placements`: a Partial value's
    gradient is the same everywhere (Replicate)."""
    return tuple(Replicate() if isinstance(p, Partial) else p for p in placements)


class DTensor(Tensor):
    """A tensor spread over a DeviceMesh.

    >>> # on every rank:  d = distribute_tensor(ember.arange(8.), mesh, [Shard(0)])
    >>> # d.shape == (8,); d.to_local() is this rank's 8 / world_size values
    """

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def _wrap(cls, local, mesh, placements, shape):
        """A DTensor over `local` (no copy, no autograd link)."""
        shape = tuple(shape)
        t = cls._make(local._storage, shape, contiguous_strides(shape), 0, local.dtype,
                      local.device)
        t._local_tensor = local
        t.device_mesh = mesh
        t.placements = tuple(placements)
        return t

    @staticmethod
    def from_local(local_tensor, device_mesh=None, placements=None, *, run_check=False,
                   shape=None, stride=None) -> DTensor:
        """Wrap each rank's local piece; the global shape assumes even shards unless given.
        Differentiable: the gradient of the local piece is the DTensor gradient's local piece."""
        from .._device_mesh import DeviceMesh
        if not isinstance(device_mesh, DeviceMesh):
            raise TypeError("DTensor.from_local: device_mesh must be a DeviceMesh")
        if isinstance(local_tensor, DTensor):
            raise TypeError("DTensor.from_local: local_tensor is already a DTensor")
        ps = normalize_placements(placements, device_mesh, local_tensor.dim())
        if shape is None:
            shape = list(local_tensor.shape)
            for m, p in enumerate(ps):
                if isinstance(p, Shard):
                    shape[p.dim] *= device_mesh.size(m)
        if run_check:
            _check_replicas(local_tensor, device_mesh, ps)
        return _FromLocal.apply(local_tensor, device_mesh, ps, tuple(shape))

    @classmethod
    def _as_parameter(cls, data, requires_grad=True):
        """nn.Parameter(dtensor): a DTensor that modules register as a parameter."""
        p = _DParameter._wrap(data._local_tensor.detach(), data.device_mesh, data.placements,
                              data._shape)
        p.requires_grad = requires_grad
        return p

    def _shallow_copy(self):
        """A new DTensor object over the same local piece (autograd re-links saved outputs)."""
        return DTensor._wrap(self._local_tensor, self.device_mesh, self.placements, self._shape)

    # ---- queries ------------------------------------------------------------------------
    def to_local(self, *, grad_placements=None):
        """This rank's piece (differentiable; its gradient comes back with `grad_placements`,
        default this DTensor's placements)."""
        gp = self.placements if grad_placements is None else tuple(grad_placements)
        return _ToLocal.apply(self, gp)

    @property
    def data(self):
        return DTensor._wrap(self._local_tensor.detach(), self.device_mesh, self.placements,
                             self._shape)

    @data.setter
    def data(self, other):
        if not isinstance(other, DTensor):
            # a whole tensor (Module.to_empty, _apply): this rank keeps its piece of it
            if tuple(other.shape) != tuple(self._shape):
                raise RuntimeError(f"DTensor.data: a plain tensor of shape {list(other.shape)} "
                                   f"for a DTensor of shape {list(self._shape)}")
            other = DTensor._wrap(from_full(other.detach(), self.device_mesh, self.placements),
                                  self.device_mesh, self.placements, self._shape)
        self._local_tensor = other._local_tensor
        self._st = other._local_tensor._storage
        self.placements, self.device_mesh = other.placements, other.device_mesh
        self._shape, self._stride = other._shape, other._stride
        self.dtype, self.device = other._local_tensor.dtype, other._local_tensor.device

    @property
    def _np(self):
        raise NotImplementedError("DTensor has no single array: use to_local() or full_tensor()")

    def numpy(self, *, force=False):
        raise NotImplementedError("DTensor.numpy(): use to_local() or full_tensor() first")

    def tolist(self):
        raise NotImplementedError("DTensor.tolist(): use to_local() or full_tensor() first")

    def item(self):
        return self.full_tensor().item()

    def is_contiguous(self, memory_format=None) -> bool:
        return True

    def __repr__(self, *, tensor_contents=None):
        return (f"DTensor(local_tensor={self._local_tensor!r}, device_mesh={self.device_mesh}, "
                f"placements={self.placements})")

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        raise TypeError("a DTensor does not pickle: save it with ember.distributed.checkpoint")

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        with ember.no_grad():
            local = self._local_tensor.clone()
        cls = _DParameter if isinstance(self, _DParameter) else DTensor
        new = cls._wrap(local, self.device_mesh, self.placements, self._shape)
        new.requires_grad = self.requires_grad
        if self.grad is not None:
            new.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = new
        return new

    # ---- movement -----------------------------------------------------------------------
    def redistribute(self, device_mesh=None, placements=None, *, async_op=False) -> DTensor:
        """The same global tensor under other placements (collectives as needed;
        differentiable)."""
        mesh = device_mesh or self.device_mesh
        if mesh is not self.device_mesh and mesh.shape != self.device_mesh.shape:
            raise NotImplementedError("redistribute: moving to another mesh is not supported")
        tgt = normalize_placements(placements, mesh, self.dim())
        for p in tgt:
            if isinstance(p, Partial) and not any(q == p for q in self.placements):
                if tgt != self.placements and p.reduce_op != "sum":
                    raise RuntimeError(f"redistribute: cannot make Partial({p.reduce_op}) from "
                                       f"{self.placements}")
        return _Redistribute.apply(self, mesh, tgt)

    def full_tensor(self, *, grad_placements=None):
        """The whole tensor on every rank (differentiable)."""
        r = self.redistribute(placements=[Replicate()] * self.device_mesh.ndim)
        return r.to_local(grad_placements=grad_placements)


class _DParameter(DTensor, Parameter):
    """A DTensor registered as a module parameter (isinstance of both)."""

    def __repr__(self):
        return "Parameter containing:\n" + DTensor.__repr__(self)


def _check_replicas(local, mesh, ps):
    """from_local(run_check=True): Replicate pieces must agree within their mesh dim."""
    for m, p in enumerate(ps):
        if isinstance(p, Replicate):
            ref = local.detach().clone()
            C.broadcast(ref, src=_first_rank(mesh, m), group=mesh.get_group(m))
            if not bool((ref == local.detach()).all()):
                raise ValueError(f"DTensor.from_local(run_check=True): local tensors differ "
                                 f"along mesh dim {m} placed Replicate()")


def _first_rank(mesh, m):
    import ember.distributed as dist
    return dist.get_process_group_ranks(mesh.get_group(m))[0]


def distribute_tensor(tensor, device_mesh=None, placements=None, *, src_data_rank=0) -> DTensor:
    """Spread a tensor that every rank holds (rank src_data_rank's values win; None: each
    rank's own) over the mesh; a leaf DTensor that requires grad when `tensor` does."""
    from .._device_mesh import init_device_mesh
    if isinstance(tensor, DTensor):
        raise ValueError("distribute_tensor: the tensor is already a DTensor")
    mesh = device_mesh or init_device_mesh("cpu", (C._resolve(None).size(),))
    ps = normalize_placements(placements, mesh, tensor.dim())
    t = tensor.detach()
    if t.device.type not in (mesh.device_type, "meta"):
        t = t.to(mesh.device_type)  # as torch: the pieces live on the mesh's device type
    t = t.clone().contiguous()
    if src_data_rank is not None:
        C.broadcast(t, src=src_data_rank)
    out = DTensor._wrap(from_full(t, mesh, ps), mesh, ps, tuple(tensor.shape))
    out.requires_grad = tensor.requires_grad
    return out


# ---- differentiable movement between DTensors and local tensors ----------------------------
def _function():
    from ember.autograd import Function
    return Function


class _Lazy:
    """autograd.Function subclasses made on first use (ember-autograd is imported by then)."""

    def __init__(self, build):
        self.build, self.cls = build, None

    def apply(self, *args):
        if self.cls is None:
            self.cls = self.build()
        return self.cls.apply(*args)


def _build_from_local():
    class FromLocal(_function()):
        @staticmethod
        def forward(ctx, local, mesh, ps, shape):
            ctx.mesh, ctx.ps = mesh, ps
            return DTensor._wrap(local.view_as(local), mesh, ps, shape)

        @staticmethod
        def backward(ctx, g):
            if isinstance(g, DTensor):
                g = redistribute_local(g._local_tensor, g.device_mesh, g.placements,
                                       _grad_ok(ctx.ps))
            return g, None, None, None
    return FromLocal


def _build_to_local():
    class ToLocal(_function()):
        @staticmethod
        def forward(ctx, d, gp):
            ctx.mesh, ctx.gp, ctx.shape = d.device_mesh, gp, d._shape
            return d._local_tensor.view_as(d._local_tensor)

        @staticmethod
        def backward(ctx, g):
            return DTensor._wrap(g, ctx.mesh, ctx.gp, ctx.shape), None
    return ToLocal


def _build_redistribute():
    class Redistribute(_function()):
        @staticmethod
        def forward(ctx, d, mesh, tgt):
            ctx.src = d.placements
            local = redistribute_local(d._local_tensor, mesh, d.placements, tgt)
            if local is d._local_tensor:
                local = local.view_as(local)
            return DTensor._wrap(local, mesh, tgt, d._shape)

        @staticmethod
        def backward(ctx, g):
            if isinstance(g, DTensor):
                tgt = _grad_ok(ctx.src)
                g = DTensor._wrap(redistribute_local(g._local_tensor, g.device_mesh,
                                                     g.placements, tgt),
                                  g.device_mesh, tgt, g._shape)
            return g, None, None
    return Redistribute


_FromLocal = _Lazy(_build_from_local)
_ToLocal = _Lazy(_build_to_local)
_Redistribute = _Lazy(_build_redistribute)


def _install():
    from ember import _dispatch as core

    from . import _rules  # noqa: F401  (registers the sharding rules)
    from ._dispatch import dispatch
    DTensor.__ember_dispatch__ = staticmethod(dispatch)
    core.subclass_dispatch[0] += 1


_install()
