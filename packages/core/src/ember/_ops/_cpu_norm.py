"""Row kernels in C++ (core's C++ kernel cache): softmax / log_softmax over the last dim (forward
and backward), layer_norm forward and backward and cross_entropy's backward (from the logits and
the class indices), one pass over each row while it is in cache.

The numpy kernels make a full-size temporary per step (x - max, exp, the sum, the division; for
layer_norm's backward about eight); here each row is read and written once or twice, with
vectorized exp (glibc's libmvec through the shared prelude) and sums in double for float32 rows.
Rows are split across OpenMP threads (layer_norm's weight and bias gradients summed per thread,
then in order). float32/float64 with contiguous rows only; otherwise (or without a compiler)
these return None and the numpy kernels run.
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

__all__ = ["softmax", "softmax_backward", "layer_norm", "layer_norm_backward",
           "cross_entropy_backward"]

_SRC = r"""
#include <cmath>
#include <vector>
#include <omp.h>

// exp of d = x - max <= 0 on libmvec's fast path: one lane below the normal range (a causal
// mask's -inf) sends the whole vector to the scalar fallback (masked softmax ran 3-4x slower),
// so d is clamped where exp is taken; the row's sum is unchanged by it (each clamped lane adds
// under 1.7e-38 to a sum >= 1) and the division loop writes 0 where d was below the clamp
// (results under 1.7e-38 / 3e-308 flush to zero). Clamp and mask sit in different loops so the
// compiler cannot fold the clamp away.
// (the clamp is read through a volatile: with a constant one GCC rewrites exp(d >= lo ? d : lo)
// as d >= lo ? exp(d) : exp(lo), and the clamp is gone)
static volatile float em_lo_f = -87.0f;
static volatile double em_lo_d = -708.0;
template <typename T> static inline T em_lo() { return sizeof(T) == 4 ? (T)em_lo_f : (T)em_lo_d; }

template <typename T, bool LOG>
static void softmax_rows(const T* x, T* y, int64_t M, int64_t D, int nt) {
  #pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    const T* xr = x + m * D;
    T* yr = y + m * D;
    T mx = -INFINITY;
    int nan = 0;
    #pragma omp simd reduction(max:mx) reduction(|:nan)
    for (int64_t i = 0; i < D; ++i) { mx = xr[i] > mx ? xr[i] : mx; nan |= xr[i] != xr[i]; }
    if (nan) {   // numpy's max: a NaN row is NaN throughout
      for (int64_t i = 0; i < D; ++i) yr[i] = NAN;
      continue;
    }
    if (std::isinf(mx)) {   // +inf, or all -inf: inf - inf is NaN, the textbook formula's result
      T s = 0;
      for (int64_t i = 0; i < D; ++i) s += std::exp(xr[i] - mx);
      for (int64_t i = 0; i < D; ++i)
        yr[i] = LOG ? (xr[i] - mx) - std::log(s) : std::exp(xr[i] - mx) / s;
      continue;
    }
    const T lo = em_lo<T>();
    T s = 0;
    if (LOG) {
      #pragma omp simd reduction(+:s)
      for (int64_t i = 0; i < D; ++i) {
        const T d = xr[i] - mx;
        yr[i] = std::exp(d >= lo ? d : lo);
        s += yr[i];
      }
      const T ls = std::log(s);
      #pragma omp simd
      for (int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - mx) - ls;
    } else {
      #pragma omp simd reduction(+:s)
      for (int64_t i = 0; i < D; ++i) {
        const T d = xr[i] - mx;
        yr[i] = std::exp(d >= lo ? d : lo);
        s += yr[i];
      }
      #pragma omp simd
      for (int64_t i = 0; i < D; ++i) yr[i] = xr[i] - mx >= lo ? yr[i] / s : (T)0;
    }
  }
}

// softmax: gi = y * (g - sum(g * y)); log_softmax: gi = g - exp(y) * sum(g), each row in one
// pass (sums in double). exp(y) of log_softmax's output goes through the buffer gi, clamped
// as in softmax_rows, and a later loop zeroes the lanes below the clamp.
template <typename T, bool LOG>
static void softmax_bwd_rows(const T* g, const T* y, T* gi, int64_t M, int64_t D, int nt) {
  #pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    const T* gr = g + m * D;
    const T* yr = y + m * D;
    T* o = gi + m * D;
    double s = 0;
    if (LOG) {
      #pragma omp simd reduction(+:s)
      for (int64_t i = 0; i < D; ++i) s += (double)gr[i];
      const T lo = em_lo<T>(), st = (T)s;
      #pragma omp simd
      for (int64_t i = 0; i < D; ++i) o[i] = std::exp(yr[i] >= lo ? yr[i] : lo);
      #pragma omp simd
      for (int64_t i = 0; i < D; ++i) {
        const T e = yr[i] >= lo ? o[i] : (yr[i] != yr[i] ? yr[i] : (T)0);   // NaN stays NaN
        o[i] = gr[i] - e * st;
      }
    } else {
      #pragma omp simd reduction(+:s)
      for (int64_t i = 0; i < D; ++i) s += (double)(gr[i] * yr[i]);
      const T st = (T)s;
      #pragma omp simd
      for (int64_t i = 0; i < D; ++i) o[i] = yr[i] * (gr[i] - st);
    }
  }
}

// cross_entropy's backward from the logits x, softmax recomputed (a row pass as softmax_rows,
// then a scaling pass while the rows are in cache): gi = c * (softmax(x) - onehot(t)), c = 0 for
// an ignored row
template <typename T>
static void xent_bwd_rows(const T* x, const int64_t* t, const T* c, T* gi, int64_t M, int64_t D,
                          int nt) {
  softmax_rows<T, false>(x, gi, M, D, nt);
  #pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    T* o = gi + m * D;
    const T cm = c[m];
    #pragma omp simd
    for (int64_t i = 0; i < D; ++i) o[i] *= cm;
    if (t[m] >= 0 && t[m] < D) o[t[m]] -= cm;
  }
}

template <typename T>
static void ln_fwd(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t M,
                   int64_t D, double eps, int nt) {
  #pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    const T* xr = x + m * D;
    T* yr = y + m * D;
    double s = 0;
    #pragma omp simd reduction(+:s)
    for (int64_t i = 0; i < D; ++i) s += (double)xr[i];
    const T mu = (T)(s / D);
    double v = 0;
    #pragma omp simd reduction(+:v)
    for (int64_t i = 0; i < D; ++i) { const double c = (double)(xr[i] - mu); v += c * c; }
    const T r = (T)(1.0 / std::sqrt(v / D + eps));
    mean[m] = mu; rstd[m] = r;
    #pragma omp simd
    for (int64_t i = 0; i < D; ++i) {
      T t = (xr[i] - mu) * r;
      if (w) t = t * w[i];
      if (b) t = t + b[i];
      yr[i] = t;
    }
  }
}

// gi = rstd * (gx - mean(gx) - xhat * mean(gx * xhat)), gx = g * w; gw = sum g * xhat, gb = sum g
template <typename T>
static void ln_bwd(const T* g, const T* x, const T* mean, const T* rstd, const T* w, T* gi, T* gw,
                   T* gb, int64_t M, int64_t D, int nt) {
  if (nt > M) nt = (int)(M > 0 ? M : 1);
  const bool sums = gw || gb;
  std::vector<double> acc(sums ? (size_t)nt * 2 * D : 0, 0.0);
  #pragma omp parallel num_threads(nt) if (nt > 1)
  {
    double* aw = sums ? acc.data() + (size_t)omp_get_thread_num() * 2 * D : nullptr;
    double* ab = sums ? aw + D : nullptr;
    #pragma omp for schedule(static)
    for (int64_t m = 0; m < M; ++m) {
      const T* gr = g + m * D;
      const T* xr = x + m * D;
      const T mu = mean[m], r = rstd[m];
      if (gi) {
        double s1 = 0, s2 = 0;
        #pragma omp simd reduction(+:s1, s2)
        for (int64_t i = 0; i < D; ++i) {
          const T gx = w ? gr[i] * w[i] : gr[i];
          s1 += (double)gx;
          s2 += (double)(gx * ((xr[i] - mu) * r));
        }
        const T m1 = (T)(s1 / D), m2 = (T)(s2 / D);
        T* o = gi + m * D;
        #pragma omp simd
        for (int64_t i = 0; i < D; ++i) {
          const T gx = w ? gr[i] * w[i] : gr[i];
          o[i] = ((gx - m1) - ((xr[i] - mu) * r) * m2) * r;
        }
      }
      if (sums) {
        #pragma omp simd
        for (int64_t i = 0; i < D; ++i) {
          aw[i] += (double)(gr[i] * ((xr[i] - mu) * r));
          ab[i] += (double)gr[i];
        }
      }
    }
  }
  if (!sums) return;
  for (int64_t i = 0; i < D; ++i) {
    double sw = 0, sb = 0;
    for (int t = 0; t < nt; ++t) {
      sw += acc[(size_t)t * 2 * D + i];
      sb += acc[(size_t)t * 2 * D + D + i];
    }
    if (gw) gw[i] = (T)sw;
    if (gb) gb[i] = (T)sb;
  }
}

#define EMROW_API(T, SFX)                                                                    \
extern "C" void emrow_softmax_##SFX(const T* x, T* y, int64_t M, int64_t D, int log, int nt) { \
  if (log) softmax_rows<T, true>(x, y, M, D, nt); else softmax_rows<T, false>(x, y, M, D, nt); } \
extern "C" void emrow_softmax_bwd_##SFX(const T* g, const T* y, T* gi, int64_t M, int64_t D,   \
                                        int log, int nt) {                                  \
  if (log) softmax_bwd_rows<T, true>(g, y, gi, M, D, nt);                                    \
  else softmax_bwd_rows<T, false>(g, y, gi, M, D, nt); }                                     \
extern "C" void emrow_xent_bwd_##SFX(const T* x, const int64_t* t, const T* c, T* gi,        \
                                     int64_t M, int64_t D, int nt) {                         \
  xent_bwd_rows<T>(x, t, c, gi, M, D, nt); }                                                 \
extern "C" void emrow_ln_fwd_##SFX(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, \
                                   int64_t M, int64_t D, double eps, int nt) {               \
  ln_fwd<T>(x, w, b, y, mean, rstd, M, D, eps, nt); }                                        \
extern "C" void emrow_ln_bwd_##SFX(const T* g, const T* x, const T* mean, const T* rstd,     \
                                   const T* w, T* gi, T* gw, T* gb, int64_t M, int64_t D,    \
                                   int nt) {                                                 \
  ln_bwd<T>(g, x, mean, rstd, w, gi, gw, gb, M, D, nt); }
EMROW_API(float, f32)
EMROW_API(double, f64)
"""

_lib = None
_FNS: dict = {}
_SFX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_ELEMS_PER_THREAD = 1 << 16


def _load():
    global _lib
    from . import _cpujit
    _lib = False
    if os.environ.get("EMBER_CPU_ROWS", "1") == "0" or not _cpujit.available():
        return
    lib = _cpujit._build([_SRC])
    if lib is None:
        return
    p, i, i64, d = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_double
    sig = {"emrow_softmax": [p, p, i64, i64, i, i],
           "emrow_softmax_bwd": [p, p, p, i64, i64, i, i],
           "emrow_xent_bwd": [p] * 4 + [i64, i64, i],
           "emrow_ln_fwd": [p] * 6 + [i64, i64, d, i],
           "emrow_ln_bwd": [p] * 8 + [i64, i64, i]}
    for sfx in ("f32", "f64"):
        for name, args in sig.items():
            fn = getattr(lib, f"{name}_{sfx}")
            fn.argtypes, fn.restype = args, None
            _FNS[(name, sfx)] = fn
    _lib = lib


def _fn(name, dt):
    if _lib is None:
        _load()
    if not _lib:
        return None
    sfx = _SFX.get(np.dtype(dt))
    return None if sfx is None else _FNS[(name, sfx)]


def _threads(size, rows) -> int:
    from .. import _blas, _flags
    from . import _cpujit
    nt = min(_cpujit._threads_after_fork or _flags._threads or _cpujit._NCPU, rows,
             size // _ELEMS_PER_THREAD + 1)
    if nt > 1:
        nt = min(nt, _blas.free_cores())
    return max(1, nt)


def _c(a):
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _ptr(a):
    return None if a is None else a.ctypes.data


def softmax(x, log: bool):
    """softmax (log_softmax) of a float32/float64 array over its last dim, or None."""
    fn = _fn("emrow_softmax", x.dtype)
    if fn is None or x.ndim == 0 or x.size == 0:
        return None
    x = _c(x)
    D = x.shape[-1]
    M = x.size // D
    y = np.empty(x.shape, x.dtype)
    fn(x.ctypes.data, y.ctypes.data, M, D, int(log), _threads(x.size, M))
    return y


def softmax_backward(g, y, log: bool):
    """The gradient of softmax (log_softmax) over the last dim from its output y, or None."""
    fn = _fn("emrow_softmax_bwd", y.dtype)
    if fn is None or y.ndim == 0 or y.size == 0 or g.dtype != y.dtype:
        return None
    g, y = _c(g), _c(y)
    D = y.shape[-1]
    M = y.size // D
    gi = np.empty(y.shape, y.dtype)
    fn(g.ctypes.data, y.ctypes.data, gi.ctypes.data, M, D, int(log), _threads(y.size, M))
    return gi


def cross_entropy_backward(x, t, c):
    """c[m] * (softmax(x[m]) - onehot(t[m])) for logits x (M, D), class indices t (M,) and row
    coefficients c (M,) of x's dtype (0 for ignored rows), or None."""
    fn = _fn("emrow_xent_bwd", x.dtype)
    if fn is None or x.ndim != 2 or x.size == 0 or c.dtype != x.dtype:
        return None
    x, t, c = _c(x), _c(t.astype(np.int64, copy=False)), _c(c)
    M, D = x.shape
    gi = np.empty(x.shape, x.dtype)
    fn(x.ctypes.data, t.ctypes.data, c.ctypes.data, gi.ctypes.data, M, D, _threads(x.size, M))
    return gi


def _same(dt, *arrays):
    return all(a is None or a.dtype == dt for a in arrays)


def layer_norm(x, w, b, eps, D):
    """(y, mean, rstd (rows,)) normalizing x over its last D elements, or None."""
    fn = _fn("emrow_ln_fwd", x.dtype)
    if fn is None or D == 0 or x.size == 0 or not _same(x.dtype, w, b):
        return None
    x = _c(x)
    w = None if w is None else _c(w)
    b = None if b is None else _c(b)
    M = x.size // D
    y = np.empty(x.shape, x.dtype)
    mean, rstd = np.empty(M, x.dtype), np.empty(M, x.dtype)
    fn(x.ctypes.data, _ptr(w), _ptr(b), y.ctypes.data, mean.ctypes.data, rstd.ctypes.data, M, D,
       float(eps), _threads(x.size, M))
    return y, mean, rstd


def layer_norm_backward(g, x, mean, rstd, w, D, want_gi, want_gw, want_gb):
    """(gi, gw, gb) of layer_norm over the last D elements (None where not wanted), or None."""
    fn = _fn("emrow_ln_bwd", x.dtype)
    if fn is None or D == 0 or x.size == 0 or not _same(x.dtype, g, mean, rstd, w):
        return None
    g, x, mean, rstd = _c(g), _c(x), _c(mean), _c(rstd)
    w = None if w is None else _c(w)
    M = x.size // D
    gi = np.empty(x.shape, x.dtype) if want_gi else None
    gw = np.empty(D, x.dtype) if want_gw else None
    gb = np.empty(D, x.dtype) if want_gb else None
    fn(g.ctypes.data, x.ctypes.data, mean.ctypes.data, rstd.ctypes.data, _ptr(w), _ptr(gi),
       _ptr(gw), _ptr(gb), M, D, _threads(x.size, M))
    return gi, gw, gb
