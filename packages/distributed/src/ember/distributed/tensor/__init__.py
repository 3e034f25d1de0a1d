"""`ember.distributed.tensor`: DTensor (an ember.Tensor spread over a DeviceMesh), placements,
distribute_tensor / distribute_module, from_local / to_local / full_tensor / redistribute, and ops
on DTensors with sharding propagation (see _dispatch.py and _rules.py)."""
from .._device_mesh import DeviceMesh, init_device_mesh
from ._api import distribute_module
from ._dtensor import DTensor, distribute_tensor
from ._placements import Partial, Placement, Replicate, Shard

__all__ = ["DTensor", "DeviceMesh", "init_device_mesh", "distribute_tensor", "distribute_module",
           "Placement", "Shard", "Replicate", "Partial"]
