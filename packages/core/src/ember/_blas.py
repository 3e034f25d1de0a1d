"""How many threads numpy's BLAS (OpenBLAS) may use for one GEMM, chosen by its size.

OpenBLAS splits every GEMM over all cores and its threads spin-wait for each other: on a busy
machine (more runnable processes than cores) a descheduled worker stalls the whole call, and a
1 ms GEMM of an MLP layer was seen taking 40 ms. Tiny GEMMs gain nothing from a second thread, so
the kernels ask `gemm_threads(flops)` first: one thread per 64 MFLOP of work (measured on an idle
2-core machine: gpt_train 373 -> 293 ms, mlp_train 14.9 -> 11.9 ms against 1 GFLOP), capped by
`ember.set_num_threads` (default: all cores), and by the cores other processes leave free
(`free_cores`: on a 2-core machine at load 6, a 256x784x512 GEMM took 64 ms on two threads and
7 ms on one). Without an OpenBLAS we can reach through ctypes this is a no-op.
"""
from __future__ import annotations

import ctypes
import glob
import os
import time

import numpy as np

__all__ = ["gemm_threads", "set_max_threads", "max_threads", "free_cores"]

FLOPS_PER_THREAD = 1 << 26  # 64 MFLOP: idle, the GPT/MLP GEMMs gain from a second thread
# (EMBER_GEMM_FLOPS_PER_THREAD: for an A/B on an idle machine; the GPT's 128x128 projections,
# 2^26 FLOP each, run on one thread at this value)
FLOPS_PER_THREAD = int(os.environ.get("EMBER_GEMM_FLOPS_PER_THREAD", FLOPS_PER_THREAD))
_SYMBOLS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_",
            "openblas_set_num_threads")
_set = None      # the library's set_num_threads, or None
_current = None  # what we last set (None: the library's own default)
_max = os.cpu_count() or 1
_NCPU = os.cpu_count() or 1
_LOAD_AWARE = os.environ.get("EMBER_LOAD_AWARE", "1") != "0"
_free = [_NCPU, -1.0]  # cores left free by other processes, when it was read (monotonic s)


def free_cores() -> int:
    """Cores a multithreaded kernel can count on: all of them, less what the 1-minute load
    average says other processes keep busy (this process counts for the BLAS threads it last
    used: a busy 2-thread run of ours alone must not read as a loaded machine), at least one;
    read at most once a second. Threads beyond it get descheduled, and spin-waiting or statically
    split kernels then wait for them. EMBER_LOAD_AWARE=0: always all cores."""
    now = time.monotonic()
    if now - _free[1] < 1.0:
        return _free[0]
    n = _NCPU
    if _LOAD_AWARE:
        try:
            others = os.getloadavg()[0] - (_current or 1)
        except OSError:
            others = 0.0
        n = max(1, min(_NCPU, int(_NCPU - others + 0.5)))
    _free[0], _free[1] = n, now
    return n


def _find_setter():
    libdir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libdir, "*openblas*"))):
        try:
            lib = ctypes.CDLL(path)  # already loaded by numpy: this returns the same handle
        except OSError:
            continue
        for name in _SYMBOLS:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.argtypes, fn.restype = [ctypes.c_int], None
                return fn
    return None


try:
    _set = _find_setter()
except Exception:  # noqa: BLE001 - best effort: BLAS threading is an optimization only
    _set = None


def gemm_threads(flops: int) -> None:
    """Set the BLAS thread count for a GEMM of `flops` floating-point operations."""
    global _current
    n = flops // FLOPS_PER_THREAD
    n = 1 if n < 1 else (_max if n > _max else n)
    if n > 1:
        n = min(n, free_cores())
    if n != _current and _set is not None:
        _set(n)
        _current = n


def set_max_threads(n: int) -> None:
    global _max, _current
    _max = n
    _current = None


def max_threads() -> int:
    return _max
