"""fully_shard (torch's FSDP2 API): each call makes one unit of the parameters under a module
that no inner unit holds.

- Parameters become DTensors sharded on dim 0 (Shard(0) on a 1-D mesh: uneven sizes as
  torch.chunk), registered where they were; the optimizer steps on these shards.
- Before the unit's forward its parameters are all-gathered (an autograd Function from the shard
  to the whole tensor) and put in the modules for the forward; after it the shards come back.
- With reshard_after_forward, tensors the forward saves for backward that are the gathered
  parameters (or views of them) are kept as handles and all-gathered again when backward needs
  them (saved_tensors_hooks), so the whole parameters do not live from forward to backward.
- The Function's backward reduce-scatters the whole gradient (averaged over ranks) to the
  shard's gradient; with set_requires_gradient_sync(False) it accumulates the whole gradient
  locally instead and adds it into the next synced reduce-scatter.

On a 2-D mesh (HSDP) parameters are (Replicate(), Shard(0)): gathered within a row of the mesh,
gradients reduce-scattered there and averaged over the replicas (all-reduce over dim 0).

Not done: prefetching/overlap (collectives run in order, synchronously),
CPU offload, gradient bucketing across parameters.
"""
from __future__ import annotations

from dataclasses import dataclass

import ember

from .. import _collectives as C
from .._types import ReduceOp
from ..tensor._dtensor import DTensor, distribute_tensor
from ..tensor._placements import Replicate, Shard, shard_sizes

__all__ = ["fully_shard", "FSDPModule", "MixedPrecisionPolicy"]


@dataclass(frozen=True)
class MixedPrecisionPolicy:
    """param_dtype: dtype of the gathered parameters in forward/backward; reduce_dtype: of the
    gradient reduce-scatter; output_dtype: the unit's floating outputs are cast to it;
    cast_forward_inputs: floating inputs are cast to param_dtype."""

    param_dtype: ember.dtype | None = None
    reduce_dtype: ember.dtype | None = None
    output_dtype: ember.dtype | None = None
    cast_forward_inputs: bool = True


class _Param:
    """One sharded parameter of a unit: where it is registered and its collectives."""

    def __init__(self, unit, owner, name, sharded):
        self.unit, self.owner, self.name, self.sharded = unit, owner, name, sharded
        self.shape = tuple(sharded.shape)
        self.full = None            # the gathered tensor registered during forward
        self.bwd_full = None        # re-gathered for backward (reshard_after_forward)
        self.grad_acc = None        # whole gradient accumulated without sync

    def _rows(self):
        n = self.unit.group.size()
        return -(-self.shape[0] // n) if self.shape[0] else 0, n

    def gather(self):
        """The whole parameter from every rank's shard (rows padded to equal pieces)."""
        local = self.sharded._local_tensor.detach()
        if len(self.shape) == 0:
            return local.clone()
        c, n = self._rows()
        pad = c - local.shape[0]
        if pad:
            local = ember.cat([local, local.new_zeros((pad, *local.shape[1:]))], 0)
        out = ember.empty((n * c, *self.shape[1:]), dtype=local.dtype, device=local.device)
        C.all_gather_into_tensor(out, local.contiguous(), group=self.unit.group)
        return out[:self.shape[0]]

    def reduce_scatter(self, g):
        """The shard of the rank-averaged whole gradient g (HSDP: then averaged over the
        replicas too)."""
        n = self.unit.group.size()
        if len(self.shape) == 0:
            out = g.clone()
            C.all_reduce(out, ReduceOp.SUM, group=self.unit.group)
        else:
            c, _ = self._rows()
            pad = n * c - g.shape[0]
            if pad:
                g = ember.cat([g, g.new_zeros((pad, *g.shape[1:]))], 0)
            out = ember.empty((c, *g.shape[1:]), dtype=g.dtype, device=g.device)
            C.reduce_scatter_tensor(out, g.contiguous(), ReduceOp.SUM, group=self.unit.group)
            out = out[:shard_sizes(self.shape[0], n)[self.unit.group.rank()]].contiguous()
        rep = self.unit.replicate_group
        if rep is not None and rep.size() > 1:
            C.all_reduce(out, ReduceOp.SUM, group=rep)
            n *= rep.size()
        return out / n


def _gather_fn():
    from ember.autograd import Function

    class FSDPAllGather(Function):
        @staticmethod
        def forward(ctx, sharded, fp):
            ctx.fp = fp
            full = fp.gather()
            dt = fp.unit.mp.param_dtype
            return full.to(dt) if dt is not None else full

        @staticmethod
        def backward(ctx, g):
            fp = ctx.fp
            fp.bwd_full = None  # every use of the whole parameter is behind us
            rd = fp.unit.mp.reduce_dtype
            g = g.to(rd if rd is not None else fp.sharded.dtype)
            if fp.grad_acc is not None:
                g = g + fp.grad_acc.to(g.dtype)
                fp.grad_acc = None
            if not fp.unit.sync:
                fp.grad_acc = g.detach()
                return None, None
            local = fp.reduce_scatter(g).to(fp.sharded.dtype)
            return DTensor._wrap(local, fp.unit.mesh, fp.sharded.placements, fp.shape), None
    return FSDPAllGather


_GATHER = []


def _all_gather(fp):
    if not _GATHER:
        _GATHER.append(_gather_fn())
    return _GATHER[0].apply(fp.sharded, fp)


class _Unit:
    def __init__(self, module, mesh, reshard, mp):
        self.module, self.mesh, self.reshard_after_forward, self.mp = module, mesh, reshard, mp
        # 1-D mesh: shard over it; 2-D (HSDP): replicate over dim 0, shard over dim 1
        self.group = mesh.get_group(mesh.ndim - 1)
        self.replicate_group = mesh.get_group(0) if mesh.ndim == 2 else None
        self.sync = True
        self.params: list[_Param] = []
        self.hooks = None

    def unshard(self):
        for fp in self.params:
            if fp.full is None:
                fp.full = _all_gather(fp)
            fp.owner._parameters[fp.name] = fp.full

    def reshard(self):
        for fp in self.params:
            fp.owner._parameters[fp.name] = fp.sharded
            fp.full = None

    # saved-tensor hooks: gathered parameters (and views of them) saved by the forward become
    # handles, gathered again when backward unpacks them
    def pack(self, t):
        for i, fp in enumerate(self.params):
            if fp.full is not None and (t is fp.full or t._base is fp.full):
                return (_Handle, i, tuple(t._shape), tuple(t._stride), t._offset, t is fp.full)
        return t

    def unpack(self, packed):
        if not (isinstance(packed, tuple) and packed and packed[0] is _Handle):
            return packed
        _, i, shape, stride, offset, whole = packed
        fp = self.params[i]
        if fp.bwd_full is None:
            with ember.no_grad():
                full = fp.gather()
                dt = self.mp.param_dtype
                fp.bwd_full = (full.to(dt) if dt is not None else full).contiguous()
        return fp.bwd_full if whole else fp.bwd_full._alias(shape, stride, offset)


class _Handle:
    pass


def _cast(x, dtype):
    if isinstance(x, ember.Tensor) and x.is_floating_point() and dtype is not None:
        return x.to(dtype)
    if isinstance(x, (tuple, list)):
        return type(x)(_cast(v, dtype) for v in x)
    return x


class FSDPModule:
    """Mixed into a module's class by fully_shard (isinstance(module, FSDPModule))."""

    def unshard(self, async_op: bool = False):
        """Gather this unit's parameters now (the next forward uses them)."""
        self._fsdp_unit.unshard()

    def reshard(self):
        """Put the shards back in place of the gathered parameters."""
        self._fsdp_unit.reshard()

    def set_requires_gradient_sync(self, requires_gradient_sync: bool, *, recurse=True):
        """False: backward keeps whole gradients locally (no reduce-scatter) until a backward
        with sync on adds them in (gradient accumulation without communication)."""
        mods = self.modules() if recurse else [self]
        for m in mods:
            if isinstance(m, FSDPModule):
                m._fsdp_unit.sync = bool(requires_gradient_sync)

    def set_modules_to_forward_prefetch(self, modules) -> None:
        """Accepted for torch's API; a no-op here: each unit gathers its parameters when its
        forward starts (collectives run synchronously, so there is nothing to overlap)."""
        self._fsdp_unit.prefetch_forward = list(modules)

    def set_modules_to_backward_prefetch(self, modules) -> None:
        """Accepted for torch's API; a no-op here (see set_modules_to_forward_prefetch)."""
        self._fsdp_unit.prefetch_backward = list(modules)

    def set_reshard_after_forward(self, reshard_after_forward: bool, recurse=True):
        mods = self.modules() if recurse else [self]
        for m in mods:
            if isinstance(m, FSDPModule):
                m._fsdp_unit.reshard_after_forward = bool(reshard_after_forward)


def _pre_forward(unit):
    def hook(module, args, kwargs):
        unit.unshard()
        if unit.reshard_after_forward:
            from ember.autograd.graph import saved_tensors_hooks
            unit.hooks = saved_tensors_hooks(unit.pack, unit.unpack)
            unit.hooks.__enter__()
        if unit.mp.param_dtype is not None and unit.mp.cast_forward_inputs:
            args, kwargs = _cast(args, unit.mp.param_dtype), {
                k: _cast(v, unit.mp.param_dtype) for k, v in kwargs.items()}
        return args, kwargs
    return hook


def _post_forward(unit):
    def hook(module, args, out):
        if unit.hooks is not None:
            unit.hooks.__exit__(None, None, None)
            unit.hooks = None
        unit.reshard()
        return _cast(out, unit.mp.output_dtype) if unit.mp.output_dtype is not None else out
    return hook


def fully_shard(module, *, mesh=None, reshard_after_forward: bool = True, shard_placement_fn=None,
                mp_policy: MixedPrecisionPolicy | None = None, offload_policy=None,
                ignored_params=None):
    """Shard `module`'s parameters (those no inner fully_shard took) over `mesh` (1-D, or 2-D
    for HSDP; default all ranks) and gather them around its forward. Returns the module, now also an
    FSDPModule. `fully_shard(layer)` for each layer, then `fully_shard(model)`, as in torch."""
    from .. import _group
    from .._device_mesh import init_device_mesh
    if isinstance(module, (list, tuple)):
        raise NotImplementedError("fully_shard: a list of modules as one unit is not supported")
    if mesh is None:
        mesh = init_device_mesh("cpu", (_group.get_world_size(),))
    if mesh.ndim not in (1, 2):
        raise ValueError(f"fully_shard: a 1-D mesh (FSDP) or 2-D mesh (HSDP: replicate, shard), "
                         f"got {mesh.ndim}-D")
    if shard_placement_fn is not None or offload_policy is not None:
        raise NotImplementedError("fully_shard: shard_placement_fn / offload_policy are not "
                                  "supported")
    if isinstance(module, FSDPModule):
        return module
    unit = _Unit(module, mesh, reshard_after_forward, mp_policy or MixedPrecisionPolicy())
    ignored = {id(p) for p in ignored_params or ()}
    seen = set()
    for _, owner in module.named_modules():
        for name, p in list(owner._parameters.items()):
            if p is None or isinstance(p, DTensor) or id(p) in ignored:
                continue
            if id(p) in seen:
                raise NotImplementedError("fully_shard: shared (tied) parameters are not "
                                          "supported")
            seen.add(id(p))
            ps = [Replicate()] * (mesh.ndim - 1) + [Shard(0) if p.dim() else Replicate()]
            d = distribute_tensor(p.detach(), mesh, ps, src_data_rank=None)
            sharded = ember.nn.Parameter(d, p.requires_grad)
            owner._parameters[name] = sharded
            unit.params.append(_Param(unit, owner, name, sharded))
    module._fsdp_unit = unit
    module.register_forward_pre_hook(_pre_forward(unit), with_kwargs=True)
    module.register_forward_hook(_post_forward(unit))
    cls = module.__class__
    module.__class__ = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {})
    return module
