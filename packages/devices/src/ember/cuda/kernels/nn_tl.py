"""Triton kernels for the nn ops a model needs every step: embedding (gather rows / scatter-add
rows), nll_loss forward/backward, layer_norm forward. Rows are contiguous; statistics in float32.
Imported only when first needed (triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["D"])
def gather_rows(w_ptr, idx_ptr, out_ptr, D, BLOCK: tl.constexpr):
    n = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < D
    i = tl.load(idx_ptr + n).to(tl.int64)
    tl.store(out_ptr + n * D + cols, tl.load(w_ptr + i * D + cols, mask=m), mask=m)


@triton.jit(do_not_specialize=["D", "PAD"])
def scatter_add_rows(g_ptr, idx_ptr, out_ptr, D, PAD, BLOCK: tl.constexpr):
    # out (float32) [idx[n], :] += g[n, :], skipping the padding index
    n = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    i = tl.load(idx_ptr + n).to(tl.int64)
    m = cols < D
    if i != PAD:
        v = tl.load(g_ptr + n * D + cols, mask=m, other=0).to(tl.float32)
        tl.atomic_add(out_ptr + i * D + cols, v, mask=m)
