"""Triton kernels for ctc_loss, as core's numpy kernels (nn_extra._ctc_kernel and
_ctc_backward_kernel) in float64: the alpha recursion over time (one program per sample, one lane
per extended-label position), the beta recursion, and the gradient through the occupancies.
Each time step reads the previous row from global memory (a barrier between steps).
Imported only when first needed (triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _lse2(a, b):
    m = tl.maximum(a, b)
    safe = tl.where(tl.abs(m) < float("inf"), m, 0.0)
    return safe + tl.log(tl.exp(a - safe) + tl.exp(b - safe))


@triton.jit
def _lse3(a, b, c):
    m = tl.maximum(tl.maximum(a, b), c)
    safe = tl.where(tl.abs(m) < float("inf"), m, 0.0)
    return safe + tl.log(tl.exp(a - safe) + tl.exp(b - safe) + tl.exp(c - safe))


@triton.jit
def _ext(tg_ptr, off, s, blank, tlen):
    # the extended label at positions s (blank, l1, blank, l2, ..., blank; blank past the
    # target) and whether s may be entered from s - 2 (a label unlike the one two back)
    odd = (s % 2) == 1
    lab = (s - 1) // 2
    ok = odd & (lab < tlen)
    e = tl.load(tg_ptr + off + tl.where(ok, lab, 0), mask=ok, other=0).to(tl.int64)
    e = tl.where(ok, e, blank)
    ok2 = ok & (lab >= 1)
    e2 = tl.load(tg_ptr + off + tl.where(ok2, lab - 1, 0), mask=ok2, other=0).to(tl.int64)
    e2 = tl.where(ok2, e2, blank)
    return e, (s >= 2) & (e != blank) & (e != e2)


@triton.jit
def _path_ll(alpha_ptr, T, N, S, n, ilen, tlen):
    # the sample's log-likelihood: alpha at its last input step (numpy's row -1 when it has
    # none), at the last label and the blank after it
    last = alpha_ptr + (tl.where(ilen > 0, ilen - 1, T - 1) * N + n) * S
    end = 2 * tlen
    x1 = tl.load(last + end).to(tl.float64)
    x2 = tl.where(end > 0, tl.load(last + tl.maximum(end - 1, 0)).to(tl.float64),
                  float("-inf"))
    return _lse2(x1, x2)


@triton.jit(do_not_specialize=["T", "N", "C", "S", "blank"])
def ctc_alpha(lp_ptr, tg_ptr, off_ptr, il_ptr, tl_ptr, alpha_ptr, nll_ptr, T, N, C, S, blank,
              ZERO_INF: tl.constexpr, BLOCK_S: tl.constexpr):
    # alpha (T, N, S) float64, nll (N,) float64; lp (T, N, C) contiguous
    n = tl.program_id(0).to(tl.int64)
    s = tl.arange(0, BLOCK_S).to(tl.int64)
    off = tl.load(off_ptr + n)
    tlen = tl.load(tl_ptr + n)
    ilen = tl.load(il_ptr + n)
    e, skip = _ext(tg_ptr, off, s, blank, tlen)
    ins = s < S
    valid = s < 2 * tlen + 1
    em = tl.load(lp_ptr + n * C + e, mask=ins, other=0).to(tl.float64)
    a = tl.where(valid & (s < 2), em, float("-inf"))
    tl.store(alpha_ptr + n * S + s, a, mask=ins)
    for t in range(1, T):
        tl.debug_barrier()
        prev = alpha_ptr + ((t - 1) * N + n) * S
        a1 = tl.load(prev + s - 1, mask=ins & (s >= 1), other=float("-inf"))
        a2 = tl.load(prev + s - 2, mask=ins & skip, other=float("-inf"))
        em = tl.load(lp_ptr + (t * N + n) * C + e, mask=ins, other=0).to(tl.float64)
        a = tl.where(valid, _lse3(a, a1, a2) + em, float("-inf"))
        tl.store(alpha_ptr + (t * N + n) * S + s, a, mask=ins)
    tl.debug_barrier()
    nll = -_path_ll(alpha_ptr, T, N, S, n, ilen, tlen)
    if ZERO_INF:
        nll = tl.where(tl.abs(nll) == float("inf"), 0.0, nll)
    tl.store(nll_ptr + n, nll)


@triton.jit(do_not_specialize=["T", "N", "C", "S", "blank"])
def ctc_beta(lp_ptr, tg_ptr, off_ptr, il_ptr, tl_ptr, beta_ptr, T, N, C, S, blank,
             BLOCK_S: tl.constexpr):
    # beta (T, N, S) float64, from the sample's last input step backwards
    n = tl.program_id(0).to(tl.int64)
    s = tl.arange(0, BLOCK_S).to(tl.int64)
    off = tl.load(off_ptr + n)
    tlen = tl.load(tl_ptr + n)
    ilen = tl.load(il_ptr + n)
    e, _ = _ext(tg_ptr, off, s, blank, tlen)
    _, skip_next = _ext(tg_ptr, off, s + 2, blank, tlen)   # may s go on to s + 2?
    ins = s < S
    valid = s < 2 * tlen + 1
    lt = tl.where(ilen > 0, ilen - 1, T - 1)
    end = 2 * tlen
    start = (s == end) | ((s == end - 1) & (end > 0))
    b = tl.zeros([BLOCK_S], tl.float64) + float("-inf")
    for i in range(0, T):
        t = T - 1 - i
        em = tl.load(lp_ptr + (t * N + n) * C + e, mask=ins, other=0).to(tl.float64)
        nxt = beta_ptr + ((t + 1) * N + n) * S
        more = (s * 0 + t + 1) < T   # a tensor mask (a Python bool is none in the interpreter)
        b1 = tl.load(nxt + s + 1, mask=ins & more & (s + 1 < S), other=float("-inf"))
        b2 = tl.load(nxt + s + 2, mask=ins & more & skip_next & (s + 2 < S),
                     other=float("-inf"))
        rec = tl.where(valid, _lse3(b, b1, b2) + em, float("-inf"))
        b = tl.where(t == lt, tl.where(start, em, float("-inf")),
                     tl.where(t < ilen - 1, rec, float("-inf")))
        tl.store(beta_ptr + (t * N + n) * S + s, b, mask=ins)
        tl.debug_barrier()


@triton.jit(do_not_specialize=["T", "N", "C", "S", "blank"])
def ctc_grad(lp_ptr, tg_ptr, off_ptr, il_ptr, tl_ptr, alpha_ptr, beta_ptr, nll_ptr, g_ptr,
             out_ptr, T, N, C, S, blank, ZERO_INF: tl.constexpr, BLOCK_C: tl.constexpr):
    # program (t, n): grad[t, n, :] = (exp(lp) - exp(occ - ll - lp)) * g[n], occ the log-sum of
    # alpha + beta over the positions s that carry class c
    t = tl.program_id(0).to(tl.int64)
    n = tl.program_id(1).to(tl.int64)
    off = tl.load(off_ptr + n)
    tlen = tl.load(tl_ptr + n)
    ilen = tl.load(il_ptr + n)
    ll = -tl.load(nll_ptr + n).to(tl.float64)
    gn = tl.load(g_ptr + n).to(tl.float64)
    impossible = tl.abs(_path_ll(alpha_ptr, T, N, S, n, ilen, tlen)) == float("inf")
    row = (t * N + n)
    for c0 in range(0, C, BLOCK_C):
        cols = c0 + tl.arange(0, BLOCK_C).to(tl.int64)
        mc = cols < C
        occ = tl.zeros([BLOCK_C], tl.float64) + float("-inf")
        for j in range(0, S):
            sj = tl.zeros([1], tl.int64) + j
            ej, _ = _ext(tg_ptr, off, sj, blank, tlen)
            ab = (tl.load(alpha_ptr + row * S + j).to(tl.float64)
                  + tl.load(beta_ptr + row * S + j))
            occ = tl.where(cols == ej, _lse2(occ, ab), occ)
        lpv = tl.load(lp_ptr + row * C + cols, mask=mc, other=0).to(tl.float64)
        gr = tl.exp(lpv) - tl.exp(occ - ll - lpv)
        gr = tl.where(t < ilen, gr, 0.0)
        if ZERO_INF:
            gr = tl.where(impossible, 0.0, gr)
        tl.store(out_ptr + row * C + cols, (gr * gn).to(out_ptr.dtype.element_ty), mask=mc)
