"""numpy numerics of torch.special's functions that the pointwise primitives cannot express:
modified Bessel I/K, Bessel J/Y, Airy Ai, erfcx, log_ndtr, ndtri, the regularized incomplete
gamma functions, the Hurwitz zeta function and the orthogonal polynomials. float64 in and out;
series run in numpy's extended precision (long double) where terms cancel.

Methods: power series for small arguments, the asymptotic (Hankel) expansions for large ones,
K_nu by the trapezoid rule on its integral exp(-x cosh t) cosh(nu t) (exponentially accurate for
this doubly decaying integrand), Ai through K_{1/3} and J_{+-1/3}.
"""
from __future__ import annotations

import math

import numpy as np

from ._special import _B2K_FACT, _erfc64, _erfc_pos, digamma, lgamma

LD = np.longdouble
EULER = 0.57721566490153286060651209008240243
_SERIES_MAX = 20.0       # |x| above: asymptotic expansions for J/Y
_I_SERIES_MAX = 30.0


def _a_coeffs(nu, n):
    """a_k(nu) of the Hankel expansions, k = 0..n-1."""
    out, a = [], 1.0
    for k in range(n):
        out.append(a)
        a = a * (4 * nu * nu - (2 * k + 1) ** 2) / ((k + 1) * 8)
    return out


def _apply(x, mask, fn):
    r = np.empty_like(x)
    if mask.any():
        r[mask] = fn(x[mask])
    return r


# ---- modified Bessel I --------------------------------------------------------------------------
def _i_series(a, nu):
    """I_nu(a), a >= 0, long double."""
    h = a.astype(LD) / 2
    q = h * h
    term = h ** nu / math.factorial(nu)
    s = term.copy()
    for k in range(1, 90):
        term = term * q / (k * (k + nu))
        s += term
    return s


def _i_asym_scaled(a, nu):
    """exp(-a) I_nu(a) for large a."""
    s = np.zeros_like(a)
    p = np.ones_like(a)
    for k, c in enumerate(_a_coeffs(nu, 24)):
        s += (-1) ** k * c * p
        p = p / a
    return s / np.sqrt(2 * np.pi * a)


def bessel_i(x, nu, scaled):
    """I_nu(x) (nu 0 or 1), or exp(-|x|) I_nu(x) when scaled."""
    a = np.abs(x)
    small = a <= _I_SERIES_MAX
    r = np.empty_like(a)
    if small.any():
        s = _i_series(a[small], nu)
        if scaled:
            s = s * np.exp(-a[small].astype(LD))
        r[small] = s.astype(np.float64)
    big = ~small
    if big.any():
        v = _i_asym_scaled(a[big], nu)
        r[big] = v if scaled else v * np.exp(a[big])
    r[np.isnan(x)] = np.nan
    return np.where(x < 0, -r, r) if nu == 1 else r


# ---- modified Bessel K (trapezoid rule; Hankel expansion for large x) ---------------------------
_K_ASYM_MIN = 20.0       # x above (and above 2 nu^2): the asymptotic expansion


def _k_asym_scaled(a, nu):
    """exp(a) K_nu(a) for large a: sqrt(pi / 2a) sum_k a_k(nu) / a^k (30 terms: ~1e-16 from
    a = 20 on, where the terms are still shrinking)."""
    s = np.zeros_like(a)
    p = np.ones_like(a)
    for c in _a_coeffs(nu, 30):
        s += c * p
        p = p / a
    return s * np.sqrt(np.pi / (2 * a))


def bessel_k(x, nu, scaled):
    """K_nu(x) (any real nu), or exp(x) K_nu(x) when scaled; nan for x < 0, inf at 0."""
    r = np.full_like(x, np.nan)
    pos = x > 0
    r[x == 0] = np.inf
    pos &= np.isfinite(x)
    r[np.isposinf(x)] = 0.0
    big = pos & (x >= max(_K_ASYM_MIN, 2 * nu * nu))
    if big.any():
        v = _k_asym_scaled(x[big], nu)
        r[big] = v if scaled else v * np.exp(-x[big])
    pos &= ~big   # the trapezoid rule's step 0.1 misses the peak of width 1/sqrt(x) past ~50
    xs = x[pos]
    if xs.size:
        out = np.empty_like(xs)
        h = 0.1
        for lo in range(0, xs.size, 2048):
            v = xs[lo:lo + 2048]
            tmax = float(np.arccosh(1 + 90 / v.min())) + 1 + abs(nu) * 0.1
            t = np.arange(0, min(tmax, 80) + h, h)                     # (M,)
            w = np.full(t.shape, h)
            w[0] = h / 2
            e = -v[:, None] * (np.cosh(t)[None, :] - 1)                 # (N, M)
            vals = np.exp(e + np.abs(nu) * t[None, :]) * 0.5 + np.exp(e - np.abs(nu) * t) * 0.5
            out[lo:lo + 2048] = vals @ w
        r[pos] = out if scaled else out * np.exp(-xs)
    return r


# ---- Bessel J and Y -----------------------------------------------------------------------------
def _j_series(a, nu):
    """J_nu(a) for 0 <= a <= 20 (real nu > -1), long double."""
    h = a.astype(LD) / 2
    q = -h * h
    term = h ** LD(nu) / LD(math.gamma(nu + 1))
    s = term.copy()
    for k in range(1, 90):
        term = term * q / (k * (k + nu))
        s += term
    return s


def _hankel(a, nu):
    """(J_nu(a), Y_nu(a)) for large a."""
    cs = _a_coeffs(nu, 30)
    p = np.zeros_like(a)
    q = np.zeros_like(a)
    inv = np.ones_like(a)
    for k, c in enumerate(cs):
        sgn = (-1) ** (k // 2)
        if k % 2 == 0:
            p += sgn * c * inv
        else:
            q += sgn * c * inv
        inv = inv / a
    chi = a - (nu / 2 + 0.25) * np.pi
    amp = np.sqrt(2 / (np.pi * a))
    return amp * (p * np.cos(chi) - q * np.sin(chi)), amp * (p * np.sin(chi) + q * np.cos(chi))


def bessel_j(x, nu):
    """J_nu(x) for nu 0 or 1 (odd for nu 1), or any nu > -1 on x >= 0."""
    a = np.abs(x)
    small = a <= _SERIES_MAX
    r = np.empty_like(a)
    if small.any():
        r[small] = _j_series(a[small], nu).astype(np.float64)
    if (~small).any():
        r[~small] = _hankel(a[~small], nu)[0]
    r[np.isnan(x)] = np.nan
    return np.where(x < 0, -r, r) if nu == 1 else r


def _y_series(a, nu):
    """Y_0 / Y_1 by their logarithmic series (0 < a <= 20), long double."""
    al = a.astype(LD)
    h = al / 2
    q = h * h
    lg = np.log(h)
    jn = _j_series(a, nu)
    s = np.zeros_like(al)
    if nu == 0:
        term = np.ones_like(al)
        hk = LD(0)
        for k in range(1, 90):
            term = term * (-q) / (k * k)
            hk += LD(1) / k
            s += hk * term
        return (2 / LD(np.pi)) * ((lg + LD(EULER)) * jn - s)
    term = h.copy()          # (z/2)^{2k+1} (-1)^k / (k! (k+1)!)
    psi1, psi2 = -LD(EULER), 1 - LD(EULER)   # psi(k+1), psi(k+2)
    for k in range(0, 90):
        s += (psi1 + psi2) * term
        term = term * (-q) / ((k + 1) * (k + 2))
        psi1 += LD(1) / (k + 1)
        psi2 += LD(1) / (k + 2)
    return (2 / LD(np.pi)) * lg * jn - 2 / (LD(np.pi) * al) - s / LD(np.pi)


def bessel_y(x, nu):
    r = np.full_like(x, np.nan)
    r[x == 0] = -np.inf
    small = (x > 0) & (x <= _SERIES_MAX)
    if small.any():
        r[small] = _y_series(x[small], nu).astype(np.float64)
    big = x > _SERIES_MAX
    if big.any():
        r[big] = _hankel(x[big], nu)[1]
    return r


def airy_ai(x):
    r = np.full_like(x, np.nan)
    r[x == 0] = 0.355028053887817239260063186004
    pos = x > 0
    if pos.any():
        v = x[pos]
        z = 2 / 3 * v ** 1.5
        r[pos] = np.sqrt(v / 3) / np.pi * bessel_k(z, 1 / 3, True) * np.exp(-z)
    neg = x < 0
    if neg.any():
        v = -x[neg]
        z = 2 / 3 * v ** 1.5
        out = np.empty_like(v)
        s = z <= _SERIES_MAX
        if s.any():
            out[s] = (_j_series(z[s], 1 / 3) + _j_series(z[s], -1 / 3)).astype(np.float64)
        if (~s).any():
            out[~s] = _hankel(z[~s], 1 / 3)[0] + _hankel(z[~s], -1 / 3)[0]
        r[neg] = np.sqrt(v) / 3 * out
    r[np.isposinf(x)] = 0.0
    return r


# ---- normal distribution helpers ----------------------------------------------------------------
def erfcx(x):
    """exp(x^2) erfc(x), without overflow for large x."""
    r = np.empty_like(x)
    big = x >= 1
    if big.any():
        v = x[big]
        r[big] = _erfcx_pos(v)
    rest = ~big
    if rest.any():
        v = x[rest]
        with np.errstate(over="ignore"):
            r[rest] = np.exp(v * v) * _erfc64(v)
    return r


def _erfcx_pos(v):
    out = np.empty_like(v)
    mid = v < 26
    if mid.any():
        w = v[mid]
        # exp(w^2) * erfc(w): erfc is accurate to a relative 1e-16 here, exp(w^2) is finite
        out[mid] = np.exp(w * w) * _erfc_pos(w)
    far = ~mid
    if far.any():
        w = v[far]
        i2 = 1 / (2 * w * w)
        s = 1 - i2 * (1 - 3 * i2 * (1 - 5 * i2 * (1 - 7 * i2 * (1 - 9 * i2))))
        out[far] = s / (w * math.sqrt(math.pi))
    return out


def log_ndtr(x):
    r = np.empty_like(x)
    neg = x < 0
    if neg.any():
        v = x[neg]
        r[neg] = np.log(0.5 * erfcx(-v / math.sqrt(2))) - v * v / 2
    pos = ~neg
    if pos.any():
        r[pos] = np.log1p(-0.5 * _erfc64(x[pos] / math.sqrt(2)))
    return r


def ndtri(p):
    """The inverse of the standard normal CDF: Abramowitz-Stegun 26.2.23 refined by Newton
    steps on log_ndtr (relative accuracy in the far lower tail too)."""
    r = np.full_like(p, np.nan)
    r[p == 0] = -np.inf
    r[p == 1] = np.inf
    m = (p > 0) & (p < 1)
    if m.any():
        v = p[m]
        q = np.minimum(v, 1 - v)
        t = np.sqrt(-2 * np.log(q))
        z = -(t - (2.515517 + 0.802853 * t + 0.010328 * t * t) /
              (1 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t ** 3))
        lq = np.log(q)
        for _ in range(5):
            ln = log_ndtr(z)
            z = z - (ln - lq) * np.exp(ln + 0.5 * z * z + 0.5 * math.log(2 * math.pi))
        r[m] = np.where(v > 0.5, -z, z)
    return r


# ---- incomplete gamma and zeta ------------------------------------------------------------------
def gammainc(a, x, upper):
    """Regularized P(a, x) (upper=False) or Q(a, x): series for x < a + 1, else Lentz's
    continued fraction."""
    a, x = np.broadcast_arrays(a, x)
    a, x = a.astype(np.float64), x.astype(np.float64)
    r = np.full(a.shape, np.nan)
    ok = (a >= 0) & (x >= 0)
    r[ok & (x == 0)] = 1.0 if upper else 0.0
    r[ok & (a == 0) & (x > 0)] = 0.0 if upper else 1.0
    r[ok & np.isposinf(x) & (a > 0)] = 0.0 if upper else 1.0
    work = ok & (a > 0) & (x > 0) & np.isfinite(x)
    with np.errstate(all="ignore"):
        ser = work & (x < a + 1)
        if ser.any():
            av, xv = a[ser], x[ser]
            term = 1 / av
            s = term.copy()
            for n in range(1, 600):
                term = term * xv / (av + n)
                s += term
            pr = s * np.exp(-xv + av * np.log(xv) - lgamma(av))
            r[ser] = 1 - pr if upper else pr
        cf = work & ~(x < a + 1)
        if cf.any():
            av, xv = a[cf], x[cf]
            tiny = 1e-300
            b = xv + 1 - av
            c = np.full_like(xv, 1 / tiny)
            d = 1 / b
            h = d.copy()
            for i in range(1, 400):
                an = -i * (i - av)
                b = b + 2
                d = an * d + b
                d = np.where(np.abs(d) < tiny, tiny, d)
                c = b + an / c
                c = np.where(np.abs(c) < tiny, tiny, c)
                d = 1 / d
                h = h * d * c
            qr = np.exp(-xv + av * np.log(xv) - lgamma(av)) * h
            r[cf] = qr if upper else 1 - qr
    return r


def zeta(s, q):
    """The Hurwitz zeta function sum_k (q + k)^-s (Cephes' domain rules)."""
    s, q = np.broadcast_arrays(s, q)
    s, q = s.astype(np.float64), q.astype(np.float64)
    r = np.full(s.shape, np.nan)
    r[s == 1] = np.inf
    ok = s > 1
    bad_q = (q <= 0) & (q == np.floor(q))
    r[ok & bad_q] = np.inf
    ok = ok & ~bad_q & ~((q < 0) & (s != np.floor(s)))
    if ok.any():
        sv, qv = s[ok], q[ok].copy()
        acc = np.zeros_like(sv)
        with np.errstate(all="ignore"):
            for _ in range(9):
                acc += qv ** -sv
                qv = qv + 1
            m = qv < 9
            while m.any():  # far negative q: keep stepping up
                acc[m] += qv[m] ** -sv[m]
                qv[m] += 1
                m = qv < 9
            t = qv ** (1 - sv) / (sv - 1) + 0.5 * qv ** -sv
            fac = sv.copy()
            p = qv ** (-sv - 1)
            inv2 = 1 / (qv * qv)
            for k, c in enumerate(_B2K_FACT, start=1):
                t = t + c * fac * p
                fac = fac * (sv + 2 * k - 1) * (sv + 2 * k)
                p = p * inv2
        r[ok] = acc + t
    return r


# ---- orthogonal polynomials ---------------------------------------------------------------------
def _recur(x, n, p0, p1, step):
    """P_n(x) by a three-term recurrence: p0, p1 arrays, step(k, x, p_prev, p) -> p_next."""
    out = np.where(n == 0, p0, p1)
    nmax = int(n.max()) if n.size else 0
    p, q = p0, p1
    for k in range(1, nmax):
        p, q = q, step(k, x, p, q)
        out = np.where(n == k + 1, q, out)
    return out


def polynomial(kind, x, n):
    x, n = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(n))
    n = np.trunc(n.astype(np.float64))
    n = np.where(np.isnan(n), -1, n).astype(np.int64)
    one = np.ones_like(x)
    with np.errstate(all="ignore"):
        if kind.startswith("shifted_"):
            return polynomial(kind[len("shifted_"):], 2 * x - 1, n)
        if kind == "chebyshev_t":
            r = _recur(x, n, one, x, lambda k, x, p, q: 2 * x * q - p)
        elif kind == "chebyshev_u":
            r = _recur(x, n, one, 2 * x, lambda k, x, p, q: 2 * x * q - p)
        elif kind == "chebyshev_v":
            r = _recur(x, n, one, 2 * x - 1, lambda k, x, p, q: 2 * x * q - p)
        elif kind == "chebyshev_w":
            r = _recur(x, n, one, 2 * x + 1, lambda k, x, p, q: 2 * x * q - p)
        elif kind == "hermite_h":
            r = _recur(x, n, one, 2 * x, lambda k, x, p, q: 2 * x * q - 2 * k * p)
        elif kind == "hermite_he":
            r = _recur(x, n, one, x, lambda k, x, p, q: x * q - k * p)
        elif kind == "laguerre_l":
            r = _recur(x, n, one, 1 - x,
                       lambda k, x, p, q: ((2 * k + 1 - x) * q - k * p) / (k + 1))
        elif kind == "legendre_p":
            r = _recur(x, n, one, x, lambda k, x, p, q: ((2 * k + 1) * x * q - k * p) / (k + 1))
        else:
            raise AssertionError(kind)
    return np.where(n < 0, 0.0, r)


__all__ = ["bessel_i", "bessel_k", "bessel_j", "bessel_y", "airy_ai",
           "erfcx", "log_ndtr", "ndtri", "gammainc", "zeta", "polynomial", "digamma"]
