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


@triton.jit
def positions(BLOCK: tl.constexpr, I64: tl.constexpr):
    # this program's block of flat positions: int32 arithmetic unless some offset needs 64 bits
    if I64:
        return tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    else:
        return tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
