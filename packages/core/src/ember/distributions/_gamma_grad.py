"""d(sample)/d(concentration) of a Gamma(alpha, 1) sample x, for rsample's implicit
reparameterization: dx/dalpha = -(dP/dalpha)(alpha, x) / p(x; alpha), P the regularized lower
incomplete gamma function (series below alpha + 1, continued fraction above, as in Numerical
Recipes' gammp) differentiated by central differences in alpha, p the density. Float64 numpy."""
from __future__ import annotations

import math

import numpy as np

_lgamma = np.frompyfunc(math.lgamma, 1, 1)


def _lg(a):
    return _lgamma(a).astype(np.float64)


def _gammp_series(a, x, iters=600):
    term = 1.0 / a
    total = term.copy()
    ap = a.copy()
    for _ in range(iters):
        ap = ap + 1
        term = term * x / ap
        total = total + term
        if np.all(np.abs(term) < np.abs(total) * 1e-17):
            break
    return total * np.exp(-x + a * np.log(x) - _lg(a))


def _gammq_cf(a, x, iters=600):
    tiny = 1e-300
    b = x + 1 - a
    c = np.full_like(x, 1 / tiny)
    d = 1 / b
    h = d.copy()
    for i in range(1, iters):
        an = -i * (i - a)
        b = b + 2
        d = an * d + b
        d = np.where(np.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = np.where(np.abs(c) < tiny, tiny, c)
        d = 1 / d
        delta = d * c
        h = h * delta
        if np.all(np.abs(delta - 1) < 1e-16):
            break
    return np.exp(-x + a * np.log(x) - _lg(a)) * h


def _gammp(a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    out = np.empty_like(x)
    low = x < a + 1
    if low.any():
        out[low] = _gammp_series(a[low], x[low])
    if (~low).any():
        out[~low] = 1 - _gammq_cf(a[~low], x[~low])
    return out


def standard_gamma_grad(alpha: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dx/dalpha for x ~ Gamma(alpha, 1), elementwise (float64 arrays of one shape)."""
    a = alpha.astype(np.float64).reshape(-1)
    v = np.maximum(x.astype(np.float64).reshape(-1), 1e-300)
    h = 1e-5 * np.maximum(a, 1e-3)
    dP = (_gammp(a + h, v) - _gammp(a - h, v)) / (2 * h)
    log_pdf = (a - 1) * np.log(v) - v - _lg(a)
    return (-dP / np.exp(log_pdf)).reshape(alpha.shape)
