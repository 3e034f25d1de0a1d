"""Batched matmuls of small matrices split across two threads.

numpy's batched matmul calls BLAS once per matrix; for matrices below `_blas.FLOPS_PER_THREAD`
(attention's (B, H, T, D) products: 1 MFLOP each in the small GPT) each call runs on one BLAS
thread, so the whole batch runs on one core however many there are (~27 ms of one thread's GPT
step at 2 threads, where MKL splits the batch). Here the batch's first dim is halved: a persistent
worker thread runs one half (numpy releases the GIL inside matmul) while the caller runs the
other. Every matrix is still one single-threaded BLAS call, so the values are those of the
serial loop bit for bit. Only with two or more threads allowed (`ember.set_num_threads`) and
free (`_blas.free_cores`: the load-average cap the GEMMs use), and from `MIN_FLOPS` of work in
all (a handoff costs ~0.1 ms). On by default only where OpenBLAS's workers sleep after a GEMM
(`_blas_env`, EMBER_BLAS_SPIN=0): its spinning worker holds the core the second half needs, and
the compiled GPT step at 2 threads read 265 / 284 ms split vs 238 / 236 ms not (load 1.4).
EMBER_BMM_SPLIT=1 / 0 forces it on / off.
"""
from __future__ import annotations

import os

import numpy as np

from . import _blas, _blas_env

__all__ = ["split_matmul"]

MIN_FLOPS = 1 << 24   # 16 MFLOP in all (~0.4 ms on one core): a handoff costs ~0.1 ms
_ON = os.environ.get("EMBER_BMM_SPLIT", "1" if _blas_env.applied else "0") != "0"
_pool = [None, 0]     # (ThreadPoolExecutor, the pid that made it: none survives a fork)


def _executor():
    if _pool[0] is None or _pool[1] != os.getpid():
        from concurrent.futures import ThreadPoolExecutor
        _pool[0], _pool[1] = ThreadPoolExecutor(1, thread_name_prefix="ember-bmm"), os.getpid()
    return _pool[0]


def split_matmul(a: np.ndarray, b: np.ndarray, flops_each: int):
    """a @ b (both at least 3-D, float32 / float64) with its batch split across two threads, or
    None where that does not pay (one thread allowed or free, little work, one batch entry)."""
    if not _ON or a.ndim < 3 or b.ndim < 3 or a.dtype != b.dtype \
            or a.dtype not in (np.float32, np.float64):
        return None
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    n = 1
    for s in batch:
        n *= s
    if batch[0] < 2 or n * flops_each < MIN_FLOPS or _blas.max_threads() < 2 \
            or flops_each // _blas.FLOPS_PER_THREAD >= 2 or _blas.free_cores() < 2:
        return None   # (large matrices: BLAS threads each call itself, never two at once)
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    out = np.empty(batch + (a.shape[-2], b.shape[-1]), a.dtype)
    h = batch[0] // 2
    fut = _executor().submit(np.matmul, a[h:], b[h:], out=out[h:])
    try:
        np.matmul(a[:h], b[:h], out=out[:h])
    finally:
        fut.result()
    return out
