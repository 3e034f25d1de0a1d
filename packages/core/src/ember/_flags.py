"""Global numeric flags: float32 matmul precision, deterministic algorithms, thread count."""
from __future__ import annotations

__all__ = ["set_float32_matmul_precision", "get_float32_matmul_precision",
           "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
           "set_num_threads", "get_num_threads"]

float32_matmul_precision = "highest"
deterministic = False
_threads = None
on_precision_change: list = []  # callbacks: cached matmul plans that depend on the precision


def set_float32_matmul_precision(precision: str) -> None:
    """"highest" (full fp32), "high" (TF32 allowed), "medium" (bf16 allowed) on GPUs."""
    global float32_matmul_precision
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision: {precision}; expected highest, high or medium")
    changed = precision != float32_matmul_precision
    float32_matmul_precision = precision
    for f in on_precision_change if changed else ():
        f()


def get_float32_matmul_precision() -> str:
    return float32_matmul_precision


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    global deterministic
    deterministic = bool(mode)


def are_deterministic_algorithms_enabled() -> bool:
    return deterministic


def set_num_threads(n: int) -> None:
    """Limit the threads numpy's BLAS may use for one GEMM (OpenBLAS, through ctypes)."""
    global _threads
    if n < 1:
        raise RuntimeError("set_num_threads expects a positive integer")
    _threads = n
    from . import _blas
    _blas.set_max_threads(n)  # the cap on the threads one GEMM may use


def get_num_threads() -> int:
    import os
    return _threads or os.cpu_count() or 1
