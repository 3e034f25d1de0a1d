"""GPU kernels: sorting, selection, scans and the reductions beyond sum/mean/amax/amin/argmax.

TABLE maps op qualnames to kernels `f(backend, op, *args)` (see _ops.kernel: return
NotImplemented to fall back); HOST lists the ops of this family that still run their CPU kernel on
host copies, with the reason (test_cuda_opdb.py holds the backend to it)."""
from __future__ import annotations

TABLE: dict = {}

HOST: dict[str, str] = {
    "_unique2": "no GPU kernel yet",
    "all": "no GPU kernel yet",
    "any": "no GPU kernel yet",
    "count_nonzero": "no GPU kernel yet",
    "cummax": "no GPU kernel yet",
    "cummin": "no GPU kernel yet",
    "cumprod": "no GPU kernel yet",
    "cumsum": "no GPU kernel yet",
    "kthvalue": "no GPU kernel yet",
    "logcumsumexp": "no GPU kernel yet",
    "logsumexp": "no GPU kernel yet",
    "max.dim": "no GPU kernel yet",
    "median": "no GPU kernel yet",
    "median.dim": "no GPU kernel yet",
    "min.dim": "no GPU kernel yet",
    "mode": "no GPU kernel yet",
    "nanmedian": "no GPU kernel yet",
    "nanmedian.dim": "no GPU kernel yet",
    "nanquantile": "no GPU kernel yet",
    "nansum": "no GPU kernel yet",
    "norm": "no GPU kernel yet",
    "prod": "no GPU kernel yet",
    "quantile": "no GPU kernel yet",
    "sort": "no GPU kernel yet",
    "std": "no GPU kernel yet",
    "topk": "no GPU kernel yet",
    "unique_consecutive": "no GPU kernel yet",
    "unique_dim": "no GPU kernel yet",
    "var": "no GPU kernel yet",
    "trace": "no GPU kernel yet",
}
