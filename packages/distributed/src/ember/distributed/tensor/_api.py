"""distribute_module: parameters and buffers of a module become DTensors (torch's API)."""
from __future__ import annotations

import ember

from ._dtensor import DTensor, distribute_tensor
from ._placements import Replicate

__all__ = ["distribute_module"]


def _replicate_all(name, module, mesh):
    for key, p in list(module._parameters.items()):
        if p is not None and not isinstance(p, DTensor):
            module.register_parameter(key, ember.nn.Parameter(
                distribute_tensor(p.data, mesh, [Replicate()] * mesh.ndim), p.requires_grad))
    for key, b in list(module._buffers.items()):
        if b is not None and not isinstance(b, DTensor):
            module._buffers[key] = distribute_tensor(b, mesh, [Replicate()] * mesh.ndim)


def distribute_module(module, device_mesh=None, partition_fn=None, input_fn=None,
                      output_fn=None):
    """Run `partition_fn(name, submodule, mesh)` on every submodule (default: replicate the
    parameters and buffers it holds), then wrap forward with `input_fn(module, inputs, mesh)`
    and `output_fn(module, outputs, mesh)` as forward pre/post hooks."""
    import ember.distributed as dist

    from .._device_mesh import init_device_mesh
    mesh = device_mesh or init_device_mesh("cpu", (dist.get_world_size(),))
    for name, sub in module.named_modules():
        (partition_fn or _replicate_all)(name, sub, mesh)
        if partition_fn is not None:
            _replicate_all(name, sub, mesh)  # what partition_fn left: replicated, as torch
    if input_fn is not None:
        module.register_forward_pre_hook(lambda mod, inputs: input_fn(mod, inputs, mesh))
    if output_fn is not None:
        module.register_forward_hook(lambda mod, inputs, outputs: output_fn(mod, outputs, mesh))
    return module
