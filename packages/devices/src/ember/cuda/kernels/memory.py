"""GPU kernels for the memory ops: clone, fill_, zero_."""
from __future__ import annotations

from .base import cuda_kernel
from .pointwise import Unsupported


@cuda_kernel("clone")
def _clone(be, op, x, memory_format=None):
    return be._copy_new(x, x.dtype)


@cuda_kernel("fill_")
def _fill(be, op, x, value):
    try:
        return be.fill_(x, value)
    except Unsupported:
        return NotImplemented


@cuda_kernel("zero_")
def _zero(be, op, x):
    return _fill(be, op, x, 0)
