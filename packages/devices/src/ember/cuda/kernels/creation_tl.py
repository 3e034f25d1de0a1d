"""Hand-written Triton kernels for creation ops: arange (integer start/step), linspace
and logspace.

Imported only when a kernel is first needed (triton is optional at import).
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["n", "start", "end", "step", "log_base"])
def space_fill(out_ptr, n, start, end, step, log_base, LOG: tl.constexpr, HALF: tl.constexpr,
               BLOCK: tl.constexpr):
    # out[i] = start + i * step in float64 (numpy's linspace, which the CPU kernel is), the last
    # element exactly `end`; logspace: base ** that, as exp(v * ln(base)) (base > 0).
    # The float64 scalars come as their int64 bit patterns (Triton passes Python floats as
    # float32).
    start = start.to(tl.int64).to(tl.float64, bitcast=True)
    end = end.to(tl.int64).to(tl.float64, bitcast=True)
    step = step.to(tl.int64).to(tl.float64, bitcast=True)
    log_base = log_base.to(tl.int64).to(tl.float64, bitcast=True)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    v = start + offs.to(tl.float64) * step
    v = tl.where((offs == n - 1) & (n > 1), end, v)
    if LOG:
        v = tl.exp(v * log_base)
    if HALF:
        v = v.to(tl.float32)
    tl.store(out_ptr + offs, v.to(out_ptr.dtype.element_ty), mask=offs < n)


@triton.jit(do_not_specialize=["n", "start", "step"])
def arange_fill(out_ptr, n, start, step, HALF: tl.constexpr, BLOCK: tl.constexpr):
    # integer start/step (arange(T), the common case): exact in int64, then cast (16-bit
    # floats through float32, which holds every value they can)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    v = start + offs * step
    if HALF:
        v = v.to(tl.float32)
    tl.store(out_ptr + offs, v.to(out_ptr.dtype.element_ty), mask=offs < n)
