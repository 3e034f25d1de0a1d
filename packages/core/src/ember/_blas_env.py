"""OpenBLAS's idle worker threads sleep right after a GEMM (EMBER_BLAS_SPIN=1: they spin).

numpy's OpenBLAS (pthreads) keeps its worker threads spinning (sched_yield) for 2^28 cycles
(~0.1 s) after every multithreaded GEMM. In a CPU training step a GEMM follows nearly every
kernel, so the worker spins all step long on the second core, which ember's OpenMP kernels
(the batched matmul split, the compiled and eager C++ kernels) then share with it. Compiled GPT
step at 2 threads, load 1.2-1.5: median 271 ms with the spin, 243 ms without (the worker's CPU
~260 -> ~88 ms a step). Eager steps on the idle 2-core machine (2026-11-26 11:42, alternated,
ember alone): CNN 119-138 -> 83-100 ms, GPT median 337 -> 288 ms, MLP unchanged. OpenBLAS reads
the variable once, when numpy loads it, so it is set around ember's own first `import numpy`
and removed after (child processes do not inherit it). A no-op when numpy was imported before
ember or OPENBLAS_THREAD_TIMEOUT is set.
"""
from __future__ import annotations

import os
import sys

__all__ = ["applied"]

TIMEOUT = "4"   # 2^4 cycles: OpenBLAS's minimum (its workers sleep at once)


def _apply() -> bool:
    env = os.environ
    if "numpy" in sys.modules or "OPENBLAS_THREAD_TIMEOUT" in env \
            or env.get("EMBER_BLAS_SPIN", "0") != "0":
        return False
    env["OPENBLAS_THREAD_TIMEOUT"] = TIMEOUT
    try:
        import numpy  # noqa: F401 - OpenBLAS initializes here and reads the variable
    finally:
        env.pop("OPENBLAS_THREAD_TIMEOUT", None)
    return True


applied = _apply()
