"""GPU kernels of the logical family and complex values: Triton has no complex dtypes, so a
complex tensor is computed on as its interleaved (re, im) float view (`_backend.as_real`/`part`).
conj_physical is a copy with the imaginary part negated; `complex_pointwise` multiplies complex
operands part by part (imag's gradient, g * 1j), for the pointwise path's complex calls."""
from __future__ import annotations

from ember._ops.registry import execute, lookup

from .base import be_dtypes, cuda_kernel


def _parts():
    from .._backend import part
    return part


# ---- conj_physical: a copy, the imaginary part negated ---------------------------------------
@cuda_kernel("conj_physical")
def _conj_physical(be, op, x):
    if not x.dtype.is_complex:
        if x.dtype not in be_dtypes():
            return NotImplemented  # fp8
        return be._copy_new(x, x.dtype)
    part = _parts()
    out = be._new(tuple(x.shape), x.dtype, x.device)
    if out.numel():
        be._copy_into(part(out, 0), part(x, 0))
        be._copy_into(part(out, 1), execute(lookup("neg"), (part(x, 1),)))
    return out


# ---- complex products: (a + bi)(c + di) = (ac - bd) + (ad + bc)i, on the float parts ----------
def _split(x):
    """(re, im) of an operand: float views of a complex tensor, the value and 0 otherwise."""
    if hasattr(x, "dtype"):
        if x.dtype.is_complex:
            part = _parts()
            return part(x, 0), part(x, 1)
        return x, 0
    if isinstance(x, complex):
        return x.real, x.imag
    return x, 0


def _mul(a, b):
    """a * b, each a float tensor or a Python number (every product kept, zeros too: IEEE's
    signed zeros and inf * 0 as numpy's complex product gives them)."""
    if not hasattr(a, "dtype") and not hasattr(b, "dtype"):
        return a * b
    return execute(lookup("mul"), (a, b) if hasattr(a, "dtype") else (b, a))


def _combine(p, q, sign):
    """p + q (sign 1) or p - q (sign -1), each a float tensor or a Python number."""
    if not hasattr(p, "dtype") and not hasattr(q, "dtype"):
        return p + sign * q
    if sign < 0:
        q = execute(lookup("neg"), (q,)) if hasattr(q, "dtype") else -q
    return execute(lookup("add"), ((p, q) if hasattr(p, "dtype") else (q, p)) + (1,))


def complex_pointwise(be, op, args, result_dtype):
    """A pointwise call with complex operands or result, on the float parts; NotImplemented
    for ops without a complex path here (they run on host copies)."""
    if op.qualname != "mul" or not result_dtype.is_complex or any(
            hasattr(x, "device") and x.device.type != "cuda" for x in args[:2]):
        return NotImplemented
    (ar, ai), (br, bi) = _split(args[0]), _split(args[1])
    dev = next(x.device for x in args[:2] if hasattr(x, "device") and x.device.type == "cuda")
    re = _combine(_mul(ar, br), _mul(ai, bi), -1)
    im = _combine(_mul(ar, bi), _mul(ai, br), +1)
    shape = [tuple(x.shape) for x in args[:2] if hasattr(x, "shape")]
    from ember._ops.registry import broadcast_shapes
    out = be._new(broadcast_shapes(*shape), result_dtype, dev)
    part = _parts()
    for k, v in ((0, re), (1, im)):
        if hasattr(v, "dtype"):
            be._copy_into(part(out, k), v)
        else:
            be.fill_(part(out, k), v)
    return out

HOST: dict[str, str] = {}
