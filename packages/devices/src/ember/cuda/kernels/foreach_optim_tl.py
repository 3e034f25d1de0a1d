"""Multi-tensor optimizer steps: the per-block update of one parameter (Adam/AdamW, SGD), called
from the generated kernels of foreach_optim.py, which map each program to a block of one of up to
16 parameters (one launch for all of them). Math in float32, state kept in the parameter's dtype
(as PyTorch's foreach/fused CUDA kernels). Capturable steps read the step counter and the learning
rate from device memory, so a CUDA graph of the step replays right at every later step.
Imported only when first needed (triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _grad(g_ptr, offs, mask, ncols, gs0, GT: tl.constexpr):
    # GT: the gradient is a transposed 2-D view (strides (1, gs0)) of the parameter's shape
    if GT:
        g = tl.load(g_ptr + (offs % ncols) * gs0 + offs // ncols, mask=mask, other=0)
    else:
        g = tl.load(g_ptr + offs, mask=mask, other=0)
    return g.to(tl.float32)


@triton.jit
def inc_steps(s_ptr, ST: tl.constexpr):
    # one program: step += 1 on this launch's step counters (before the update reads them)
    s = tl.load(s_ptr)
    tl.store(s_ptr, s + 1)


@triton.jit
def adam_block(p_ptr, g_ptr, m_ptr, v_ptr, x_ptr, s_ptr, lr_ptr, blk, n, ncols, gs0,
               lr, beta1, beta2, lb1, lb2, eps, wd, bc1, bc2_sqrt,
               MAXIMIZE: tl.constexpr, WD: tl.constexpr, AMSGRAD: tl.constexpr,
               CAPTURABLE: tl.constexpr, LR_PTR: tl.constexpr, GT: tl.constexpr,
               BLOCK: tl.constexpr):
    # WD: 0 none, 1 decoupled (p *= 1 - lr * wd), 2 L2 (g += wd * p). lb1/lb2: log2 of the betas
    offs = blk.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if LR_PTR:
        lr = tl.load(lr_ptr).to(tl.float32)
    if CAPTURABLE:   # bias corrections from the device step counter
        step = tl.load(s_ptr).to(tl.float32)
        bc1 = 1.0 - tl.exp2(step * lb1)
        bc2_sqrt = tl.sqrt(1.0 - tl.exp2(step * lb2))
    p = tl.load(p_ptr + offs, mask=mask, other=0).to(tl.float32)
    g = _grad(g_ptr, offs, mask, ncols, gs0, GT)
    m = tl.load(m_ptr + offs, mask=mask, other=0).to(tl.float32)
    v = tl.load(v_ptr + offs, mask=mask, other=0).to(tl.float32)
    if MAXIMIZE:
        g = -g
    if WD == 1:
        p = p * (1.0 - lr * wd)
    if WD == 2:
        g = g + p * wd
    m = m + (g - m) * (1.0 - beta1)
    v = v * beta2 + (g * g) * (1.0 - beta2)
    vv = v
    if AMSGRAD:
        x = tl.maximum(tl.load(x_ptr + offs, mask=mask, other=0).to(tl.float32), v)
        tl.store(x_ptr + offs, x.to(x_ptr.dtype.element_ty), mask=mask)
        vv = x
    denom = tl.sqrt(vv) / bc2_sqrt + eps
    p = p - (lr / bc1) * m / denom
    tl.store(p_ptr + offs, p.to(p_ptr.dtype.element_ty), mask=mask)
    tl.store(m_ptr + offs, m.to(m_ptr.dtype.element_ty), mask=mask)
    tl.store(v_ptr + offs, v.to(v_ptr.dtype.element_ty), mask=mask)


@triton.jit
def sgd_block(p_ptr, g_ptr, b_ptr, lr_ptr, blk, n, ncols, gs0, lr, momentum, damp, wd,
              MAXIMIZE: tl.constexpr, HAS_WD: tl.constexpr, MOMENTUM: tl.constexpr,
              NESTEROV: tl.constexpr, LR_PTR: tl.constexpr, GT: tl.constexpr,
              BLOCK: tl.constexpr):
    # with momentum, after the first step (the buffer exists): b = b * momentum + g * (1 - damp)
    offs = blk.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if LR_PTR:
        lr = tl.load(lr_ptr).to(tl.float32)
    p = tl.load(p_ptr + offs, mask=mask, other=0).to(tl.float32)
    g = _grad(g_ptr, offs, mask, ncols, gs0, GT)
    if MAXIMIZE:
        g = -g
    if HAS_WD:
        g = g + p * wd
    d = g
    if MOMENTUM:
        b = tl.load(b_ptr + offs, mask=mask, other=0).to(tl.float32)
        b = b * momentum + g * (1.0 - damp)
        tl.store(b_ptr + offs, b.to(b_ptr.dtype.element_ty), mask=mask)
        if NESTEROV:
            d = g + b * momentum
        else:
            d = b
    p = p - lr * d
    tl.store(p_ptr + offs, p.to(p_ptr.dtype.element_ty), mask=mask)
