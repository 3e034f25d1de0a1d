"""get/set state dicts of models and optimizers with parameter names as keys
(torch.distributed.checkpoint.state_dict's API): the optimizer's state is keyed by each
parameter's fully qualified name instead of its index, so it loads across wrappings and
world sizes. With `StateDictOptions(full_state_dict=True)` DTensors become whole tensors."""
from __future__ import annotations

from dataclasses import dataclass

import ember

from ..tensor._dtensor import DTensor

__all__ = ["StateDictOptions", "get_state_dict", "set_state_dict", "get_model_state_dict",
           "get_optimizer_state_dict", "set_model_state_dict", "set_optimizer_state_dict"]


@dataclass
class StateDictOptions:
    full_state_dict: bool = False
    cpu_offload: bool = False
    ignore_frozen_params: bool = False
    keep_submodule_prefixes: bool = True
    strict: bool = True
    broadcast_from_rank0: bool = False
    flatten_optimizer_state_dict: bool = False


def _opts(options):
    return options if options is not None else StateDictOptions()


def _full(v, options):
    if isinstance(v, DTensor) and options.full_state_dict:
        v = v.full_tensor()
    if isinstance(v, ember.Tensor) and options.cpu_offload:
        v = v.cpu()
    return v


def _list(optimizers):
    return list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]


def _names(model) -> dict:
    """{id(param): fully qualified name}."""
    return {id(p): n for n, p in model.named_parameters()}


def get_model_state_dict(model, *, submodules=None, options=None) -> dict:
    """model.state_dict() (DTensors stay sharded unless options.full_state_dict)."""
    o = _opts(options)
    sd = model.state_dict()
    if o.ignore_frozen_params:
        frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
        sd = {k: v for k, v in sd.items() if k not in frozen}
    return {k: _full(v, o) for k, v in sd.items()}


def get_optimizer_state_dict(model, optimizers, *, submodules=None, options=None) -> dict:
    """The optimizers' state with parameter names for keys: {"state": {fqn: {...}},
    "param_groups": [{..., "params": [fqn, ...]}]}."""
    o = _opts(options)
    names = _names(model)
    state, groups = {}, []
    for opt in _list(optimizers):
        sd = opt.state_dict()
        ids = [id(p) for g in opt.param_groups for p in g["params"]]
        for idx, s in sd["state"].items():
            state[names[ids[idx]]] = {k: _full(v, o) for k, v in s.items()}
        for g in sd["param_groups"]:
            groups.append(dict(g, params=[names[ids[i]] for i in g["params"]]))
    return {"state": state, "param_groups": groups}


def get_state_dict(model, optimizers, *, submodules=None, options=None):
    """(get_model_state_dict(model), get_optimizer_state_dict(model, optimizers))."""
    return (get_model_state_dict(model, options=options),
            get_optimizer_state_dict(model, optimizers, options=options))


def set_model_state_dict(model, model_state_dict, *, options=None):
    """Load into the model; whole tensors load into DTensor parameters (each rank keeps its
    piece) and DTensors of any placement into plain or DTensor parameters."""
    o = _opts(options)
    cur = model.state_dict()
    if o.broadcast_from_rank0:
        model_state_dict = _broadcast_full(model_state_dict, cur)
    # whole tensors become DTensors laid out as the parameters they load into; a model still on
    # the meta device (built there, sharded, not materialized) takes them by assignment
    meta = any(isinstance(v, ember.Tensor) and v.device.type == "meta" for v in cur.values())
    sd = {k: _like(v, cur[k]) if k in cur else v for k, v in model_state_dict.items()}
    return model.load_state_dict(sd, strict=o.strict, assign=meta)


def _broadcast_full(sd, cur):
    """Rank 0's whole tensors to every rank (the others' sd may be empty), over the device the
    default group talks on (cuda for an NCCL-only group); they stay there."""
    from .. import _collectives as C
    from .._group import get_rank
    dev = C._comm_device()
    out = {}
    for k, ref in cur.items():
        if not isinstance(ref, ember.Tensor):
            continue
        if get_rank() == 0:
            t = sd[k].detach().to(device=dev, dtype=ref.dtype).contiguous().clone()
        else:
            t = ember.empty(tuple(ref.shape), dtype=ref.dtype, device=dev)
        C.broadcast(t, src=0)
        out[k] = t
    return out


def _broadcast_tree(tree):
    """Rank 0's nested dicts / lists of tensors and plain values to every rank: the layout as
    plain data (broadcast_object_list), then each tensor over the group's device."""
    from .. import _collectives as C
    from .._group import get_rank
    from .._objects import broadcast_object_list
    dev = C._comm_device()
    tensors = []

    def strip(x):
        if isinstance(x, ember.Tensor):
            tensors.append(x)
            return ("__tensor__", tuple(x.shape), x.dtype.name, x.device.type)
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(strip(v) for v in x)
        return x

    box = [strip(tree) if get_rank() == 0 else None]
    broadcast_object_list(box, src=0)
    it = iter(tensors)

    def fill(x):
        if isinstance(x, tuple) and len(x) == 4 and x[0] == "__tensor__":
            dtype = getattr(ember, x[2])
            if get_rank() == 0:
                t = next(it).detach().to(device=dev).contiguous().clone()
            else:
                t = ember.empty(x[1], dtype=dtype, device=dev)
            C.broadcast(t, src=0)
            return t.cpu() if x[3] == "cpu" else t
        if isinstance(x, dict):
            return {k: fill(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(fill(v) for v in x)
        return x

    return fill(box[0])


def set_optimizer_state_dict(model, optimizers, optim_state_dict, *, options=None) -> None:
    """Load name-keyed optimizer state (from get_optimizer_state_dict) into the optimizers."""
    if _opts(options).broadcast_from_rank0:
        optim_state_dict = _broadcast_tree(optim_state_dict)
    by_name = dict(model.named_parameters())
    groups = list(optim_state_dict["param_groups"])
    for opt in _list(optimizers):
        index, state, pgs = {}, {}, []
        for g in opt.param_groups:
            names = [n for p in g["params"] for n, q in by_name.items() if q is p]
            saved = next((sg for sg in groups if set(sg["params"]) == set(names)), None)
            if saved is None:
                raise ValueError("set_optimizer_state_dict: no saved param group holds "
                                 f"parameters {names}")
            for n in names:
                index[n] = len(index)
            pgs.append(dict(saved, params=[index[n] for n in names]))
        for n, s in optim_state_dict["state"].items():
            if n in index:
                p = by_name[n]
                state[index[n]] = {k: _like(v, p) for k, v in s.items()}
        opt.load_state_dict({"state": state, "param_groups": pgs})


def _like(v, p):
    """A whole tensor of the parameter's shape becomes a DTensor laid out as the parameter."""
    if isinstance(p, DTensor) and isinstance(v, ember.Tensor) and not isinstance(v, DTensor) \
            and tuple(v.shape) == tuple(p.shape):
        from ..tensor._redistribute import from_full
        v = v.detach()
        if v.device.type != p.device_mesh.device_type:
            v = v.to(p.device_mesh.device_type)  # the pieces live on the mesh's device type
        return DTensor._wrap(from_full(v, p.device_mesh, p.placements),
                             p.device_mesh, p.placements, p.shape)
    return v


def set_state_dict(model, optimizers, *, model_state_dict, optim_state_dict, options=None):
    """set_model_state_dict and set_optimizer_state_dict in one call."""
    r = set_model_state_dict(model, model_state_dict, options=options)
    set_optimizer_state_dict(model, optimizers, optim_state_dict, options=options)
    return r


def _init_optim_state(optim) -> None:
    """Create the optimizer's state (as torch's helper of this name: one step with zero
    gradients and lr 0, then the gradients dropped), so a state dict of the right layout exists
    to load into. Nothing happens if the state exists already."""
    if optim.state:
        return
    for group in optim.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                raise RuntimeError("_init_optim_state: a parameter already has a gradient")
            if p.requires_grad:
                p.grad = ember.zeros_like(p)
    lrs = [g["lr"] for g in optim.param_groups]
    for g in optim.param_groups:
        g["lr"] = 0.0
    optim.step()
    for g, lr in zip(optim.param_groups, lrs):
        g["lr"] = lr
    optim.zero_grad(set_to_none=True)
