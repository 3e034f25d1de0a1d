"""Convolution and max-pool CPU kernels in C++ (core's C++ kernel cache), GEMMs through BLAS.

conv.py's numpy kernels build the whole batch's im2col columns (a padded copy, then a strided
copy; 42 MB for the CNN benchmark's second layer), run one GEMM, transpose the result, and
scatter col2im with one numpy pass per kernel offset. Here each sample's columns are built into a
per-thread buffer that stays in cache (padding read as zeros, no padded copy), multiplied by the
weight with the BLAS that numpy links (its cblas_?gemm, called from C++ with BLAS at one thread),
and written straight into the (N, C, *S) result; col2im adds the columns back in the same loop.
Samples are split across OpenMP threads (weight gradients summed per thread, then in order).
pool: max-pool forward (PyTorch's `val > max || isnan(val)` rule, flat spatial indices) and the
index scatter of its backward, in one pass each. float32/float64 only; anything else (or no
compiler / no BLAS symbol) makes these return None and conv.py's numpy kernels run.
"""
from __future__ import annotations

import ctypes
import glob
import os

import numpy as np

__all__ = ["conv_forward", "conv_input_grad", "conv_weight_grad", "max_pool", "pool_scatter"]

_SRC = r"""
#include <cstring>
#include <vector>
#include <cmath>
#include <omp.h>
typedef void (*sgemm_t)(int, int, int, int64_t, int64_t, int64_t, float, const float*, int64_t,
                        const float*, int64_t, float, float*, int64_t);
typedef void (*dgemm_t)(int, int, int, int64_t, int64_t, int64_t, double, const double*, int64_t,
                        const double*, int64_t, double, double*, int64_t);
enum { kRow = 101, kNo = 111, kTr = 112 };

// geometry g: N, C (input channels), O (output channels), groups, S[3], K[3], Q[3] (output
// sizes), st[3], pd[3], dl[3]; fewer spatial dims come as leading size-1 dims
struct Geo {
  int64_t N, C, O, G, S[3], K[3], Q[3], st[3], pd[3], dl[3], Sp, Kp, L;
  explicit Geo(const int64_t* g) {
    N = g[0]; C = g[1]; O = g[2]; G = g[3];
    for (int i = 0; i < 3; ++i) {
      S[i] = g[4 + i]; K[i] = g[7 + i]; Q[i] = g[10 + i]; st[i] = g[13 + i];
      pd[i] = g[16 + i]; dl[i] = g[19 + i];
    }
    Sp = S[0] * S[1] * S[2]; Kp = K[0] * K[1] * K[2]; L = Q[0] * Q[1] * Q[2];
  }
  bool direct() const {  // a 1x1 kernel, stride 1, no padding: the input is its own columns
    return Kp == 1 && st[0] == 1 && st[1] == 1 && st[2] == 1 && pd[0] == 0 && pd[1] == 0 &&
           pd[2] == 0 && Q[0] == S[0] && Q[1] == S[1] && Q[2] == S[2];
  }
};

// one sample: x (C, S) -> cols (C*Kp, L) when ADD is false; cols added back into x when true
template <typename T, bool ADD>
static void im2col(T* x, T* cols, const Geo& g) {
  const int64_t Q1 = g.Q[1], Q2 = g.Q[2], L = g.L;
  for (int64_t c = 0; c < g.C; ++c)
  for (int64_t k0 = 0; k0 < g.K[0]; ++k0)
  for (int64_t k1 = 0; k1 < g.K[1]; ++k1)
  for (int64_t k2 = 0; k2 < g.K[2]; ++k2) {
    T* row = cols + (((c * g.K[0] + k0) * g.K[1] + k1) * g.K[2] + k2) * L;
    // the o2 range whose input column is inside [0, S2)
    const int64_t off2 = k2 * g.dl[2] - g.pd[2], s2 = g.st[2];
    int64_t lo = off2 >= 0 ? 0 : (-off2 + s2 - 1) / s2;
    int64_t hi = g.S[2] - off2 <= 0 ? 0 : (g.S[2] - off2 - 1) / s2 + 1;
    if (hi > Q2) hi = Q2;
    if (lo > hi) lo = hi;
    for (int64_t o0 = 0; o0 < g.Q[0]; ++o0) {
      const int64_t i0 = o0 * g.st[0] - g.pd[0] + k0 * g.dl[0];
      for (int64_t o1 = 0; o1 < Q1; ++o1) {
        T* dst = row + (o0 * Q1 + o1) * Q2;
        const int64_t i1 = o1 * g.st[1] - g.pd[1] + k1 * g.dl[1];
        if (i0 < 0 || i0 >= g.S[0] || i1 < 0 || i1 >= g.S[1]) {
          if (!ADD) std::memset(dst, 0, sizeof(T) * Q2);
          continue;
        }
        T* src = x + ((c * g.S[0] + i0) * g.S[1] + i1) * g.S[2] + off2;
        if (ADD) {
          if (s2 == 1) for (int64_t o = lo; o < hi; ++o) src[o] += dst[o];
          else for (int64_t o = lo; o < hi; ++o) src[o * s2] += dst[o];
        } else {
          for (int64_t o = 0; o < lo; ++o) dst[o] = 0;
          if (s2 == 1) std::memcpy(dst + lo, src + lo, sizeof(T) * (hi - lo));
          else for (int64_t o = lo; o < hi; ++o) dst[o] = src[o * s2];
          for (int64_t o = hi; o < Q2; ++o) dst[o] = 0;
        }
      }
    }
  }
}

template <typename T, typename GEMM>
static void fwd(const T* x, const T* w, const T* b, T* y, const int64_t* gv, GEMM gemm, int nt) {
  const Geo g(gv);
  const int64_t CK = g.C * g.Kp, CgK = CK / g.G, Og = g.O / g.G, L = g.L;
  const bool direct = g.direct();
  #pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::vector<T> buf(direct ? 0 : CK * L);
    #pragma omp for schedule(static)
    for (int64_t n = 0; n < g.N; ++n) {
      const T* cols = x + n * g.C * g.Sp;
      if (!direct) { im2col<T, false>(const_cast<T*>(cols), buf.data(), g); cols = buf.data(); }
      T* yn = y + n * g.O * L;
      for (int64_t j = 0; j < g.G; ++j)
        gemm(kRow, kNo, kNo, Og, L, CgK, T(1), w + j * Og * CgK, CgK, cols + j * CgK * L, L,
             T(0), yn + j * Og * L, L);
      if (b) for (int64_t o = 0; o < g.O; ++o) {
        T* r = yn + o * L; const T bo = b[o];
        for (int64_t i = 0; i < L; ++i) r[i] += bo;
      }
    }
  }
}

// gy (N, O, Q) and w (O, Cg, K) -> gx (N, C, S): columns W^T gy per sample, added back
template <typename T, typename GEMM>
static void bwd_input(const T* gy, const T* w, T* gx, const int64_t* gv, GEMM gemm, int nt) {
  const Geo g(gv);
  const int64_t CK = g.C * g.Kp, CgK = CK / g.G, Og = g.O / g.G, L = g.L;
  const bool direct = g.direct();
  #pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::vector<T> buf(direct ? 0 : CK * L);
    #pragma omp for schedule(static)
    for (int64_t n = 0; n < g.N; ++n) {
      T* xn = gx + n * g.C * g.Sp;
      T* cols = direct ? xn : buf.data();
      for (int64_t j = 0; j < g.G; ++j)
        gemm(kRow, kTr, kNo, CgK, L, Og, T(1), w + j * Og * CgK, CgK, gy + n * g.O * L + j * Og * L,
             L, T(0), cols + j * CgK * L, L);
      if (!direct) {
        std::memset(xn, 0, sizeof(T) * g.C * g.Sp);
        im2col<T, true>(xn, cols, g);
      }
    }
  }
}

// x (N, C, S), gy (N, O, Q) -> gw (O, Cg, K) (and gb (O) when given): per-thread sums, then
// added in thread order
template <typename T, typename GEMM>
static void bwd_weight(const T* x, const T* gy, T* gw, T* gb, const int64_t* gv, GEMM gemm,
                       int nt) {
  const Geo g(gv);
  const int64_t CK = g.C * g.Kp, CgK = CK / g.G, Og = g.O / g.G, L = g.L, W = g.O * CgK;
  const bool direct = g.direct();
  if (nt > g.N) nt = (int)(g.N > 0 ? g.N : 1);
  std::vector<T> acc((size_t)nt * (W + g.O), T(0));
  #pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int t = omp_get_thread_num();
    std::vector<T> buf(direct ? 0 : CK * L);
    T* aw = acc.data() + t * (W + g.O);
    T* ab = aw + W;
    #pragma omp for schedule(static)
    for (int64_t n = 0; n < g.N; ++n) {
      const T* cols = x + n * g.C * g.Sp;
      if (!direct) { im2col<T, false>(const_cast<T*>(cols), buf.data(), g); cols = buf.data(); }
      const T* gn = gy + n * g.O * L;
      for (int64_t j = 0; j < g.G; ++j)
        gemm(kRow, kNo, kTr, Og, CgK, L, T(1), gn + j * Og * L, L, cols + j * CgK * L, L, T(1),
             aw + j * Og * CgK, CgK);
      if (gb) for (int64_t o = 0; o < g.O; ++o) {
        const T* r = gn + o * L; T s = 0;
        for (int64_t i = 0; i < L; ++i) s += r[i];
        ab[o] += s;
      }
    }
  }
  std::memcpy(gw, acc.data(), sizeof(T) * W);
  if (gb) std::memcpy(gb, acc.data() + W, sizeof(T) * g.O);
  for (int t = 1; t < nt; ++t) {
    const T* a = acc.data() + t * (W + g.O);
    for (int64_t i = 0; i < W; ++i) gw[i] += a[i];
    if (gb) for (int64_t o = 0; o < g.O; ++o) gb[o] += a[W + o];
  }
}

// max pool over planes (M, S) -> vals, idx (M, Q): windows from -pd, PyTorch's NaN rule; each
// output row is swept once per window offset (offsets in PyTorch's order), the long loop inside
template <typename T>
static void maxpool(const T* x, T* v, int64_t* idx, int64_t M, const int64_t* gv, int nt) {
  const Geo g(gv);
  const int64_t Q2 = g.Q[2], s2 = g.st[2];
  #pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    const T* xm = x + m * g.Sp;
    for (int64_t o0 = 0; o0 < g.Q[0]; ++o0)
    for (int64_t o1 = 0; o1 < g.Q[1]; ++o1) {
      const int64_t q = m * g.L + (o0 * g.Q[1] + o1) * Q2;
      T* vr = v + q;
      int64_t* ir = idx + q;
      for (int64_t o = 0; o < Q2; ++o) { vr[o] = -INFINITY; ir[o] = -1; }
      for (int64_t k0 = 0; k0 < g.K[0]; ++k0) {
        const int64_t i0 = o0 * g.st[0] - g.pd[0] + k0 * g.dl[0];
        if (i0 < 0 || i0 >= g.S[0]) continue;
        for (int64_t k1 = 0; k1 < g.K[1]; ++k1) {
          const int64_t i1 = o1 * g.st[1] - g.pd[1] + k1 * g.dl[1];
          if (i1 < 0 || i1 >= g.S[1]) continue;
          const int64_t r = (i0 * g.S[1] + i1) * g.S[2];
          for (int64_t k2 = 0; k2 < g.K[2]; ++k2) {
            const int64_t off = k2 * g.dl[2] - g.pd[2];
            int64_t lo = off >= 0 ? 0 : (-off + s2 - 1) / s2;
            int64_t hi = g.S[2] - off <= 0 ? 0 : (g.S[2] - off - 1) / s2 + 1;
            if (hi > Q2) hi = Q2;
            const T* src = xm + r + off;
            for (int64_t o = lo; o < hi; ++o) {
              const T val = src[o * s2], cur = vr[o];
              const int64_t ci = ir[o];
              // branch-free (the comparisons are coin flips on random data)
              const bool take = (ci < 0) | (val > cur) | (val != val);
              vr[o] = take ? val : cur;
              ir[o] = take ? r + off + o * s2 : ci;
            }
          }
        }
      }
    }
  }
}

// gi (M, P) = 0; gi[m, idx[m, j]] += gy[m, j]
template <typename T>
static void scatter(const T* gy, const int64_t* idx, T* gi, int64_t M, int64_t Q, int64_t P,
                    int nt) {
  #pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    T* r = gi + m * P;
    std::memset(r, 0, sizeof(T) * P);
    const T* s = gy + m * Q;
    const int64_t* ix = idx + m * Q;
    for (int64_t j = 0; j < Q; ++j) r[ix[j]] += s[j];
  }
}

#define EMCONV_API(T, SFX, GT)                                                               \
extern "C" void emconv_fwd_##SFX(const T* x, const T* w, const T* b, T* y, const int64_t* g,  \
                                 void* gemm, int nt) {                                       \
  fwd<T>(x, w, b, y, g, (GT)gemm, nt); }                                                     \
extern "C" void emconv_bwdi_##SFX(const T* gy, const T* w, T* gx, const int64_t* g,          \
                                  void* gemm, int nt) {                                      \
  bwd_input<T>(gy, w, gx, g, (GT)gemm, nt); }                                                \
extern "C" void emconv_bwdw_##SFX(const T* x, const T* gy, T* gw, T* gb, const int64_t* g,   \
                                  void* gemm, int nt) {                                      \
  bwd_weight<T>(x, gy, gw, gb, g, (GT)gemm, nt); }                                           \
extern "C" void empool_max_##SFX(const T* x, T* v, int64_t* i, int64_t M, const int64_t* g, \
                                 int nt) { maxpool<T>(x, v, i, M, g, nt); }                  \
extern "C" void empool_scatter_##SFX(const T* gy, const int64_t* i, T* gi, int64_t M,        \
                                     int64_t Q, int64_t P, int nt) {                         \
  scatter<T>(gy, i, gi, M, Q, P, nt); }
EMCONV_API(float, f32, sgemm_t)
EMCONV_API(double, f64, dgemm_t)
"""

_lib = None    # the loaded library, False when it cannot be built
_FNS: dict = {}
_GEMM: dict = {}   # np.dtype -> address of the BLAS ?gemm numpy links
_GEMM_SYMBOLS = {"f32": ("scipy_cblas_sgemm64_", "cblas_sgemm64_", "cblas_sgemm"),
                 "f64": ("scipy_cblas_dgemm64_", "cblas_dgemm64_", "cblas_dgemm")}
_INT64_BLAS = ("scipy_cblas_sgemm64_", "cblas_sgemm64_", "scipy_cblas_dgemm64_",
               "cblas_dgemm64_")
_SFX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
# per-thread work below which a second thread costs more than it gains (flops)
_FLOPS_PER_THREAD = 1 << 24
# pooling counted per element of the pooled tensor: one thread per 64K elements (the row
# kernels' grain; a CNN's (64, 64, 24, 24) max pool took 6.5 ms on one core, its backward 2 ms,
# and their old estimate, 4 flops per window element, kept both on one thread)
_POOL_WEIGHT = _FLOPS_PER_THREAD >> 16


def _find_gemm():
    """Addresses of numpy's BLAS sgemm/dgemm with 64-bit integer arguments (scipy-openblas64),
    keyed by dtype; empty when there is no such library."""
    import numpy
    libdir = os.path.join(os.path.dirname(os.path.dirname(numpy.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libdir, "*openblas*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        found = {}
        for sfx, names in _GEMM_SYMBOLS.items():
            for name in names:
                if name in _INT64_BLAS and hasattr(lib, name):
                    found[sfx] = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                    break
        if len(found) == 2:
            return {dt: found[s] for dt, s in _SFX.items()}
    return {}


def build_with_gemm(flag: str, sources) -> tuple:
    """(library, {dtype: BLAS gemm address}) for C++ sources that call BLAS's int64 gemm, or
    (None, {}) where the environment variable `flag` is 0, no compiler works or no such BLAS
    symbol is found (numpy's kernels run then)."""
    from . import _cpujit
    if os.environ.get(flag, "1") == "0" or not _cpujit.available():
        return None, {}
    try:
        gemm = _find_gemm()
    except Exception:  # noqa: BLE001 - no BLAS symbol
        gemm = {}
    lib = _cpujit._build(sources) if gemm else None
    return (lib, gemm) if lib is not None else (None, {})


def _load():
    global _lib
    _lib = False
    lib, gemm = build_with_gemm("EMBER_CPU_CONV", [_SRC])
    if lib is None:
        return
    p, i, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
    for sfx in ("f32", "f64"):
        sig = {"emconv_fwd": [p] * 6 + [i], "emconv_bwdi": [p] * 5 + [i],
               "emconv_bwdw": [p] * 6 + [i], "empool_max": [p, p, p, i64, p, i],
               "empool_scatter": [p, p, p, i64, i64, i64, i]}
        for name, args in sig.items():
            fn = getattr(lib, f"{name}_{sfx}")
            fn.argtypes, fn.restype = args, None
            _FNS[(name, sfx)] = fn
    _GEMM.update(gemm)
    _lib = lib


def _fn(name, dt):
    if _lib is None:
        _load()
    if not _lib:
        return None
    sfx = _SFX.get(np.dtype(dt))
    return None if sfx is None else _FNS[(name, sfx)]


def _threads(flops, parts) -> int:
    from .. import _blas, _flags
    from . import _cpujit
    nt = min(_cpujit._threads_after_fork or _flags._threads or _cpujit._NCPU, parts,
             int(flops // _FLOPS_PER_THREAD) + 1)
    if nt > 1:
        nt = min(nt, _blas.free_cores())
    return max(1, nt)


def _geo(N, C, O, groups, S, K, Q, st, pd, dl):
    # 1-d and 2-d as 3-d with leading size-1 dims (the innermost loops stay the long ones)
    pad3 = lambda v, fill: (fill,) * (3 - len(v)) + tuple(v)  # noqa: E731
    vals = (N, C, O, groups, *pad3(S, 1), *pad3(K, 1), *pad3(Q, 1), *pad3(st, 1), *pad3(pd, 0),
            *pad3(dl, 1))
    return (ctypes.c_int64 * 22)(*[int(v) for v in vals])


def _blas_one_thread():
    from .. import _blas
    _blas.gemm_threads(0)   # BLAS runs inside our threads: one thread each


def _c(a):
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def conv_forward(x, w, b, stride, pad, dil, groups, out=None):
    """(N, C, *S) conv (O, C/g, *K) [+ b] -> (N, O, *Q), or None (numpy's kernel runs).
    `out`: the first Q output positions only (a transposed conv's input gradient when its
    output_padding reaches past the stride)."""
    fn = _fn("emconv_fwd", x.dtype)
    if fn is None or len(stride) > 3 or x.dtype != w.dtype or (b is not None
                                                               and b.dtype != x.dtype):
        return None
    from .conv import conv_out_size
    N, C = x.shape[:2]
    O, K = w.shape[0], w.shape[2:]
    Q = tuple(conv_out_size(s, k, st, p, d) for s, k, st, p, d in
              zip(x.shape[2:], K, stride, pad, dil)) if out is None else tuple(out)
    y = np.empty((N, O) + Q, x.dtype)
    if y.size == 0 or x.size == 0:
        return None
    x, w = _c(x), _c(w)
    b = None if b is None else _c(b)
    geo = _geo(N, C, O, groups, x.shape[2:], K, Q, stride, pad, dil)
    flops = 2 * y.size * w[0].size
    _blas_one_thread()
    fn(x.ctypes.data, w.ctypes.data, None if b is None else b.ctypes.data, y.ctypes.data, geo,
       _GEMM[x.dtype], _threads(flops, N))
    return y


def conv_input_grad(gy, w, in_spatial, stride, pad, dil, groups):
    """Adjoint of conv_forward in its input: gy (N, O, *Q), w (O, Cg, *K) -> (N, Cg*g, *S)."""
    fn = _fn("emconv_bwdi", gy.dtype)
    if fn is None or len(stride) > 3 or gy.dtype != w.dtype or gy.size == 0:
        return None
    N, O = gy.shape[:2]
    C = w.shape[1] * groups
    gx = np.empty((N, C) + tuple(in_spatial), gy.dtype)
    if gx.size == 0:
        return None
    gy, w = _c(gy), _c(w)
    geo = _geo(N, C, O, groups, in_spatial, w.shape[2:], gy.shape[2:], stride, pad, dil)
    _blas_one_thread()
    fn(gy.ctypes.data, w.ctypes.data, gx.ctypes.data, geo, _GEMM[gy.dtype],
       _threads(2 * gy.size * w[0].size, N))
    return gx


def conv_weight_grad(x, gy, ksize, stride, pad, dil, groups, bias=False):
    """(gw (O, C/g, *K), gb (O) or None) from x (N, C, *S) and gy (N, O, *Q), or None."""
    fn = _fn("emconv_bwdw", x.dtype)
    if fn is None or len(stride) > 3 or x.dtype != gy.dtype or x.size == 0 or gy.size == 0:
        return None
    N, C = x.shape[:2]
    O = gy.shape[1]
    gw = np.empty((O, C // groups) + tuple(ksize), x.dtype)
    gb = np.empty((O,), x.dtype) if bias else None
    x, gy = _c(x), _c(gy)
    geo = _geo(N, C, O, groups, x.shape[2:], ksize, gy.shape[2:], stride, pad, dil)
    _blas_one_thread()
    fn(x.ctypes.data, gy.ctypes.data, gw.ctypes.data, None if gb is None else gb.ctypes.data,
       geo, _GEMM[x.dtype], _threads(2 * gy.size * gw[0].size, N))
    return gw, gb


def max_pool(x, n, k, s, p, d, out):
    """(vals, flat spatial indices) of max pooling over x's last n dims, or None."""
    fn = _fn("empool_max", x.dtype)
    if fn is None or n > 3 or x.size == 0:
        return None
    lead = x.shape[:x.ndim - n]
    M = int(np.prod(lead, dtype=np.int64))
    x = _c(x)
    v = np.empty(lead + tuple(out), x.dtype)
    idx = np.empty(lead + tuple(out), np.int64)
    geo = _geo(0, 0, 0, 1, x.shape[x.ndim - n:], k, out, s, p, d)
    fn(x.ctypes.data, v.ctypes.data, idx.ctypes.data, M, geo, _threads(_POOL_WEIGHT * x.size, M))
    return v, idx


def pool_scatter(g, idx, shape, n):
    """gi (shape) with gi[..., idx[..., j]] += g[..., j] over the last n dims, or None."""
    fn = _fn("empool_scatter", g.dtype)
    if fn is None or g.size == 0:
        return None
    lead = shape[:len(shape) - n]
    M = int(np.prod(lead, dtype=np.int64))
    P = int(np.prod(shape[len(shape) - n:], dtype=np.int64))
    Q = g.size // M if M else 0
    g, idx = _c(g), _c(idx)
    if idx.dtype != np.int64 or idx.shape != g.shape:
        return None
    gi = np.empty(shape, g.dtype)
    fn(g.ctypes.data, idx.ctypes.data, gi.ctypes.data, M, Q, P, _threads(_POOL_WEIGHT * gi.size, M))
    return gi
