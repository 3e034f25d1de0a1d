"""glibc malloc settings for compiled CPU graphs: large buffers stay in the heap.

A compiled step allocates its intermediate buffers (and the extern GEMMs their outputs) afresh
at every call. glibc serves allocations above its mmap threshold (128 KiB, adapting upwards only
to freed sizes) with fresh `mmap`s and returns them with `munmap` on free, so every step
page-faults and zeroes megabytes of new pages: measured on the workloads' small GPT (one
thread) 0.43 -> 0.35 s a step. When the first CPU graph loads, the mmap threshold is raised to
glibc's maximum (32 MiB) and the heap is trimmed only above 512 MiB free, so freed buffers are
reused from the heap (what jemalloc / tcmalloc do for PyTorch). Process-wide; the resident
size then keeps its peak. EMBER_CPU_MALLOC_TUNE=0 leaves malloc alone; non-glibc platforms are
untouched.
"""
from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["tune"]

_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 512 << 20
TOP_PAD = 64 << 20
_done = [False]


def tune() -> bool:
    """Apply the settings once per process; whether they are in effect."""
    if _done[0]:
        return True
    _done[0] = True
    if os.environ.get("EMBER_CPU_MALLOC_TUNE", "1") == "0" or not sys.platform.startswith(
            "linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    ok = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and ok
    ok = mallopt(_M_TOP_PAD, TOP_PAD) == 1 and ok
    return ok
