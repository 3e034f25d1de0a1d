"""`ember.distributed.tensor`: DTensor placements, distribute_tensor, from_local, to_local,
full_tensor and redistribute between any placements over a DeviceMesh.

Not yet: ops on DTensors (sharding propagation) — a DTensor is a container here, not an
ember.Tensor subclass; compute on `to_local()` and wrap the result with `DTensor.from_local`.
"""
from .._device_mesh import DeviceMesh, init_device_mesh
from ._dtensor import DTensor, distribute_tensor
from ._placements import Partial, Placement, Replicate, Shard

__all__ = ["DTensor", "DeviceMesh", "init_device_mesh", "distribute_tensor", "Placement",
           "Shard", "Replicate", "Partial"]
