"""GPU kernels of the logical family: conj_physical of a real tensor (a copy); complex
tensors take host copies (Triton has no complex dtypes)."""
from __future__ import annotations

from .base import be_dtypes, cuda_kernel


# ---- conj_physical of a real tensor: a copy -------------------------------------------------
@cuda_kernel("conj_physical")
def _conj_physical(be, op, x):
    if x.dtype not in be_dtypes():
        return NotImplemented  # complex
    return be._copy_new(x, x.dtype)


_COMPLEX = "complex dtypes have no Triton codegen"

HOST: dict[str, str] = {
    "conj_physical": f"{_COMPLEX} (imag's gradient conjugates a complex tensor)",
    "mul": f"{_COMPLEX} (imag's gradient: g * 1j)",
}
