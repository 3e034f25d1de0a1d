"""`ember.accelerator`: device-agnostic queries over the device registry (as torch.accelerator).

The accelerator is the first registered backend that marks itself `is_accelerator` and is
available (ember-devices registers cuda); on a machine without one, it is None.
"""
from __future__ import annotations

from ._device import _BACKENDS
from ._device import device as Device

__all__ = ["is_available", "current_accelerator", "device_count", "synchronize",
           "current_device_index", "set_device_index", "current_device_idx", "set_device_idx",
           "device_index"]


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


current_device_idx = current_device_index  # PyTorch 2.6's names, kept as aliases there too
set_device_idx = set_device_index


class device_index:
    """`with ember.accelerator.device_index(i):` makes accelerator device i current inside the
    block and restores the previous one after; None leaves the current device alone. Creating
    one without `with` changes nothing (as torch's)."""

    def __init__(self, device: int | None, /):
        self.idx = device
        self.prev_idx = -1

    def __enter__(self):
        if self.idx is not None:
            self.prev_idx = current_device_index()
            if self.prev_idx != self.idx:
                set_device_index(self.idx)
        return self

    def __exit__(self, *exc) -> bool:
        if self.idx is not None and self.prev_idx != self.idx:
            set_device_index(self.prev_idx)
        return False


def synchronize(device=None) -> None:
    """Wait for all work queued on the accelerator (a no-op without one)."""
    b = _backend()
    if b is not None:
        b.synchronize(None if device is None else Device(device).index)
