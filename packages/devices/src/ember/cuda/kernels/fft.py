"""The fft family on cuda (and special functions): no GPU kernels yet (cuFFT is not bound),
so they run their CPU kernels on host copies; HOST says so, and test_cuda_opdb.py holds the
list to it.
The fft_* functions and torch.special's pointwise formulas (entr, sinc, ndtr, xlog1py) need no
entry here: they are decompositions into these primitives or Triton-generated pointwise kernels.
"""
from __future__ import annotations

_FFT = "no cuFFT binding yet: numpy's pocketfft on host copies"
_SPECIAL = "series/quadrature numpy kernel (core's _special_np), no GPU kernel yet"
HOST: dict = {
    "_fft_c2c": _FFT, "_fft_r2c": _FFT, "_fft_c2r": _FFT,
    **dict.fromkeys(
        ["i0", "special_i0e", "special_i1", "special_i1e", "special_erfcx", "special_log_ndtr",
         "special_ndtri", "special_bessel_j0", "special_bessel_j1", "special_bessel_y0",
         "special_bessel_y1", "special_modified_bessel_i0", "special_modified_bessel_i1",
         "special_modified_bessel_k0", "special_modified_bessel_k1",
         "special_scaled_modified_bessel_k0", "special_scaled_modified_bessel_k1",
         "special_spherical_bessel_j0", "special_airy_ai", "special_zeta", "igamma", "igammac",
         "special_chebyshev_polynomial_t", "special_chebyshev_polynomial_u",
         "special_chebyshev_polynomial_v", "special_chebyshev_polynomial_w",
         "special_shifted_chebyshev_polynomial_t", "special_shifted_chebyshev_polynomial_u",
         "special_shifted_chebyshev_polynomial_v", "special_shifted_chebyshev_polynomial_w",
         "special_hermite_polynomial_h", "special_hermite_polynomial_he",
         "special_laguerre_polynomial_l", "special_legendre_polynomial_p"], _SPECIAL),
}
