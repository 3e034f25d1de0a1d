"""Triton kernels for tril/triu over contiguous rows.
Imported only when first needed (triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["R", "C", "DIAG"])
def tri_rows(x_ptr, out_ptr, R, C, DIAG, UPPER: tl.constexpr, BLOCK: tl.constexpr):
    # tril / triu over contiguous (..., R, C): program (b*R + r, column block)
    br = tl.program_id(0).to(tl.int64)
    r = br % R
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < C
    v = tl.load(x_ptr + br * C + cols, mask=m)
    if UPPER:
        keep = cols - r >= DIAG
    else:
        keep = cols - r <= DIAG
    tl.store(out_ptr + br * C + cols, tl.where(keep, v, tl.zeros_like(v)), mask=m)
