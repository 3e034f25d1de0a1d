"""Special functions on numpy arrays (numpy has no erf/lgamma; scipy is not a dependency).

Placeholder implementations through math.* per element; vectorized versions replace these.
"""
import math

import numpy as np

__all__ = ["erf", "erfc", "erfinv", "lgamma", "digamma"]


def _vec(fn):
    v = np.vectorize(fn, otypes=[np.float64])

    def apply(x):
        x = np.asarray(x)
        return v(x).astype(x.dtype if x.dtype.kind == "f" else np.float64, copy=False)
    return apply


erf = _vec(math.erf)
erfc = _vec(math.erfc)
lgamma = _vec(lambda v: math.lgamma(v) if v > 0 or v != math.floor(v) else math.inf)


def _erfinv_scalar(y):
    if y <= -1:
        return -math.inf if y == -1 else math.nan
    if y >= 1:
        return math.inf if y == 1 else math.nan
    # Giles' approximation refined with two Newton steps
    w = -math.log((1.0 - y) * (1.0 + y))
    if w < 5:
        w -= 2.5
        p = 2.81022636e-08
        for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):
            p = c + p * w
    else:
        w = math.sqrt(w) - 3
        p = -0.000200214257
        for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                  -0.0076224613, 0.00943887047, 1.00167406, 2.83297682):
            p = c + p * w
    x = p * y
    for _ in range(2):
        x -= (math.erf(x) - y) / (2 / math.sqrt(math.pi) * math.exp(-x * x))
    return x


erfinv = _vec(_erfinv_scalar)


def _digamma_scalar(x):
    if x <= 0 and x == math.floor(x):
        return math.nan if x < 0 else -math.inf
    r = 0.0
    if x < 0:
        return _digamma_scalar(1 - x) - math.pi / math.tan(math.pi * x)
    while x < 6:
        r -= 1 / x
        x += 1
    f = 1 / (x * x)
    return r + math.log(x) - 0.5 / x - f * (1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (
        1 / 240 - f / 132))))


digamma = _vec(_digamma_scalar)
