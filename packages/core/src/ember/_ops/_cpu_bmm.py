"""Batched matmul on CPU split over the batch (core's C++ kernel cache, OpenMP threads).

numpy's matmul on a stack of small matrices calls BLAS once per matrix, and `_blas.gemm_threads`
gives a GEMM under 64 MFLOP one thread (OpenBLAS's spin-waiting threads cost more than they
gain there): the attention products of a small GPT (64 matrices of 128x128x32) ran on one core
while PyTorch splits the batch. Here the matrices are split across OpenMP threads, each calling
numpy's BLAS (one thread) on its share; operands are read in place when each matrix is a plain
or transposed BLAS layout (broadcast batch dims as offsets), else copied once. float32/float64,
two threads or more; otherwise (or without a compiler / BLAS symbol) `bmm` returns None and
numpy's matmul runs.
"""
from __future__ import annotations

import ctypes

import numpy as np

from . import _cpu_conv

__all__ = ["bmm"]

_SRC = r"""
#include <cstdint>
#include <omp.h>
typedef void (*sgemm_t)(int, int, int, int64_t, int64_t, int64_t, float, const float*, int64_t,
                        const float*, int64_t, float, float*, int64_t);
typedef void (*dgemm_t)(int, int, int, int64_t, int64_t, int64_t, double, const double*, int64_t,
                        const double*, int64_t, double, double*, int64_t);
enum { kRow = 101, kNo = 111, kTr = 112 };

// c[i] (M, N) = op(a + oa[i]) (M, K) @ op(b + ob[i]) (K, N) for i < nb, matrices split over nt
// threads; dims d = M, N, K, lda, ldb, ta, tb
template <typename T, typename GEMM>
static void bmm(const T* a, const T* b, T* c, const int64_t* oa, const int64_t* ob, int64_t nb,
                const int64_t* d, GEMM gemm, int nt) {
  const int64_t M = d[0], N = d[1], K = d[2];
  const int ta = d[5] ? kTr : kNo, tb = d[6] ? kTr : kNo;
  #pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t i = 0; i < nb; ++i)
    gemm(kRow, ta, tb, M, N, K, T(1), a + oa[i], d[3], b + ob[i], d[4], T(0), c + i * M * N, N);
}

#define EMBER_BMM(SFX, T, G)                                                                  \
  extern "C" void embmm_##SFX(void* a, void* b, void* c, void* oa, void* ob, int64_t nb,   \
                              void* d, void* g, int nt) {                                    \
    bmm<T>((const T*)a, (const T*)b, (T*)c, (const int64_t*)oa, (const int64_t*)ob, nb,      \
           (const int64_t*)d, (G)g, nt);                                                     \
  }
EMBER_BMM(f32, float, sgemm_t)
EMBER_BMM(f64, double, dgemm_t)
"""

_lib = None   # None: not loaded yet; False: unavailable
_FNS: dict = {}
_GEMM: dict = {}
_SFX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}


def _load():
    global _lib
    _lib = False
    lib, gemm = _cpu_conv.build_with_gemm("EMBER_CPU_BMM", [_SRC])
    if lib is None:   # numpy's matmul runs
        return
    p, i, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
    for sfx in ("f32", "f64"):
        fn = getattr(lib, f"embmm_{sfx}")
        fn.argtypes, fn.restype = [p, p, p, p, p, i64, p, p, i], None
        _FNS[sfx] = fn
    _GEMM.update(gemm)
    _lib = lib


def _layout(x, rows, cols):
    """(x, transposed, leading dim) with each matrix of x a BLAS operand read in place (x is
    copied when its last two strides allow neither layout)."""
    it = x.itemsize
    s = x.strides[-2:]
    if all(v % it == 0 and v >= 0 for v in x.strides):
        r, c = s[0] // it, s[1] // it
        if (c == 1 or cols == 1) and r >= max(1, cols):
            return x, 0, r
        if (r == 1 or rows == 1) and c >= max(1, rows):
            return x, 1, c
    x = np.ascontiguousarray(x)
    return x, 0, max(1, cols)


def _offsets(x, batch):
    """Element offset of each matrix of x, its batch dims broadcast to `batch` (C order)."""
    nd = len(batch)
    off = np.zeros((1,) * nd, np.int64)
    lead = nd - (x.ndim - 2)
    for i, (n, st) in enumerate(zip(x.shape[:-2], x.strides[:-2])):
        if n > 1:
            shape = [1] * nd
            shape[lead + i] = n
            off = off + (np.arange(n, dtype=np.int64) * (st // x.itemsize)).reshape(shape)
    return np.ascontiguousarray(np.broadcast_to(off, batch), np.int64).reshape(-1)


def bmm(a, b):
    """a (..., M, K) @ b (..., K, N), broadcast batch dims, as a new C-contiguous array, or None
    (numpy's matmul runs: other dtypes, 1-d operands, empty shapes, no kernel)."""
    if _lib is None:
        _load()
    if not _lib or a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype:
        return None
    sfx = _SFX.get(a.dtype)
    if sfx is None:
        return None
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    nb = int(np.prod(batch, dtype=np.int64))
    if nb < 2 or 0 in (M, N, K) or b.shape[-2] != K:
        return None
    nt = _cpu_conv._threads(2 * M * N * K * nb, nb)
    if nt < 2:
        return None   # one thread: numpy's loop over the batch is the same BLAS calls
    a, ta, lda = _layout(a, M, K)
    b, tb, ldb = _layout(b, K, N)
    oa, ob = _offsets(a, batch), _offsets(b, batch)
    out = np.empty(tuple(batch) + (M, N), a.dtype)
    dims = np.array([M, N, K, lda, ldb, ta, tb], np.int64)
    _cpu_conv._blas_one_thread()   # BLAS runs inside our threads: one thread each
    _FNS[sfx](a.ctypes.data, b.ctypes.data, out.ctypes.data, oa.ctypes.data, ob.ctypes.data, nb,
              dims.ctypes.data, _GEMM[a.dtype], nt)
    return out
