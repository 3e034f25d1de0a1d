"""Fused optimizer steps: one kernel per parameter instead of ~14 (Adam/AdamW) or 3 (SGD with
momentum) eager ops. Math in float32 (PyTorch's fused/foreach CUDA kernels do the same for
half/bf16 params); state stays in the parameter's dtype. Per-step values (bias corrections,
learning rate) are runtime arguments, so one compiled kernel serves every step.
Imported only when first needed (triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl

from .common_tl import lanes


@triton.jit(do_not_specialize=["n", "lr_wd", "beta1", "beta2", "eps", "step_size", "bc2_sqrt",
                               "wd"])
def adam_step(p_ptr, g_ptr, m_ptr, v_ptr, n, lr_wd, beta1, beta2, eps, step_size, bc2_sqrt, wd,
              MAXIMIZE: tl.constexpr, WD: tl.constexpr, BLOCK: tl.constexpr):
    # WD: 0 none, 1 decoupled (p *= 1 - lr * wd), 2 L2 (g += wd * p)
    offs, mask = lanes(n, BLOCK)
    p = tl.load(p_ptr + offs, mask=mask, other=0).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask, other=0).to(tl.float32)
    m = tl.load(m_ptr + offs, mask=mask, other=0).to(tl.float32)
    v = tl.load(v_ptr + offs, mask=mask, other=0).to(tl.float32)
    if MAXIMIZE:
        g = -g
    if WD == 1:
        p = p * lr_wd
    if WD == 2:
        g = g + p * wd
    m = m + (g - m) * (1 - beta1)
    v = v * beta2 + (g * g) * (1 - beta2)
    denom = tl.sqrt(v) / bc2_sqrt + eps
    p = p + (m * -step_size) / denom
    tl.store(p_ptr + offs, p.to(p_ptr.dtype.element_ty), mask=mask)
    tl.store(m_ptr + offs, m.to(m_ptr.dtype.element_ty), mask=mask)
    tl.store(v_ptr + offs, v.to(v_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["n", "lr", "momentum", "damp", "wd"])
def sgd_step(p_ptr, g_ptr, b_ptr, n, lr, momentum, damp, wd, MAXIMIZE: tl.constexpr,
             HAS_WD: tl.constexpr, NESTEROV: tl.constexpr, BLOCK: tl.constexpr):
    # after the first step (the buffer exists): b = b * momentum + g * (1 - dampening)
    offs, mask = lanes(n, BLOCK)
    p = tl.load(p_ptr + offs, mask=mask, other=0).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask, other=0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0).to(tl.float32)
    if MAXIMIZE:
        g = -g
    if HAS_WD:
        g = g + p * wd
    b = b * momentum + g * (1 - damp)
    if NESTEROV:
        d = g + b * momentum
    else:
        d = b
    p = p + d * -lr
    tl.store(p_ptr + offs, p.to(p_ptr.dtype.element_ty), mask=mask)
    tl.store(b_ptr + offs, b.to(b_ptr.dtype.element_ty), mask=mask)
