"""`ember.accelerator`: device-agnostic queries over the device registry (as torch.accelerator).

The accelerator is the first registered backend that marks itself `is_accelerator` and is
available (ember-devices registers cuda); on a machine without one, it is None.
"""
from __future__ import annotations

from ._device import _BACKENDS
from ._device import device as Device

__all__ = ["is_available", "current_accelerator", "device_count", "synchronize",
           "current_device_index", "set_device_index"]


def _backend():
    from ._components import ensure_loaded
    ensure_loaded()
    for b in _BACKENDS.values():
        if b.is_accelerator and b.is_available():
            return b
    return None


def is_available() -> bool:
    """Whether an accelerator device is present and usable."""
    return _backend() is not None


def current_accelerator(check_available: bool = False):
    """The accelerator's device type as an `ember.device`, or None."""
    b = _backend()
    return Device(b.type) if b is not None else None


def device_count() -> int:
    b = _backend()
    return b.device_count() if b is not None else 0


def current_device_index() -> int:
    b = _backend()
    return b.current_device() if b is not None else -1


def set_device_index(index: int) -> None:
    b = _backend()
    if b is None:
        raise RuntimeError("ember.accelerator.set_device_index: no accelerator is available")
    b.set_device(index)


def synchronize(device=None) -> None:
    """Wait for all work queued on the accelerator (a no-op without one)."""
    b = _backend()
    if b is not None:
        b.synchronize(None if device is None else Device(device).index)
