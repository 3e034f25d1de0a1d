"""Errors found by kernels, reported at the next synchronizing call (ember's device-side assert).

A kernel that finds bad input (an embedding index out of range) stores a nonzero code into its
device's error word and goes on without touching memory out of bounds; nothing waits for it.
The word lives in page-locked host memory mapped into the device, so the host reads it with no
copy: every call that waits for the device (a copy to the host, `.item()`, `synchronize()`,
stream and event synchronize) reads it after waiting and raises the code's error there, then
clears it.

Why not check on the host at the call: that needs a device-to-host copy, and so a wait for
the GPU, on every call (the embedding of every training step). PyTorch on CUDA does not check
at the call either: its kernels' device-side asserts surface as a RuntimeError at a later CUDA
call and leave the context unusable. Here the later call raises the error the CPU raises
(IndexError, "index out of range in self", naming the op), and the device stays usable.
"""
from __future__ import annotations

import ctypes

from . import driver as rt

__all__ = ["word", "raise_pending", "EMBEDDING_INDEX", "WORDS"]

# error codes a kernel stores (plain stores: the last one written wins)
EMBEDDING_INDEX = 1
_MESSAGES = {EMBEDDING_INDEX: (IndexError, "embedding: index out of range in self")}

_WORDS: dict = {}  # device index -> (device address, host address)
WORDS: set = set()  # their device addresses (native plans pass them as constants)
_PORTABLE, _DEVICEMAP = 1, 2  # CU_MEMHOSTALLOC_*: every context; mapped into the devices


def word(index: int) -> int:
    """The device address of device `index`'s error word (an int32), made on first use."""
    w = _WORDS.get(index)
    if w is None:
        w = _WORDS[index] = _alloc(index)
        WORDS.add(w[0])
    return w[0]


def _alloc(index: int):
    if rt.FAKE:  # host memory already: one allocation of that device (multi-device checks)
        p = rt.raw_alloc(8, index)
        ctypes.memset(p, 0, 8)
        return p, p
    d = rt.cu()
    rt.context(index)
    host = int(rt.check(d.cuMemHostAlloc(8, _PORTABLE | _DEVICEMAP)))
    ctypes.memset(host, 0, 8)
    dev = int(rt.check(d.cuMemHostGetDevicePointer(host, 0)))
    return dev, host


def raise_pending() -> None:
    """Raise (and clear) the error a kernel reported, if any (call it after waiting)."""
    if not _WORDS:
        return
    for index, (_, host) in _WORDS.items():
        code = ctypes.c_int32.from_address(host).value
        if code:
            ctypes.c_int32.from_address(host).value = 0
            exc, msg = _MESSAGES.get(code, (RuntimeError, f"device error {code}"))
            raise exc(f"{msg} (found on cuda:{index} by an earlier call; reported when the "
                      "device was waited for, as CUDA reports a device-side assert)")
