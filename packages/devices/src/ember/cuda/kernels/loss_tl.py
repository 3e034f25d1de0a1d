"""Triton kernels for nll_loss forward and backward over (N, C) contiguous rows.
Imported only when first needed (triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _target(t_ptr, w_ptr, n, IGNORE, HAS_W: tl.constexpr):
    # row n's target: (kept: not ignore_index, a safe class index, the class weight or 1)
    t = tl.load(t_ptr + n).to(tl.int64)
    keep = t != IGNORE
    ts = tl.where(keep, t, 0)
    w = tl.full([], 1.0, tl.float32)
    if HAS_W:
        w = tl.load(w_ptr + ts).to(tl.float32)
    return keep, ts, w


@triton.jit(do_not_specialize=["C", "IGNORE"])
def nll_rows(x_ptr, t_ptr, w_ptr, loss_ptr, wt_ptr, C, IGNORE, HAS_W: tl.constexpr):
    n = tl.program_id(0).to(tl.int64)
    keep, ts, w = _target(t_ptr, w_ptr, n, IGNORE, HAS_W)
    w = tl.where(keep, w, 0.0)
    v = tl.load(x_ptr + n * C + ts).to(tl.float32)
    tl.store(loss_ptr + n, -v * w)
    tl.store(wt_ptr + n, w)


@triton.jit(do_not_specialize=["C", "IGNORE"])
def nll_back_rows(g_ptr, t_ptr, w_ptr, tw_ptr, gx_ptr, C, IGNORE, HAS_W: tl.constexpr,
                  MODE: tl.constexpr):
    # MODE: 0 none (one grad per row), 1 mean (divide by the total weight), 2 sum
    n = tl.program_id(0).to(tl.int64)
    keep, ts, w = _target(t_ptr, w_ptr, n, IGNORE, HAS_W)
    if MODE == 0:
        g = tl.load(g_ptr + n).to(tl.float32)
    else:
        g = tl.load(g_ptr).to(tl.float32)
    if MODE == 1:
        g = g / tl.load(tw_ptr).to(tl.float32)
    tl.store(gx_ptr + n * C + ts, (-w * g).to(gx_ptr.dtype.element_ty), mask=keep)
