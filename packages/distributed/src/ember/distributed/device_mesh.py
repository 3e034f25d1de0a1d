"""`ember.distributed.device_mesh` (torch's module path)."""
from ._device_mesh import DeviceMesh, init_device_mesh

__all__ = ["DeviceMesh", "init_device_mesh"]
