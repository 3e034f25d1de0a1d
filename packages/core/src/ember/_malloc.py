"""glibc malloc settings for big CPU buffers: freed ones stay in the heap for the next op.

By default glibc serves large blocks with fresh mmaps (its threshold grows to a few MB) and
hands freed memory back to the OS soon after, so every new tensor of a few MB faults its pages
in again and zero-fills them: in the CPU GPT benchmark's step (hundreds of 1-4 MB temporaries)
that was about 15-20% of the step's CPU time. Raising the mmap threshold to glibc's maximum
(32 MB) and the trim threshold to 256 MB keeps such buffers in the heap (at most that much free
memory retained), as PyTorch's caching allocators keep theirs on the GPU.
EMBER_MALLOC_TUNE=0, or the user's own MALLOC_*_ / GLIBC_TUNABLES malloc settings, leave glibc's
defaults. A no-op off glibc.
"""
from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["tune"]

MMAP_THRESHOLD = 32 << 20    # glibc's cap for M_MMAP_THRESHOLD on 64-bit
TRIM_THRESHOLD = 256 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
tuned = False


def tune() -> bool:
    """Apply the settings once (True when they were applied)."""
    global tuned
    if tuned:
        return True
    env = os.environ
    if (env.get("EMBER_MALLOC_TUNE", "1") == "0" or not sys.platform.startswith("linux")
            or "malloc" in env.get("GLIBC_TUNABLES", "")
            or any(k.startswith("MALLOC_") and k.endswith("_") for k in env)):
        return False
    try:
        libc = ctypes.CDLL(None)
        if not hasattr(libc, "gnu_get_libc_version"):   # musl and others: their own malloc
            return False
        mallopt = libc.mallopt
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        tuned = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
            bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    except (OSError, AttributeError):
        return False
    return tuned
