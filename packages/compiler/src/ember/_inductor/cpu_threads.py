"""How many threads a generated C++ kernel runs on (the `nt` argument of its OpenMP loops).

A parallel region costs a fork and a join: GNU OpenMP wakes its sleeping pool thread (a futex
wake, ~20 us of CPU on this 2-core VM, 10-15 us of latency) and the caller waits for it at the
end. A kernel splits across threads when each thread's share outweighs that: at least
`LIGHT` elements a thread for loads, stores and arithmetic (~0.2 ns an element from cache),
`HEAVY` where the kernel calls transcendental functions or draws random numbers (1-2 ns an
element). Counts above one are capped at call time by the cores the load average leaves free
(`_ntcap`, the logic eager's GEMMs use: a descheduled thread stalls the whole kernel).

EMBER_CPU_GRAIN=<light>[,<heavy>] overrides the grains (elements a thread; the old fixed rule
was 262144 for every kernel).
"""
from __future__ import annotations

import os
import re

__all__ = ["grain", "static_threads", "LIGHT", "HEAVY"]

LIGHT = 1 << 16   # elements a thread, at least: arithmetic only (2 threads from 128K)
HEAVY = 1 << 13   # with exp / erf / tanh / log / pow ... or Philox draws (2 threads from 16K)
_NCPU = os.cpu_count() or 1

# calls that cost 10-40x an add per element (libmvec or our inlined exp, or libm)
_HEAVY_CALL = re.compile(
    r"\b(?:std::)?(?:a?(?:sin|cos|tan)h?|atan2|exp|exp2|expm1|em_expf|log|log2|log10|log1p|erfc?|"
    r"lgamma|pow|hypot)f?\(|philox")


def _grains() -> tuple:
    env = os.environ.get("EMBER_CPU_GRAIN", "")
    if not env:
        return LIGHT, HEAVY
    parts = [int(x) for x in env.split(",") if x.strip()]
    return max(1, parts[0]), max(1, parts[1] if len(parts) > 1 else parts[0])


def grain(src: str) -> int:
    """Elements a thread of the kernel whose C++ source is src must have, at least."""
    light, heavy = _grains()
    body = src.split('extern "C"', 1)[-1]   # not the helpers a kernel file starts with
    return heavy if _HEAVY_CALL.search(body) else light


def static_threads(work: int, grain_: int, cap: int) -> int:
    """Threads for `work` elements (outer x inner ranges): one per `grain_` elements, at most
    cap (ember.set_num_threads, default the cores), at least one."""
    return max(1, min(cap, int(work) // max(1, grain_)))
