"""torch.special's functions missing elsewhere in the table: pointwise formulas where the
primitives express them (entr, sinc, xlog1py, ndtr), numpy kernels (`_special_np.py`) for the
Bessel, Airy, incomplete gamma, zeta, normal-tail and polynomial functions, with vjps where
PyTorch has a derivative (it has none for the Bessel J/Y/K, Airy and polynomial functions).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._dispatch import TensorMeta
from .._size import broadcast_shapes
from . import _special_np as S
from ._registry import OPS, defop

_SQRT_2PI = math.sqrt(2 * math.pi)
_ELEMENTWISE = {"elementwise"}  # kernels applied elementwise (vmap batches them by broadcasting)


def _float_of(d):
    return D.get_default_dtype() if d._cat < 2 else d


def _result(*xs):
    return _float_of(D.result_type_of(list(xs)))


def _unary_meta(x):
    return TensorMeta(tuple(x.shape), _float_of(x.dtype))


def _binary_meta(x, y):
    shapes = [tuple(t.shape) for t in (x, y) if hasattr(t, "shape")]
    return TensorMeta(broadcast_shapes(*shapes), _result(x, y))


def _np_dtype(*arrs):
    ds = [a.dtype for a in arrs if isinstance(a, np.ndarray)]
    ok = [d for d in ds if d.kind in "fc"]
    if ok:
        return np.result_type(*ok)
    return D.get_default_dtype().np


def _unary(name, fn, vjp=None, fname=None):
    def kernel(x):
        with np.errstate(all="ignore"):
            return np.asarray(fn(np.asarray(x, np.float64))).astype(_np_dtype(x))
    return defop(f"{name}(Tensor self) -> Tensor", function=fname or False, method=False,
                 kernels={"cpu": kernel}, meta=_unary_meta, vjp=vjp, tags=_ELEMENTWISE,
                 supports="bif", differentiable=None if vjp else ())


def _binary(schema, fn, vjp=None, differentiable=(), supports="bif", **kw):
    def kernel(x, y):
        with np.errstate(all="ignore"):
            r = fn(np.asarray(x, np.float64), np.asarray(y, np.float64))
        return np.asarray(r).astype(_np_dtype(x, y))
    return defop(schema, kernels={"cpu": kernel}, meta=_binary_meta, vjp=vjp,
                 tags=_ELEMENTWISE, supports=supports, differentiable=differentiable, **kw)


# ---- pointwise formulas -------------------------------------------------------------------------
def _entr(o, x):
    r = o.where(o.gt(x, 0), o.neg(o.mul(x, o.log(x))), o.where(o.eq(x, 0), 0.0, -math.inf))
    return o.where(o.isnan(x), x, r)


defop("special_entr(Tensor self) -> Tensor", function=False, method=False, inplace=False,
      promote="int_to_float", supports="bif", pointwise=_entr,
      vjp=lambda g, out, x: (g * -(x.log() + 1),))


def _sinc(o, x):
    px = o.mul(x, math.pi)
    return o.where(o.eq(x, 0), 1.0, o.truediv(o.sin(px), px))


def _sinc_vjp(g, out, x):
    safe = OPS["where"](x == 0, 1.0, x)
    d = ((x * math.pi).cos() - out) / safe
    return (g * OPS["where"](x == 0, 0.0, d),)


defop("sinc(Tensor self) -> Tensor", promote="int_to_float", supports="bifc", pointwise=_sinc,
      vjp=_sinc_vjp)


def _xlog1py(o, x, y):
    r = o.where(o.eq(x, 0), 0.0, o.mul(x, o.log1p(y)))
    return o.where(o.isnan(y), y, r)


def _xlog1py_vjp(g, out, x, y):
    gx = g * OPS["where"]((x == 0) & (y <= -1), 0.0, y.log1p()) if hasattr(y, "log1p") \
        else g * math.log1p(y)
    return gx, g * x / (1 + y)


defop("special_xlog1py(Tensor self, Tensor other) -> Tensor", function=False, method=False,
      inplace=False,
      promote="int_to_float", supports="bif", pointwise=_xlog1py, vjp=_xlog1py_vjp)
defop("special_ndtr(Tensor self) -> Tensor", function=False, method=False, inplace=False,
      promote="int_to_float", supports="bif",
      pointwise=lambda o, x: o.mul(o.erfc(o.mul(x, -math.sqrt(0.5))), 0.5),
      vjp=lambda g, out, x: (g * (-0.5 * x * x).exp() / _SQRT_2PI,))

# ---- kernels with derivatives -------------------------------------------------------------------
i0 = _unary("i0", lambda x: S.bessel_i(x, 0, False), fname="i0",
            vjp=lambda g, out, x: (g * OPS["special_i1"](x),))
i0e = _unary("special_i0e", lambda x: S.bessel_i(x, 0, True),
             vjp=lambda g, out, x: (g * (OPS["special_i1e"](x) - x.sign() * out),))


def _i1_vjp(g, out, x):
    safe = OPS["where"](x == 0, 1.0, x)
    return (g * OPS["where"](x == 0, 0.5, OPS["i0"](x) - out / safe),)


def _i1e_vjp(g, out, x):
    safe = OPS["where"](x == 0, 1.0, x)
    d = OPS["special_i0e"](x) - out * (x.sign() + 1 / safe)
    return (g * OPS["where"](x == 0, 0.5, d),)


_unary("special_i1", lambda x: S.bessel_i(x, 1, False), vjp=_i1_vjp)
_unary("special_i1e", lambda x: S.bessel_i(x, 1, True), vjp=_i1e_vjp)
_unary("special_erfcx", S.erfcx,
       vjp=lambda g, out, x: (g * (2 * x * out - 2 / math.sqrt(math.pi)),))
_unary("special_log_ndtr", S.log_ndtr,
       vjp=lambda g, out, x: (g * (-0.5 * x * x - out).exp() / _SQRT_2PI,))
_unary("special_ndtri", S.ndtri,
       vjp=lambda g, out, x: (g * _SQRT_2PI * (0.5 * out * out).exp(),))

# ---- kernels PyTorch does not differentiate -----------------------------------------------------
for _n, _f in (("bessel_j0", lambda x: S.bessel_j(x, 0)),
               ("bessel_j1", lambda x: S.bessel_j(x, 1)),
               ("bessel_y0", lambda x: S.bessel_y(x, 0)),
               ("bessel_y1", lambda x: S.bessel_y(x, 1)),
               ("modified_bessel_i0", lambda x: S.bessel_i(x, 0, False)),
               ("modified_bessel_i1", lambda x: S.bessel_i(x, 1, False)),
               ("modified_bessel_k0", lambda x: S.bessel_k(x, 0, False)),
               ("modified_bessel_k1", lambda x: S.bessel_k(x, 1, False)),
               ("scaled_modified_bessel_k0", lambda x: S.bessel_k(x, 0, True)),
               ("scaled_modified_bessel_k1", lambda x: S.bessel_k(x, 1, True)),
               ("airy_ai", S.airy_ai)):
    _unary("special_" + _n, _f)


def _spherical_j0(o, x):
    """sin(x) / x: 1 - x^2 / 6 near 0 (the quotient's 0 / 0), 0 at +-inf (its inf / inf)."""
    near0 = o.add(o.mul(o.mul(x, x), -1 / 6), 1.0)
    return o.where(o.lt(o.abs(x), 1e-4), near0,
                   o.where(o.isinf(x), 0.0, o.truediv(o.sin(x), x)))


defop("special_spherical_bessel_j0(Tensor self) -> Tensor", function=False, method=False,
      inplace=False, promote="int_to_float", supports="bif", pointwise=_spherical_j0,
      tags=_ELEMENTWISE, differentiable=())

_POLY = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
         "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
         "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
         "laguerre_polynomial_l", "legendre_polynomial_p")
for _n in _POLY:
    _kind = _n.replace("_polynomial", "")
    _binary(f"special_{_n}(Tensor x, Tensor n) -> Tensor",
            lambda x, n, k=_kind: S.polynomial(k, x, n), function=False, method=False)


# ---- zeta and the incomplete gamma functions ----------------------------------------------------
def _igamma_dx(a, x):
    return (-x + (a - 1) * x.log() - a.lgamma()).exp()


_binary("special_zeta(Tensor self, Tensor other) -> Tensor", S.zeta, function=False,
        method=False, differentiable=("other",),
        vjp=lambda g, out, x, q: (g * -x * OPS["special_zeta"](x + 1, q),))
_binary("igamma(Tensor self, Tensor other) -> Tensor", lambda a, x: S.gammainc(a, x, False),
        differentiable=("other",), supports="f",
        vjp=lambda g, out, a, x: (g * _igamma_dx(a, x),))
_binary("igammac(Tensor self, Tensor other) -> Tensor", lambda a, x: S.gammainc(a, x, True),
        differentiable=("other",), supports="f",
        vjp=lambda g, out, a, x: (-g * _igamma_dx(a, x),))


def _mvlgamma(x, p):
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if x.dtype._cat < 2:
        x = x.to(D.get_default_dtype())
    js = OPS["arange"](p, dtype=x.dtype, device=x.device)      # (p,)
    terms = (x.unsqueeze(-1) - js / 2).lgamma()                     # (..., p)
    return terms.sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


defop("mvlgamma(Tensor self, int p) -> Tensor", decomp=_mvlgamma)
