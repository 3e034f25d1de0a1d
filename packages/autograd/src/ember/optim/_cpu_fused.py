"""Adam/AdamW's and SGD's fused CPU steps as one C++ pass over each parameter (core's C++ kernel
cache).

`_adam_fused` in adam.py runs the update as about twelve numpy passes over four arrays (SGD's
momentum step in sgd.py four, with temporaries); this
runs the same operations, in the same order and dtype (float or double, hyper-parameters rounded
to it as numpy rounds a Python float against a float32 array), element by element in one loop,
split across OpenMP threads only for very large tensors. The library is built once through
`ember._ops._cpujit` (compiler, private on-disk cache, digests); without a compiler `adam`
returns False and the numpy path runs.
"""
from __future__ import annotations

import ctypes

import numpy as np

__all__ = ["adam", "sgd"]

# elements per thread, at least: the loop is memory bound, and on a busy 2-core machine a second
# thread that is not scheduled stalls the whole step (measured: 670k floats, 1.7 ms on one
# thread, 7.6 ms on two with the other core loaded)
_GRAIN = 1 << 22

_SRC = r"""
template <typename T>
static void em_adam(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v,
                    int64_t n, const double* h, int flags, int nt) {
  const T lr_wd = (T)(1.0 - h[0] * h[4]), wd = (T)h[4], om_b1 = (T)(1.0 - h[1]);
  const T b2 = (T)h[2], om_b2 = (T)(1.0 - h[2]), bc2s = (T)h[6], eps = (T)h[3];
  const T neg_step = (T)(-(h[0] / h[5]));
  const bool decay = h[4] != 0, decoupled = flags & 1, maximize = flags & 2;
  #pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t i = 0; i < n; ++i) {
    T gi = maximize ? -g[i] : g[i];
    T pi = p[i];
    if (decay) {
      if (decoupled) pi = pi * lr_wd; else gi = gi + pi * wd;
    }
    T mi = m[i];
    T t = gi - mi;
    t = t * om_b1;
    mi = mi + t;
    T vi = v[i] * b2;
    t = gi * gi;
    t = t * om_b2;
    vi = vi + t;
    T d = std::sqrt(vi);
    d = d / bc2s;
    d = d + eps;
    T u = mi * neg_step;
    u = u / d;
    p[i] = pi + u;
    m[i] = mi;
    v[i] = vi;
  }
}
// SGD with momentum (numpy's in-place order in sgd._sgd_fused): g = -g (maximize), g += p * wd,
// b = b * momentum + g * (1 - dampening), d = nesterov ? g + b * momentum : b, p += d * -lr
template <typename T>
static void em_sgd(T* __restrict p, const T* __restrict g, T* __restrict b, int64_t n,
                   const double* h, int flags, int nt) {
  const T lr = (T)(-h[0]), mom = (T)h[1], damp = (T)(1.0 - h[2]), wd = (T)h[3];
  const bool decay = h[3] != 0, nesterov = flags & 1, maximize = flags & 2;
  #pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t i = 0; i < n; ++i) {
    T gi = maximize ? -g[i] : g[i];
    if (decay) gi = gi + p[i] * wd;
    T bi = b[i] * mom;
    bi = bi + gi * damp;
    const T d = nesterov ? gi + bi * mom : bi;
    b[i] = bi;
    p[i] = p[i] + d * lr;
  }
}
extern "C" void ember_sgd_f32(float* p, const float* g, float* b, int64_t n, const double* h,
                              int flags, int nt) {
  em_sgd<float>(p, g, b, n, h, flags, nt);
}
extern "C" void ember_sgd_f64(double* p, const double* g, double* b, int64_t n, const double* h,
                              int flags, int nt) {
  em_sgd<double>(p, g, b, n, h, flags, nt);
}
extern "C" void ember_adam_f32(float* p, const float* g, float* m, float* v, int64_t n,
                               const double* h, int flags, int nt) {
  em_adam<float>(p, g, m, v, n, h, flags, nt);
}
extern "C" void ember_adam_f64(double* p, const double* g, double* m, double* v, int64_t n,
                               const double* h, int flags, int nt) {
  em_adam<double>(p, g, m, v, n, h, flags, nt);
}
"""

_lib = None  # the loaded library, False when it cannot be built
_FNS: dict = {}


def _load():
    global _lib
    from ember._ops import _cpujit
    _lib = False
    if not _cpujit.available():
        return
    lib = _cpujit._build([_SRC])
    if lib is None:
        return
    p, i64, dp = ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_double)
    for name, dt in (("ember_adam_f32", np.float32), ("ember_adam_f64", np.float64)):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = [p, p, p, p, i64, dp, ctypes.c_int, ctypes.c_int], None
        _FNS[np.dtype(dt)] = fn
    for name, dt in (("ember_sgd_f32", np.float32), ("ember_sgd_f64", np.float64)):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = [p, p, p, i64, dp, ctypes.c_int, ctypes.c_int], None
        _FNS[("sgd", np.dtype(dt))] = fn
    _lib = lib


def _nt(n) -> int:
    from ember import _blas, _flags
    from ember._ops import _cpujit
    nt = min(_cpujit._threads_after_fork or _flags._threads or _cpujit._NCPU, n // _GRAIN + 1)
    return min(nt, _blas.free_cores()) if nt > 1 else nt


def sgd(p, g, b, lr, momentum, dampening, wd, nesterov, maximize) -> bool:
    """One SGD momentum step on C-contiguous numpy arrays of one float dtype, in place (the
    buffer b exists); False (nothing done) when there is no C++ kernel for them."""
    if _lib is None:
        _load()
    fn = _FNS.get(("sgd", p.dtype)) if _lib else None
    if fn is None or g.dtype != p.dtype or b.dtype != p.dtype or not (
            p.flags.c_contiguous and g.flags.c_contiguous and b.flags.c_contiguous
            and p.flags.writeable and b.flags.writeable):
        return False
    h = (ctypes.c_double * 4)(lr, momentum, dampening, wd)
    fn(p.ctypes.data, g.ctypes.data, b.ctypes.data, p.size, h,
       (1 if nesterov else 0) | (2 if maximize else 0), _nt(p.size))
    return True


def adam(p, g, m, v, step, lr, beta1, beta2, eps, wd, decoupled, maximize) -> bool:
    """One Adam step on C-contiguous numpy arrays of one float dtype, in place; False (nothing
    done) when there is no C++ kernel for them."""
    if _lib is None:
        _load()
    fn = _FNS.get(p.dtype) if _lib else None
    if fn is None or not (p.flags.c_contiguous and g.flags.c_contiguous and m.flags.c_contiguous
                          and v.flags.c_contiguous and p.flags.writeable):
        return False
    n = p.size
    bc1 = 1 - beta1 ** step
    bc2s = (1 - beta2 ** step) ** 0.5
    h = (ctypes.c_double * 7)(lr, beta1, beta2, eps, wd, bc1, bc2s)
    nt = _nt(n)
    fn(p.ctypes.data, g.ctypes.data, m.ctypes.data, v.ctypes.data, n, h,
       (1 if decoupled else 0) | (2 if maximize else 0), nt)
    return True
