"""OpenBLAS's idle worker threads sleep right after a GEMM instead of spinning.

numpy's OpenBLAS (pthreads) keeps its worker threads spinning (sched_yield) for 2^28 cycles
(~0.1 s) after every multithreaded GEMM. In a compiled CPU training step a GEMM follows nearly
every kernel, so the worker spins all step long on the second core, which the kernels' OpenMP
thread and the batched-matmul worker (`_bmm`) then share with it: GPT step at 2 threads, load
1.4 (2026-11-26), 286 / 292 ms with the spin, 223 / 248 ms with OPENBLAS_THREAD_TIMEOUT=4 (the
OpenBLAS worker's CPU 282 -> 94 ms a step). OpenBLAS reads the variable once, when numpy loads
it, so it is set around ember's own first `import numpy` and removed after (child processes do
not inherit it). A no-op when numpy was imported before ember or OPENBLAS_THREAD_TIMEOUT is set;
EMBER_BLAS_SPIN=1 keeps OpenBLAS's default.
"""
from __future__ import annotations

import os
import sys

__all__ = ["applied"]

TIMEOUT = "4"   # 2^4 cycles: OpenBLAS's minimum (its workers sleep at once)


def _apply() -> bool:
    env = os.environ
    if "numpy" in sys.modules or "OPENBLAS_THREAD_TIMEOUT" in env \
            or env.get("EMBER_BLAS_SPIN") == "1":
        return False
    env["OPENBLAS_THREAD_TIMEOUT"] = TIMEOUT
    try:
        import numpy  # noqa: F401 - OpenBLAS initializes here and reads the variable
    finally:
        env.pop("OPENBLAS_THREAD_TIMEOUT", None)
    return True


applied = _apply()
