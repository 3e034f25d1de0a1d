"""The fft family on cuda: no GPU kernels yet (cuFFT is not bound),
so they run their CPU kernels on host copies; HOST says so, and test_cuda_opdb.py holds the
list to it.
The fft_* functions need no entry here: they are decompositions into these primitives.
"""
from __future__ import annotations

_FFT = "no cuFFT binding yet: numpy's pocketfft on host copies"
HOST: dict = {
    "_fft_c2c": _FFT, "_fft_r2c": _FFT, "_fft_c2r": _FFT,
}
