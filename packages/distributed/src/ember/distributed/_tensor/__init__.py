"""`ember.distributed._tensor`: the older import path of `ember.distributed.tensor`, kept as
PyTorch keeps `torch.distributed._tensor` (scripts written for PyTorch 2.0-2.3 import DTensor,
DeviceMesh and the placements from here)."""
from ..tensor import (
                      DeviceMesh,
                      DTensor,
                      Partial,
                      Placement,
                      Replicate,
                      Shard,
                      distribute_module,
                      distribute_tensor,
                      init_device_mesh,
)

__all__ = ["DTensor", "DeviceMesh", "init_device_mesh", "distribute_tensor", "distribute_module",
           "Placement", "Shard", "Replicate", "Partial"]
