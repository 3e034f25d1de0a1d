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


@triton.jit(do_not_specialize=["N", "C", "IGNORE"])
def nll_reduce(x_ptr, t_ptr, w_ptr, out_ptr, tot_ptr, N, C, IGNORE, HAS_W: tl.constexpr,
               MEAN: tl.constexpr, BLOCK: tl.constexpr):
    # one program: the weighted sum of -x[n, t[n]] over all rows and the total weight, written
    # as the reduced loss (divided by the total weight for a mean) and the total weight
    acc = tl.zeros([BLOCK], tl.float32)
    wacc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        n = start + tl.arange(0, BLOCK).to(tl.int64)
        inside = n < N
        t = tl.load(t_ptr + n, mask=inside, other=IGNORE).to(tl.int64)
        keep = inside & (t != IGNORE)
        ts = tl.where(keep, t, 0)
        w = tl.where(keep, 1.0, 0.0)
        if HAS_W:
            w = w * tl.load(w_ptr + ts, mask=keep, other=0).to(tl.float32)
        v = tl.load(x_ptr + n * C + ts, mask=keep, other=0).to(tl.float32)
        acc += -v * w
        wacc += w
    loss = tl.sum(acc, 0)
    tot = tl.sum(wacc, 0)
    if MEAN:
        loss = loss / tot
    tl.store(out_ptr, loss.to(out_ptr.dtype.element_ty))
    tl.store(tot_ptr, tot.to(tot_ptr.dtype.element_ty))


@triton.jit(do_not_specialize=["C", "IGNORE"])
def nll_back_dense(g_ptr, t_ptr, w_ptr, tw_ptr, gx_ptr, C, IGNORE, HAS_W: tl.constexpr,
                   MODE: tl.constexpr, BLOCK_C: tl.constexpr):
    # row n of the input's gradient, zeros included (no separate fill): -w * g at the target
    n = tl.program_id(0).to(tl.int64)
    keep, ts, w = _target(t_ptr, w_ptr, n, IGNORE, HAS_W)
    if MODE == 0:
        g = tl.load(g_ptr + n).to(tl.float32)
    else:
        g = tl.load(g_ptr).to(tl.float32)
    if MODE == 1:
        g = g / tl.load(tw_ptr).to(tl.float32)
    val = tl.where(keep, -w * g, 0.0)
    for start in range(0, C, BLOCK_C):
        c = start + tl.arange(0, BLOCK_C)
        row = tl.where(c == ts, val, 0.0)
        tl.store(gx_ptr + n * C + c, row.to(gx_ptr.dtype.element_ty), mask=c < C)
