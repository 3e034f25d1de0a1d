"""PyTorch's `Tensor.is_*` predicates that ember lacked (issue 11, defect 26): device predicates
(`is_xpu`, `is_mps`, ... true when the tensor's device has that type, so a plugin registering
the device type gets them right), layout ones (ember tensors are dense and strided) and the
small `is_*()` methods. `is_cpu`, `is_cuda`, `is_meta`, `is_sparse`, ... live in _tensor.py.
"""
from __future__ import annotations

__all__ = ["install"]

# Tensor properties of PyTorch 2.13 that are true on a device of that type
DEVICE_PREDICATES = {"is_xpu": "xpu", "is_mps": "mps", "is_ipu": "ipu", "is_xla": "xla",
                     "is_vulkan": "vulkan", "is_maia": "maia", "is_mtia": "mtia"}
# layouts and tensor kinds ember does not have
ALWAYS_FALSE = ("is_mkldnn", "is_sparse_csr")


def _device_predicate(device_type: str):
    def get(self) -> bool:
        return self.device.type == device_type
    get.__name__ = f"is_{device_type}"
    get.__doc__ = f"Whether the tensor is on a {device_type!r} device."
    return property(get)


def _false(name: str):
    def get(self) -> bool:
        return False
    get.__name__ = name
    return property(get)


def is_signed(self) -> bool:
    """Whether the dtype is signed (every float and complex dtype, int8..int64)."""
    return self.dtype.is_signed


def is_nonzero(self) -> bool:
    """The truth value of a one-element tensor (errors as PyTorch's for other sizes)."""
    n = self.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(self.item())


def is_same_size(self, other) -> bool:
    return tuple(self.shape) == tuple(other.shape)


def is_set_to(self, tensor) -> bool:
    """Whether both tensors view the same storage with the same offset, sizes and strides."""
    return (self._storage is tensor._storage and self._offset == tensor._offset
            and self._shape == tensor._shape and self._stride == tensor._stride)


def is_coalesced(self) -> bool:
    raise RuntimeError("is_coalesced expected sparse coordinate tensor layout but got Strided")


def _false_method(name: str):
    def f(self) -> bool:
        return False
    f.__name__ = name
    return f


def install(Tensor) -> None:
    for name, dev in DEVICE_PREDICATES.items():
        setattr(Tensor, name, _device_predicate(dev))
    for name in ALWAYS_FALSE:
        setattr(Tensor, name, _false(name))
    # ember has no lazy conj/neg bits, no distributed (THD) tensors and no shared-memory storages
    for name in ("is_conj", "is_neg", "is_distributed", "is_shared"):
        setattr(Tensor, name, _false_method(name))
    for f in (is_signed, is_nonzero, is_same_size, is_set_to, is_coalesced):
        setattr(Tensor, f.__name__, f)
