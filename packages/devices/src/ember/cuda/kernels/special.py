"""GPU kernels of torch.special on cuda: the orthogonal polynomials (Chebyshev T/U/V/W and
their shifted forms, Hermite H/He, Laguerre L, Legendre P) by their recurrences in Triton
(`special_tl.poly`), the modified Bessel I_0/I_1 and K_0/K_1 (plain and scaled) by core's
series, Hankel expansion and trapezoid rule in float64 (`special_tl.bessel_i`, `bessel_k`).
HOST lists the special functions still computed by core's numpy series on host copies, with
the reason. The pointwise formulas (entr, sinc, ndtr, xlog1py, spherical_bessel_j0) need no
entry here: Triton kernels come from them.
"""
from __future__ import annotations

from ember._ops.registry import dtypes as D

from .base import _cont, _launch, _lazy, cuda_kernel

_KINDS = {"chebyshev_t": 0, "chebyshev_u": 1, "chebyshev_v": 2, "chebyshev_w": 3,
          "hermite_h": 4, "hermite_he": 5, "laguerre_l": 6, "legendre_p": 7}
_NMAX = 1 << 20   # longer recurrences (n up to inf) stay on the host: their loop is that long


def _poly(kind, shifted):
    def f(be, op, x, n):
        m = op.meta(x, n)
        if m.dtype not in (D.float16, D.bfloat16, D.float32, D.float64):
            return NotImplemented
        dev = next(t.device for t in (x, n) if t.device.type == "cuda")
        x, n = (t if t.device.type == "cuda" else be.from_tensor(t, dev) for t in (x, n))
        out = be._new(tuple(m.shape), m.dtype, dev)
        total = out.numel()
        if not total:
            return out
        xs, ns = be._new(out.shape, D.float64, dev), be._new(out.shape, D.float64, dev)
        be._copy_into(xs, x)
        be._copy_into(ns, n)
        # the recurrence's length is the largest n (NaN counts as -1): one read of n, a sync
        nmax = float(ns.nan_to_num(-1.0).max().item())
        if not nmax < _NMAX:
            return NotImplemented
        K = _lazy("special_tl")
        _launch(be, K.poly, (-(-total // 1024),), [xs, ns, out, total, max(int(nmax), 1)], (),
                {"KIND": _KINDS[kind], "SHIFTED": shifted, "BLOCK": 1024})
        return out
    return f


for _kind in _KINDS:
    _name = _kind.replace("_", "_polynomial_", 1)
    cuda_kernel(f"special_{_name}")(_poly(_kind, False))
    if _kind.startswith("chebyshev"):
        cuda_kernel(f"special_shifted_{_name}")(_poly(_kind, True))


# ---- modified Bessel I_0/I_1 and K_0/K_1, plain and exponentially scaled ------------------------
_FLOATS = (D.float16, D.bfloat16, D.float32, D.float64)


def _bessel(name, block, nu, scaled):
    """The cuda kernel of a one-argument Bessel function: special_tl.<name> over x (float64
    inside), written in the meta's dtype."""
    def f(be, op, x):
        m = op.meta(x)
        if m.dtype not in _FLOATS or x.dtype.is_complex:
            return NotImplemented
        out = be._new(tuple(m.shape), m.dtype, x.device)
        total = out.numel()
        if total:
            K = _lazy("special_tl")
            if name == "bessel_i":     # NU a compile-time constant: the series' term ratio
                args, consts = [_cont(be, x), out, total], {"NU": nu}
            else:                      # nu a runtime value of the integrand
                args, consts = [_cont(be, x), out, total, float(nu)], {}
            _launch(be, getattr(K, name), (-(-total // block),), args, (),
                    {**consts, "SCALED": scaled, "BLOCK": block})
        return out
    return f


for _q, _fn, _block, _nu, _scaled in (
        ("i0", "bessel_i", 1024, 0, False),
        ("special_modified_bessel_i0", "bessel_i", 1024, 0, False),
        ("special_i0e", "bessel_i", 1024, 0, True), ("special_i1", "bessel_i", 1024, 1, False),
        ("special_modified_bessel_i1", "bessel_i", 1024, 1, False),
        ("special_i1e", "bessel_i", 1024, 1, True),
        ("special_modified_bessel_k0", "bessel_k", 256, 0, False),
        ("special_modified_bessel_k1", "bessel_k", 256, 1, False),
        ("special_scaled_modified_bessel_k0", "bessel_k", 256, 0, True),
        ("special_scaled_modified_bessel_k1", "bessel_k", 256, 1, True)):
    cuda_kernel(_q)(_bessel(_fn, _block, _nu, _scaled))


_LONG_DOUBLE = ("core sums the power series (|x| <= 20), whose terms cancel, in long double: a "
                "float64 GPU series would lose digits; a GPU kernel needs another method "
                "(rational approximations)")
HOST: dict[str, str] = {
    "special_bessel_j0": _LONG_DOUBLE, "special_bessel_j1": _LONG_DOUBLE,
    "special_bessel_y0": _LONG_DOUBLE, "special_bessel_y1": _LONG_DOUBLE,
    "special_airy_ai": "J_{+-1/3} series in long double (as Bessel J) and K_{1/3}: no GPU kernel "
                       "yet",
    **dict.fromkeys(["special_erfcx", "special_log_ndtr", "special_ndtri"],
                    "core's piecewise-Chebyshev erfc (and ndtri's Newton steps on log_ndtr): no "
                    "Triton port yet"),
    **dict.fromkeys(["special_zeta", "igamma", "igammac"],
                    "series and continued fractions with data-dependent iteration counts: no "
                    "Triton port yet"),
}
