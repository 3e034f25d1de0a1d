"""fully_shard (torch's FSDP2 API): each call makes one unit of the parameters under a module
that no inner unit holds.

- Parameters become DTensors sharded on dim 0 (Shard(0) on a 1-D mesh: uneven sizes as
  torch.chunk), registered where they were; the optimizer steps on these shards.
- Before the unit's forward its parameters are all-gathered (an autograd Function from the shard
  to the whole tensor) and put in the modules for the forward; after it the shards come back.
- With reshard_after_forward, tensors the forward saves for backward that are the gathered
  parameters (or views of them) are kept as handles and all-gathered again when backward needs
  them (saved_tensors_hooks), so the whole parameters do not live from forward to backward.
- Prefetching (_param.py issues every collective async): forward, a unit's pre-forward issues
  the all-gathers of the modules given to set_modules_to_forward_prefetch after its own; backward,
  a unit's first re-gather also issues the next unit's (the one before it in forward order, or
  those given to set_modules_to_backward_prefetch). Gradients are reduce-scattered as they
  arrive; the waits happen once, when the backward pass ends (autograd's queue_callback), and
  set the shards' .grad. With set_requires_gradient_sync(False) whole gradients accumulate
  locally instead and are added into the next synced reduce-scatter.

On a 2-D mesh (HSDP) parameters are (Replicate(), Shard(0)): gathered within a row of the mesh,
gradients reduce-scattered there and averaged over the replicas (all-reduce over dim 0).
FSDP + TP: parameters that parallelize_module made DTensors on mesh["tp"] and fully_shard(mesh=
mesh["dp"]) become (Shard(0), tp placement) on the 2-D mesh: their TP-local piece is sharded over
"dp" and gathered back to the TP DTensor for forward and backward (where TP shards dim 0 too,
dp's placement is _StridedShard(0): its split applies to the TP piece).

CPU offload (offload_policy=CPUOffloadPolicy()): the shards (the DTensor parameters' local
tensors), their gradients and so the optimizer step live in host memory (page-locked with
pin_memory where an accelerator is installed); each all-gather copies the shard to the mesh's
device first, each reduce-scattered gradient is copied back to the host.

Not done: gradient bucketing across parameters.
"""
from __future__ import annotations

from dataclasses import dataclass

import ember

from ..tensor._dtensor import DTensor, distribute_tensor
from ..tensor._placements import Replicate, Shard, _StridedShard, shard_sizes
from ._param import FSDPParam, FSDPState, all_gather_param, trace

__all__ = ["fully_shard", "FSDPModule", "MixedPrecisionPolicy", "UnshardHandle",
           "OffloadPolicy", "CPUOffloadPolicy"]


@dataclass(frozen=True)
class MixedPrecisionPolicy:
    """param_dtype: dtype of the gathered parameters in forward/backward; reduce_dtype: of the
    gradient reduce-scatter; output_dtype: the unit's floating outputs are cast to it;
    cast_forward_inputs: floating inputs are cast to param_dtype."""

    param_dtype: ember.dtype | None = None
    reduce_dtype: ember.dtype | None = None
    output_dtype: ember.dtype | None = None
    cast_forward_inputs: bool = True


@dataclass
class OffloadPolicy:
    """No offloading: fully_shard's default offload_policy (torch.distributed.fsdp's)."""


@dataclass
class CPUOffloadPolicy(OffloadPolicy):
    """Keep the sharded parameters and their gradients in host memory; the optimizer steps
    there. pin_memory: page-locked host memory (asynchronous copies to the accelerator), where
    an accelerator backend is installed.

    >>> fully_shard(model, offload_policy=CPUOffloadPolicy())  # doctest: +SKIP
    """

    pin_memory: bool = True


class _Unit:
    def __init__(self, module, mesh, reshard, mp, offload=None):
        self.module, self.mesh, self.reshard_after_forward, self.mp = module, mesh, reshard, mp
        # CPU offload: shards live on the host, collectives run on the mesh's device
        self.offload = offload if isinstance(offload, CPUOffloadPolicy) else None
        self.device = mesh.device_type
        # 1-D mesh: shard over it; 2-D (HSDP): replicate over dim 0, shard over dim 1
        self.group = mesh.get_group(mesh.ndim - 1)
        self.replicate_group = mesh.get_group(0) if mesh.ndim == 2 else None
        self.sync = True
        self.params: list[FSDPParam] = []
        self.hooks = None
        self.prefetch_forward: list | None = None   # explicit targets (modules)
        self.prefetch_backward: list | None = None  # None: the unit before this one
        self.bwd_started = False
        self.state = FSDPState()
        self.state.units.append(self)

    def start_unshard(self):
        """Issue the all-gathers of the parameters not gathered yet (no wait)."""
        if any([fp.start_gather() for fp in self.params if fp.full is None]):
            trace("all_gather", self)

    def unshard(self):
        need = [fp for fp in self.params if fp.full is None]
        if need:
            self.start_unshard()
            trace("all_gather_wait", self)
            for fp in need:
                fp.full = all_gather_param(fp)
        for fp in self.params:
            fp.owner._parameters[fp.name] = fp.full

    def reshard(self):
        for fp in self.params:
            fp.owner._parameters[fp.name] = fp.sharded
            fp.full = None

    # ---- backward: re-gather with prefetch ------------------------------------------------
    def _backward_targets(self):
        if self.prefetch_backward is not None:
            return [m._fsdp_unit for m in self.prefetch_backward]
        order = self.state.post_order
        i = next((k for k, u in enumerate(order) if u is self), None)
        return [order[i - 1]] if i else []

    def start_backward_gather(self):
        if self.reshard_after_forward and not self.bwd_started:
            if any([fp.start_gather() for fp in self.params if fp.bwd_full is None]):
                trace("all_gather", self)

    def begin_backward(self):
        """This unit's first re-gather of the backward pass: issue its own all-gathers, then
        those of the units that run backward next."""
        self.state.queue_finish()
        self.start_backward_gather()
        self.bwd_started = True
        for u in self._backward_targets():
            u.start_backward_gather()

    # saved-tensor hooks: gathered parameters (and views of them) saved by the forward become
    # handles, gathered again when backward unpacks them
    def pack(self, t):
        for i, fp in enumerate(self.params):
            if fp.full is None:
                continue
            # (a view of the gathered buffer: same storage; fp.full starts it, contiguous)
            if t is fp.full or (fp.tp is None and t._storage is fp.full._storage):
                return (_Handle, i, tuple(t._shape), tuple(t._stride), t._offset, t is fp.full)
        return t

    def unpack(self, packed):
        if not (isinstance(packed, tuple) and packed and packed[0] is _Handle):
            return packed
        _, i, shape, stride, offset, whole = packed
        fp = self.params[i]
        if fp.bwd_full is None:
            if not self.bwd_started:
                self.begin_backward()
                trace("all_gather_wait", self)
            with ember.no_grad():
                full = fp.gather()
                dt = self.mp.param_dtype
                fp.bwd_full = fp.wrap_full((full.to(dt) if dt is not None else full).contiguous())
        return fp.bwd_full if whole else fp.bwd_full._alias(shape, stride, offset)


class _Handle:
    pass


def _cast(x, dtype):
    if isinstance(x, ember.Tensor) and x.is_floating_point() and dtype is not None:
        return x.to(dtype)
    if isinstance(x, (tuple, list)):
        return type(x)(_cast(v, dtype) for v in x)
    return x


class UnshardHandle:
    """FSDPModule.unshard(async_op=True): wait() finishes the gather (the next forward would)."""

    def __init__(self, unit):
        self._unit = unit

    def wait(self) -> None:
        if self._unit is not None:
            self._unit.unshard()
            self._unit = None


class FSDPModule:
    """Mixed into a module's class by fully_shard (isinstance(module, FSDPModule))."""

    def unshard(self, async_op: bool = False):
        """Gather this unit's parameters now (the next forward uses them); async_op: issue the
        all-gathers and return a handle whose wait() finishes them."""
        unit = self._fsdp_unit
        if async_op:
            unit.start_unshard()
            return UnshardHandle(unit)
        unit.unshard()
        return None

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
        """When this unit's forward starts, issue the all-gathers of `modules` (FSDP modules
        that run next) right after its own, so they travel while this unit computes."""
        _check_fsdp(modules, "set_modules_to_forward_prefetch")
        self._fsdp_unit.prefetch_forward = list(modules)

    def set_modules_to_backward_prefetch(self, modules) -> None:
        """When this unit's backward starts, issue the re-gathers of `modules` (default: the
        unit whose forward ended just before this one's)."""
        _check_fsdp(modules, "set_modules_to_backward_prefetch")
        self._fsdp_unit.prefetch_backward = list(modules)

    def set_reshard_after_forward(self, reshard_after_forward: bool, recurse=True):
        mods = self.modules() if recurse else [self]
        for m in mods:
            if isinstance(m, FSDPModule):
                m._fsdp_unit.reshard_after_forward = bool(reshard_after_forward)


def _check_fsdp(modules, what):
    for m in modules:
        if not isinstance(m, FSDPModule):
            raise ValueError(f"{what}: expected FSDP modules (fully_shard applied), got "
                             f"{type(m).__name__}")


def _pre_forward(unit):
    def hook(module, args, kwargs):
        st = unit.state
        if unit is st.units[-1]:  # the root: a new iteration
            if st.pending_rs:
                st.finish_backward()
            st.post_order = []
            for u in st.units:
                u.bwd_started = False
        trace("forward", unit)
        unit.unshard()
        for m in unit.prefetch_forward or ():
            m._fsdp_unit.start_unshard()
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
        unit.state.post_order.append(unit)
        return _cast(out, unit.mp.output_dtype) if unit.mp.output_dtype is not None else out
    return hook


def _spmd_mesh(p, mesh):
    """FSDP + TP: the 2-D ("dp", "tp") mesh that `mesh` (dp) and p's TP mesh are slices of."""
    tp_mesh = p.device_mesh
    root = getattr(mesh, "_root", None)
    if (mesh.ndim != 1 or tp_mesh.ndim != 1 or root is None or root.ndim != 2
            or getattr(tp_mesh, "_root", None) is not root
            or mesh.get_group(0) is not root.get_group(0)
            or tp_mesh.get_group(0) is not root.get_group(1)):
        raise NotImplementedError(
            "fully_shard: a DTensor parameter must come from parallelize_module on mesh['tp'] "
            "and fully_shard must get mesh['dp'] of the same 2-D (dp, tp) mesh")
    return root


def _shard_param(unit, owner, name, p, mesh):
    if isinstance(p, DTensor):  # FSDP + TP
        spmd = _spmd_mesh(p, mesh)
        tp_local = p._local_tensor.detach()
        n, me = mesh.size(0), mesh.get_local_rank(0)
        if tp_local.dim():
            sizes = shard_sizes(tp_local.shape[0], n)
            local = tp_local.narrow(0, sum(sizes[:me]), sizes[me]).clone().contiguous()
            # dp splits the TP piece: where TP shards dim 0 too, dp's split comes second
            ps = ((_StridedShard(0, mesh.size(0)) if p.placements[0] == Shard(0) else Shard(0)),
                  *p.placements)
        else:
            local, ps = tp_local.clone(), (Replicate(), *p.placements)
        d = DTensor._wrap(local, spmd, ps, tuple(p.shape))
        tp = (p.device_mesh, p.placements, tuple(tp_local.shape))
    else:
        ps = [Replicate()] * (mesh.ndim - 1) + [Shard(0) if p.dim() else Replicate()]
        d, tp = distribute_tensor(p.detach(), mesh, ps, src_data_rank=None), None
    if unit.offload is not None:
        d = DTensor._wrap(_to_host(d._local_tensor, unit.offload), d.device_mesh, d.placements,
                          tuple(d.shape))
    sharded = ember.nn.Parameter(d, p.requires_grad)
    owner._parameters[name] = sharded
    unit.params.append(FSDPParam(unit, owner, name, sharded, tp))


def _to_host(t, policy):
    """t in host memory (page-locked if asked and an accelerator can pin it), contiguous."""
    h = t.detach().to("cpu").contiguous()
    if policy.pin_memory:
        try:
            h = h.pin_memory()
        except RuntimeError:  # no accelerator backend installed: ordinary host memory
            pass
    return h


def _adopt(unit, module):
    """The root's state takes in the inner units' (one forward order, one backward end)."""
    inner = []
    for m in module.modules():
        if m is not module and isinstance(m, FSDPModule):
            old = m._fsdp_unit.state
            if old is unit.state:
                continue
            for u in old.units:
                u.state = unit.state
            inner += old.units
    unit.state.units[:0] = inner
    return {id(fp.sharded) for u in unit.state.units for fp in u.params}


def _default_mesh_device(module) -> str:
    """torch's default mesh is on the accelerator: here too where the module's parameters are
    on it or not yet anywhere (meta); a CPU module keeps a CPU mesh."""
    import ember
    acc = ember.accelerator.current_accelerator()
    if acc is None:
        return "cpu"
    devs = {p.device.type for p in module.parameters()}
    return acc.type if devs and devs <= {acc.type, "meta"} else "cpu"


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
        mesh = init_device_mesh(_default_mesh_device(module), (_group.get_world_size(),))
    if mesh.ndim not in (1, 2):
        raise ValueError(f"fully_shard: a 1-D mesh (FSDP) or 2-D mesh (HSDP: replicate, shard), "
                         f"got {mesh.ndim}-D")
    if shard_placement_fn is not None:
        raise NotImplementedError("fully_shard: shard_placement_fn is not supported")
    if offload_policy is not None and not isinstance(offload_policy, OffloadPolicy):
        raise TypeError(f"fully_shard: offload_policy must be an OffloadPolicy, got "
                        f"{type(offload_policy).__name__}")
    if isinstance(module, FSDPModule):
        return module
    unit = _Unit(module, mesh, reshard_after_forward, mp_policy or MixedPrecisionPolicy(),
                 offload_policy)
    taken = _adopt(unit, module)
    ignored = {id(p) for p in ignored_params or ()}
    seen = set()
    for _, owner in module.named_modules():
        for name, p in list(owner._parameters.items()):
            if p is None or id(p) in taken or id(p) in ignored:
                continue
            if id(p) in seen:
                raise NotImplementedError("fully_shard: shared (tied) parameters are not "
                                          "supported")
            seen.add(id(p))
            _shard_param(unit, owner, name, p, mesh)
    module._fsdp_unit = unit
    module.register_forward_pre_hook(_pre_forward(unit), with_kwargs=True)
    module.register_forward_hook(_post_forward(unit))
    cls = module.__class__
    module.__class__ = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {})
    return module
