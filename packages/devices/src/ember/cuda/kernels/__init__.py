"""The cuda kernels, one module per op family as core's `ember._ops.<family>` (creation, memory,
pointwise, reduction, sorting, joining, indexing, scatter, linalg, linalg_factor, random, nn,
conv, pool, norm, loss, sample, logical, fft, special, optim); `<family>_tl` holds that family's
Triton source, imported on a first launch (triton is optional at import). `base` holds what
they share, `common_tl` the Triton helpers they share.

`register(backend)` fills the op entries' cuda slots: each family module fills its own ops'
slots when imported (`base.cuda_kernel`) and may list in HOST the ops it leaves on host copies,
with the reason (test_cuda_opdb.py holds the backend to the list).
"""
from __future__ import annotations

import importlib

FAMILIES = ("creation", "memory", "reduction", "sorting", "joining", "indexing", "scatter",
            "linalg", "linalg_factor", "random", "nn", "conv", "pool", "norm", "loss", "sample",
            "logical", "fft", "special", "attention")


def register(backend) -> None:
    """Fill the cuda slots of the op entries: pointwise ops and their in-place forms get the
    backend's cached Triton launch; the family modules, imported here, fill the rest. The
    backend's HOST gathers the families' host lists."""
    from ember._ops.registry import OPS, register_kernel
    host: dict = {}
    for name in FAMILIES:
        host.update(getattr(importlib.import_module(f"{__name__}.{name}"), "HOST", {}))
    backend.HOST = host
    for op in {id(o): o for o in OPS.values()}.values():
        if op.pointwise is not None:
            register_kernel(op, "cuda", backend.pointwise_kernel(op))
        elif op.inplace_of is not None and op.inplace_of.pointwise is not None:
            register_kernel(op, "cuda", backend.inplace_kernel(op))
