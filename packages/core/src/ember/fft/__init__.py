"""`ember.fft`: PyTorch's torch.fft namespace (discrete Fourier transforms).

Each function is bound from the table op `fft_<name>` (`_ops/fft.py`), as torch.fft's are.

>>> import ember
>>> ember.fft.fft(ember.tensor([1., 0., 0., 0.])).tolist()
[(1+0j), (1+0j), (1+0j), (1+0j)]
"""
from __future__ import annotations

from .._ops import OPS as _OPS
from .._ops._codegen import make_function as _make_function

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2",
           "rfftn", "irfftn", "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

for _name in __all__:
    _op = _OPS["fft_" + _name]
    globals()[_name] = _make_function(_op, _name, as_method=False, with_out=_op.has_out)
    globals()[_name].__module__ = "ember.fft"
