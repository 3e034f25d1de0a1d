"""Copies and leading-dim sums on all CPU threads (core's C++ kernel cache, OpenMP).

numpy runs a strided copy (a transposed view made contiguous, a slice's backward) and a sum over
dims on one core; PyTorch splits them. These are the generic pieces the kernels call above a
size threshold: `copy(dst, src)` for any two same-shape arrays of one element size (src may
broadcast: stride 0, so a strided zero fill is a copy from a zero scalar) and `sum_leading(x, k)`
(x C-contiguous, summed over its first k dims: bias gradients; rows split across threads,
partial sums added in thread order). At one thread numpy's own loops are as fast, so both step
aside there; they also return False / None where they do not apply (small, other dtypes, no
compiler) and the caller runs numpy. Opt-in, EMBER_CPU_STRIDED=1: on the loaded 2-core machine
the main thread's time for the GPT's sizes (1-4 MB) did not fall at two threads (the kernels
split, but ~40 us of Python around each call ate the gain; RESULTS.md, session 8).
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

__all__ = ["copy", "sum_leading", "MIN_ELEMS"]

_SRC = r"""
#include <cstdint>
#include <cstring>
#include <vector>
#include <omp.h>

// dst[i] = src[i] over nd <= 16 dims of sizes S (the last one innermost), strides in elements
// (dst: DS, src: SS; a broadcast src has stride 0); outer rows split over nt threads, each
// thread's first row found by division once, then its coordinates counted up
template <typename T>
static void copy_rows(T* d, const T* s, int nd, const int64_t* S, const int64_t* DS,
                      const int64_t* SS, int64_t r0, int64_t r1) {
  const int64_t L = S[nd - 1], dl = DS[nd - 1], sl = SS[nd - 1];
  int64_t c[16], od = 0, os = 0, rem = r0;
  for (int i = nd - 2; i >= 0; --i) {
    c[i] = rem % S[i]; rem /= S[i];
    od += c[i] * DS[i]; os += c[i] * SS[i];
  }
  for (int64_t r = r0; r < r1; ++r) {
    T* __restrict dp = d + od;
    const T* __restrict sp = s + os;
    if (dl == 1 && sl == 1) for (int64_t j = 0; j < L; ++j) dp[j] = sp[j];
    else if (dl == 1 && sl == 0) { const T v = *sp; for (int64_t j = 0; j < L; ++j) dp[j] = v; }
    else if (dl == 1) for (int64_t j = 0; j < L; ++j) dp[j] = sp[j * sl];
    else for (int64_t j = 0; j < L; ++j) dp[j * dl] = sp[j * sl];
    for (int i = nd - 2; i >= 0; --i) {   // next row: carry through the coordinates
      od += DS[i]; os += SS[i];
      if (++c[i] < S[i]) break;
      od -= DS[i] * S[i]; os -= SS[i] * S[i]; c[i] = 0;
    }
  }
}

template <typename T>
static void copy_nd(T* d, const T* s, int nd, const int64_t* S, const int64_t* DS,
                    const int64_t* SS, int nt) {
  int64_t rows = 1;
  for (int i = 0; i < nd - 1; ++i) rows *= S[i];
  if (nt <= 1) { copy_rows(d, s, nd, S, DS, SS, 0, rows); return; }
  #pragma omp parallel num_threads(nt)
  {
    const int64_t m = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t per = (rows + m - 1) / m, a = t * per, b = a + per < rows ? a + per : rows;
    if (a < b) copy_rows(d, s, nd, S, DS, SS, a, b);
  }
}

extern "C" void emst_copy(void* d, const void* s, int nd, const int64_t* S, const int64_t* DS,
                          const int64_t* SS, int size, int nt) {
  switch (size) {
    case 1: copy_nd((uint8_t*)d, (const uint8_t*)s, nd, S, DS, SS, nt); break;
    case 2: copy_nd((uint16_t*)d, (const uint16_t*)s, nd, S, DS, SS, nt); break;
    case 4: copy_nd((uint32_t*)d, (const uint32_t*)s, nd, S, DS, SS, nt); break;
    default: copy_nd((uint64_t*)d, (const uint64_t*)s, nd, S, DS, SS, nt); break;
  }
}

// out[c] = sum over r < R of x[r * C + c]: rows split across threads (each streams its rows),
// per-thread partial sums then added in thread order (deterministic for a given nt)
template <typename T>
static void sum_block(const T* x, T* acc, int64_t r0, int64_t r1, int64_t C) {
  for (int64_t j = 0; j < C; ++j) acc[j] = 0;
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {   // four rows per pass over the accumulators
    const T* __restrict p = x + r * C;
    #pragma omp simd
    for (int64_t j = 0; j < C; ++j)
      acc[j] += (p[j] + p[j + C]) + (p[j + 2 * C] + p[j + 3 * C]);
  }
  for (; r < r1; ++r) {
    const T* __restrict p = x + r * C;
    #pragma omp simd
    for (int64_t j = 0; j < C; ++j) acc[j] += p[j];
  }
}

template <typename T>
static void sum_rows(const T* x, T* out, int64_t R, int64_t C, int nt) {
  if (nt <= 1 || R < 2 * nt) { sum_block(x, out, 0, R, C); return; }
  std::vector<T> part((size_t)(nt - 1) * C);
  #pragma omp parallel num_threads(nt)
  {
    const int64_t m = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t per = (R + m - 1) / m, a = t * per, b = a + per < R ? a + per : R;
    T* acc = t == 0 ? out : part.data() + (t - 1) * C;
    if (a < b) sum_block(x, acc, a, b, C);
    else for (int64_t j = 0; j < C; ++j) acc[j] = 0;
  }
  for (int t = 1; t < nt; ++t) {
    const T* __restrict p = part.data() + (size_t)(t - 1) * C;
    for (int64_t j = 0; j < C; ++j) out[j] += p[j];
  }
}

extern "C" void emst_sum_f32(const void* x, void* o, int64_t R, int64_t C, int nt) {
  sum_rows<float>((const float*)x, (float*)o, R, C, nt);
}
extern "C" void emst_sum_f64(const void* x, void* o, int64_t R, int64_t C, int nt) {
  sum_rows<double>((const double*)x, (double*)o, R, C, nt);
}
"""

MIN_ELEMS = 1 << 16     # below it numpy's one pass is as fast as waking a thread
_ELEMS_PER_THREAD = 1 << 16
_lib = None   # None: not loaded yet; False: unavailable
_FNS: dict = {}


def _load():
    global _lib
    from . import _cpujit
    _lib = False
    if os.environ.get("EMBER_CPU_STRIDED", "0") != "1" or not _cpujit.available():
        return
    lib = _cpujit._build([_SRC])
    if lib is None:
        return
    p, i, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
    sig = {"emst_copy": [p, p, i, p, p, p, i, i],
           "emst_sum_f32": [p, p, i64, i64, i], "emst_sum_f64": [p, p, i64, i64, i]}
    for name, args in sig.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, None
        _FNS[name] = fn
    _lib = lib


def _ready() -> bool:
    if _lib is None:
        _load()
    return bool(_lib)


def _threads(size) -> int:
    from . import _cpu_norm
    return _cpu_norm._threads(size, size)


def _collapse(shape, *strides):
    """Drop size-1 dims and merge adjacent dims contiguous in every operand (element strides)."""
    dims = [(n, [s[i] for s in strides]) for i, n in enumerate(shape) if n != 1]
    out = []
    for n, st in dims:
        if out and all(p == q * n for p, q in zip(out[-1][1], st)):
            out[-1] = (out[-1][0] * n, st)
        else:
            out.append((n, st))
    if not out:
        out = [(1, [1] * len(strides))]
    return [n for n, _ in out], [[st[k] for _, st in out] for k in range(len(strides))]


def copy(dst, src) -> bool:
    """dst[...] = src on all threads; False (nothing written) where numpy should do it."""
    if dst.size < MIN_ELEMS or src.dtype != dst.dtype or dst.dtype.hasobject or not _ready():
        return False
    it = dst.itemsize
    if it not in (1, 2, 4, 8):
        return False
    if src.shape != dst.shape:
        try:
            src = np.broadcast_to(src, dst.shape)
        except ValueError:
            return False
    if any(s % it for s in dst.strides + src.strides) or dst.ndim > 16:
        return False
    if np.may_share_memory(dst, src) and not (
            src.__array_interface__["data"][0] == dst.__array_interface__["data"][0]
            and src.strides == dst.strides):
        return False   # overlapping and not identical: numpy's buffered copy is the safe one
    nt = _threads(dst.size)
    if nt < 2:
        return False   # one thread: numpy's copy is as fast (its loop order is tuned)
    shape, (ds, ss) = _collapse(dst.shape, [s // it for s in dst.strides],
                                [s // it for s in src.strides])
    if len(shape) > 2:   # outer dims in src's memory order (reads stream, rows land anywhere)
        order = sorted(range(len(shape) - 1), key=lambda i: -abs(ss[i]))
        shape, ds, ss = ([v[i] for i in order] + v[-1:] for v in (shape, ds, ss))
    nd = len(shape)
    arr = ctypes.c_int64 * nd
    _FNS["emst_copy"](dst.ctypes.data, src.ctypes.data, nd, arr(*shape), arr(*ds), arr(*ss),
                      it, nt)
    return True


def sum_leading(x, k: int):
    """x.sum(axis=tuple(range(k))) for a C-contiguous float32/float64 x (None otherwise)."""
    name = {np.dtype(np.float32): "emst_sum_f32", np.dtype(np.float64): "emst_sum_f64"}.get(
        x.dtype)
    if name is None or x.size < MIN_ELEMS or not x.flags.c_contiguous or not _ready():
        return None
    R = int(np.prod(x.shape[:k], dtype=np.int64))
    C = x.size // R if R else 0
    if R == 0 or C == 0:
        return None
    nt = _threads(x.size)
    if nt < 2:
        return None   # one thread: numpy's reduction is as fast
    out = np.empty(x.shape[k:], x.dtype)
    _FNS[name](x.ctypes.data, out.ctypes.data, R, C, nt)
    return out
