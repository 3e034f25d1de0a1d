"""Triton kernels for torch.special's orthogonal polynomials: P_n(x) by the three-term
recurrence of each family, in float64 as core's CPU kernel (`_special_np.polynomial`).
Imported only when first needed (triton is optional at import)."""
from __future__ import annotations

import triton
import triton.language as tl

from .common_tl import lanes

# KIND: 0 chebyshev_t, 1 chebyshev_u, 2 chebyshev_v, 3 chebyshev_w, 4 hermite_h, 5 hermite_he,
# 6 laguerre_l, 7 legendre_p


@triton.jit
def _first(x, KIND: tl.constexpr):
    # P_1(x) of the family (P_0 = 1 for all)
    if KIND == 0 or KIND == 5 or KIND == 7:
        r = x
    elif KIND == 1 or KIND == 4:
        r = 2 * x
    elif KIND == 2:
        r = 2 * x - 1
    elif KIND == 3:
        r = 2 * x + 1
    else:
        r = 1 - x
    return r


@triton.jit
def _step(k, x, p, q, KIND: tl.constexpr):
    # P_{k+1} from P_{k-1} = p and P_k = q
    if KIND <= 3:
        r = 2 * x * q - p
    elif KIND == 4:
        r = 2 * x * q - 2 * k * p
    elif KIND == 5:
        r = x * q - k * p
    elif KIND == 6:
        r = ((2 * k + 1 - x) * q - k * p) / (k + 1)
    else:
        r = ((2 * k + 1) * x * q - k * p) / (k + 1)
    return r


@triton.jit(do_not_specialize=["total", "NMAX"])
def poly(x_ptr, n_ptr, out_ptr, total, NMAX, KIND: tl.constexpr, SHIFTED: tl.constexpr,
         BLOCK: tl.constexpr):
    # x, n (float64) and out contiguous, of one shape; n truncated toward 0, NaN as -1;
    # P_n(x) for n >= 0 (NMAX: the largest n), 0 for n < 0
    offs, m = lanes(total, BLOCK)
    x = tl.load(x_ptr + offs, mask=m, other=0).to(tl.float64)
    nf = tl.load(n_ptr + offs, mask=m, other=0).to(tl.float64)
    n = tl.where(nf != nf, -1.0, tl.where(nf < 0, tl.ceil(nf), tl.floor(nf)))
    if SHIFTED:
        x = 2 * x - 1
    p = tl.zeros([BLOCK], tl.float64) + 1.0
    q = _first(x, KIND)
    out = tl.where(n == 0, p, q)
    for k in range(1, NMAX):
        kf = tl.cast(k, tl.float64)   # (k * 1.0 would be float32)
        r = _step(kf, x, p, q, KIND)
        p = q
        q = r
        out = tl.where(n == kf + 1, q, out)
    out = tl.where(n < 0, 0.0, out)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["total"])
def bessel_i(x_ptr, out_ptr, total, NU: tl.constexpr, SCALED: tl.constexpr,
             BLOCK: tl.constexpr):
    # I_NU(x) (NU 0 or 1), or exp(-|x|) I_NU(x) when SCALED, in float64 as core's
    # _special_np.bessel_i: the power series for |x| <= 30, the Hankel expansion beyond
    offs, m = lanes(total, BLOCK)
    x = tl.load(x_ptr + offs, mask=m, other=0).to(tl.float64)
    a = tl.abs(x)
    h = a / 2
    q = h * h
    term = tl.zeros([BLOCK], tl.float64) + 1.0
    if NU == 1:
        term = h
    s = term
    for k in range(1, 90):
        term = term * q / tl.cast(k * (k + NU), tl.float64)
        s += term
    small = a <= 30.0
    if SCALED:
        s = s * tl.exp(-tl.where(small, a, 0.0))
    # Hankel: sum_k (-1)^k a_k(NU) / a^k, a_k = a_{k-1} (4 NU^2 - (2k - 1)^2) / (8k)
    big = tl.where(small, 1.0, a)
    # loop-carried values keep one type (float64) from the start, as compiled Triton requires
    c = tl.full([], 1.0, tl.float64)
    sign = tl.full([], 1.0, tl.float64)
    p = tl.zeros([BLOCK], tl.float64) + 1.0
    v = tl.zeros([BLOCK], tl.float64)
    for k in range(0, 24):
        kf = tl.cast(k, tl.float64)
        v += sign * c * p
        c = c * (4.0 * NU * NU - (2 * kf + 1) * (2 * kf + 1)) / ((kf + 1) * 8.0)
        sign = -sign
        p = p / big
    v = v / tl.sqrt(2 * 3.141592653589793 * big)
    if not SCALED:
        v = v * tl.exp(big)
    r = tl.where(small, s, v)
    r = tl.where(x != x, x, r)
    if NU == 1:
        r = tl.where(x < 0, -r, r)
    tl.store(out_ptr + offs, r.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["total", "nu"])
def bessel_k(x_ptr, out_ptr, total, nu, SCALED: tl.constexpr, BLOCK: tl.constexpr):
    # K_nu(x) (nu >= 0), or exp(x) K_nu(x) when SCALED, as core's _special_np.bessel_k: the
    # trapezoid rule (step 0.1) on integral_0^inf exp(-x cosh t) cosh(nu t) dt, cut where the
    # integrand is below exp(-90) of its start; for x >= max(20, 2 nu^2) the Hankel expansion
    # (30 terms); nan for x < 0, inf at 0, 0 at +inf
    offs, m = lanes(total, BLOCK)
    x = tl.load(x_ptr + offs, mask=m, other=1).to(tl.float64)
    ok = (x > 0) & (x < float("inf"))
    v = tl.where(ok, x, 1.0)
    u = 1 + 90 / v
    tmax = tl.minimum(tl.log(u + tl.sqrt(u * u - 1)) + 1 + nu * 0.1, 80.0)
    s = tl.zeros([BLOCK], tl.float64)
    for j in range(0, 802):
        t = tl.cast(j, tl.float64) * 0.1   # float64 nodes and weights (j * 0.1 is float32)
        e = -v * ((tl.exp(t) + tl.exp(-t)) / 2 - 1)
        f = tl.exp(e + nu * t) * 0.5 + tl.exp(e - nu * t) * 0.5
        f = tl.where(j == 0, f * 0.5, f)
        s += tl.where(t < tmax + 0.1, f, 0.0)
    s = s * 0.1
    # exp(x) K_nu(x) ~ sqrt(pi / 2x) sum_k a_k(nu) / x^k, a_k = a_{k-1} (4 nu^2 - (2k - 1)^2) / 8k
    nu2 = nu * tl.full([], 1.0, tl.float64)
    nu2 = 4.0 * nu2 * nu2
    large = ok & (v >= 20.0) & (v * 4.0 >= 2.0 * nu2)
    w = tl.where(large, v, 20.0)
    c = tl.full([], 1.0, tl.float64)
    p = tl.zeros([BLOCK], tl.float64) + 1.0
    h = tl.zeros([BLOCK], tl.float64)
    for k in range(0, 30):
        kf = tl.cast(k, tl.float64)
        h += c * p
        c = c * (nu2 - (2 * kf + 1) * (2 * kf + 1)) / ((kf + 1) * 8.0)
        p = p / w
    s = tl.where(large, h * tl.sqrt(3.141592653589793 / (2 * w)), s)
    if not SCALED:
        s = s * tl.exp(-v)
    r = tl.where(ok, s, float("nan"))
    r = tl.where(x == 0, float("inf"), r)
    r = tl.where(x == float("inf"), 0.0, r)
    tl.store(out_ptr + offs, r.to(out_ptr.dtype.element_ty), mask=m)
