"""Triton helpers the families' kernels share (imported by their `<family>_tl` modules, so only
when a first kernel launches: triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def lanes(total, BLOCK: tl.constexpr):
    # this program's block of flat positions (64-bit) and which of them are < total
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    return offs, offs < total
