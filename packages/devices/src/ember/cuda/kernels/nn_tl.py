"""Triton kernels for the nn ops a model needs every step: embedding (gather rows / scatter-add
rows), nll_loss forward/backward, layer_norm forward. Rows are contiguous; statistics in float32.
Imported only when first needed (triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["D", "V"])
def gather_rows(w_ptr, idx_ptr, out_ptr, err_ptr, D, V, BLOCK: tl.constexpr):
    # out[n, :] = w[idx[n], :]; an index outside [0, V) reads nothing, writes zeros and sets
    # the device's error word (runtime/device_errors.py: raised at the next wait)
    n = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    i = tl.load(idx_ptr + n).to(tl.int64)
    ok = (i >= 0) & (i < V)
    rd = cols < D * ok.to(tl.int32)  # (nothing read for a bad index)
    tl.store(out_ptr + n * D + cols, tl.load(w_ptr + i * D + cols, mask=rd, other=0),
             mask=cols < D)
    if not ok:  # (a plain store: every writer writes the same code; mapped host memory)
        tl.store(err_ptr, 1)


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
