"""parallelize_module: apply a ParallelStyle, or a plan {module path (fnmatch patterns): style}."""
from __future__ import annotations

import fnmatch

from .style import ParallelStyle

__all__ = ["parallelize_module"]


def parallelize_module(module, device_mesh=None, parallelize_plan=None, *, src_data_rank=0):
    """`parallelize_module(model, mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})`:
    parameters of the named submodules become DTensors and their forward passes convert
    inputs/outputs as the styles say. Returns the module (changed in place)."""
    from ... import _group
    from ..._device_mesh import init_device_mesh
    mesh = device_mesh or init_device_mesh("cpu", (_group.get_world_size(),))
    if mesh.ndim != 1:
        raise ValueError("parallelize_module: pass a 1-D mesh (slice a n-D mesh by name)")
    if parallelize_plan is None:
        return module
    if isinstance(parallelize_plan, ParallelStyle):
        parallelize_plan._src_data_rank = src_data_rank
        return parallelize_plan._apply(module, mesh)
    if not isinstance(parallelize_plan, dict):
        raise TypeError(f"parallelize_module: a ParallelStyle or a dict plan, got "
                        f"{type(parallelize_plan).__name__}")
    for path, style in parallelize_plan.items():
        found = False
        for name, sub in module.named_modules():
            if name and fnmatch.fnmatchcase(name, path):
                parallelize_module(sub, mesh, style, src_data_rank=src_data_rank)
                found = True
        if not found:
            raise ValueError(f"parallelize_module: no submodule matches {path!r}")
    return module
