"""FlexAttention's fused CPU kernels in C++: the score_mod, its derivative and the mask_mod are
traced (`_modexpr`) into inline functions of a templated kernel pair, compiled with the system
g++ and OpenMP through core's `_cpujit._build` (cached on disk), loaded with ctypes. The forward
walks, per query row, the key blocks the BlockMask keeps (partly kept blocks masked, full ones
not) with an online softmax: no (L, S) matrix is ever made. The backward recomputes the scores
row by row (dq by row, dk and dv accumulated per (batch, head): one thread each).

Run by ember-compiler's flex_attention higher-order op (the node ember.compile's graphs hold,
which ember._inductor calls as an extern) and by `flex_attention_cpu` (tests); eager CPU calls
run the reference, as PyTorch's eager CPU call does.

>>> import ember
>>> q = ember.randn(1, 1, 4, 8)
>>> out = flex_attention_cpu(q, q, q, None, None, 0.5, False)
>>> out is NotImplemented or tuple(out.shape) == (1, 1, 4, 8)
True
"""
from __future__ import annotations

import ctypes

import ember
from ember import _dtype as D

from . import _fused
from . import _modexpr as mx

__all__ = ["flex_attention_cpu", "CpuPlan", "calls"]

calls = {"forward": 0, "backward": 0, "sparse": 0}
_libs: dict = {}   # (score, dscore, mask) -> {dtype: (fwd, bwd)} or None (no compiler)

_KERNEL = r"""
#include <vector>
#include <algorithm>
#include <type_traits>
template <class A, class B> static inline auto emflex_mod(A a, B b) {  // Python's sign
  if constexpr (std::is_integral<A>::value && std::is_integral<B>::value) {
    auto r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  } else {
    auto r = std::fmod(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }
}
template <class A, class B> static inline auto emflex_fdiv(A a, B b) {
  if constexpr (std::is_integral<A>::value && std::is_integral<B>::value) {
    return (a - emflex_mod(a, b)) / b;
  } else {
    return std::floor(a / b);
  }
}
typedef const void* const* Bufs;   // the captured tensors the mods read
template <class T> static inline T f_score(T qk, int64_t b, int64_t h, int64_t qi, int64_t ki,
                                           Bufs bufs) {
  return (T)(@SCORE@);
}
template <class T> static inline T f_dscore(T qk, int64_t b, int64_t h, int64_t qi, int64_t ki,
                                            Bufs bufs) {
  return (T)(@DSCORE@);
}
template <class T> static inline bool f_mask(int64_t b, int64_t h, int64_t qi, int64_t ki,
                                             Bufs bufs) {
  return (bool)(@MASK@);
}

// sz: B, H, G (query heads per kv head), L, S, E, EV, KB (kv batch stride 1 or 0),
//     sparse, QBS, KVBS, full, SB, SH, NC (block lists: batch/head strides, columns)
struct Walk {
  const int64_t* sz; const int32_t *kvn, *kvi, *fkvn, *fkvi;
  // calls f(start, end, masked) for the key ranges row i of (b, h) attends to
  template <class F> void operator()(int64_t b, int64_t h, int64_t i, F f) const {
    const int64_t S = sz[4], KVBS = sz[10];
    if (!sz[8]) { for (int64_t s = 0; s < S; s += 64) f(s, std::min(S, s + 64), true); return; }
    const int64_t row = b * sz[12] + h * sz[13] + i / sz[9], NC = sz[14];
    for (int32_t j = 0; j < kvn[row]; ++j) {
      int64_t s = (int64_t)kvi[row * NC + j] * KVBS; f(s, std::min(S, s + KVBS), true);
    }
    if (sz[11]) for (int32_t j = 0; j < fkvn[row]; ++j) {
      int64_t s = (int64_t)fkvi[row * NC + j] * KVBS; f(s, std::min(S, s + KVBS), false);
    }
  }
};

template <class T> static inline T dot(const T* a, const T* b, int64_t n) {
  T s = 0; for (int64_t e = 0; e < n; ++e) s += a[e] * b[e]; return s;
}

template <class T>
static void fwd(const T* q, const T* k, const T* v, T* out, T* lse, const Walk& walk,
                Bufs bufs, double scale_, int nt) {
  const int64_t* sz = walk.sz;
  const int64_t B = sz[0], H = sz[1], G = sz[2], L = sz[3], S = sz[4], E = sz[5], EV = sz[6];
  const T scale = (T)scale_;
  #pragma omp parallel num_threads(nt)
  {
    std::vector<T> acc(EV), sc;
    #pragma omp for schedule(static)
    for (int64_t r = 0; r < B * H * L; ++r) {
      const int64_t bh = r / L, i = r % L, b = bh / H, h = bh % H;
      const int64_t kvh = b * sz[7] * (H / G) + h / G;
      const T* qr = q + r * E; const T* K = k + kvh * S * E; const T* V = v + kvh * S * EV;
      T m = -INFINITY, l = 0;
      std::fill(acc.begin(), acc.end(), (T)0);
      walk(b, h, i, [&](int64_t s0, int64_t s1, bool masked) {
        sc.resize(s1 - s0);
        T bmax = -INFINITY;
        for (int64_t j = s0; j < s1; ++j) {
          T s = f_score<T>(dot(qr, K + j * E, E) * scale, b, h, i, j, bufs);
          if (masked && !f_mask<T>(b, h, i, j, bufs)) s = -INFINITY;
          sc[j - s0] = s; bmax = std::max(bmax, s);
        }
        if (bmax == -INFINITY) return;
        const T mn = std::max(m, bmax), alpha = std::exp(m - mn);
        l *= alpha;
        for (int64_t e = 0; e < EV; ++e) acc[e] *= alpha;
        for (int64_t j = s0; j < s1; ++j) {
          if (sc[j - s0] == -INFINITY) continue;
          const T p = std::exp(sc[j - s0] - mn); l += p;
          const T* vr = V + j * EV;
          for (int64_t e = 0; e < EV; ++e) acc[e] += p * vr[e];
        }
        m = mn;
      });
      T* o = out + r * EV;
      for (int64_t e = 0; e < EV; ++e) o[e] = l > 0 ? acc[e] / l : (T)0;
      lse[r] = l > 0 ? m + std::log(l) : -INFINITY;
    }
  }
}

// dq (B, H, L, E), dk (B, H, S, E), dv (B, H, S, EV) zeroed by the caller; dl = delta
template <class T>
static void bwd(const T* q, const T* k, const T* v, const T* dout, const T* lse, const T* dl,
                T* dq, T* dk, T* dv, const Walk& walk, Bufs bufs, double scale_, int nt) {
  const int64_t* sz = walk.sz;
  const int64_t B = sz[0], H = sz[1], G = sz[2], L = sz[3], S = sz[4], E = sz[5], EV = sz[6];
  const T scale = (T)scale_;
  #pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const int64_t b = bh / H, h = bh % H, kvh = b * sz[7] * (H / G) + h / G;
    const T* K = k + kvh * S * E; const T* V = v + kvh * S * EV;
    T* DK = dk + bh * S * E; T* DV = dv + bh * S * EV;
    for (int64_t i = 0; i < L; ++i) {
      const int64_t r = bh * L + i;
      if (lse[r] == -INFINITY) continue;
      const T* qr = q + r * E; const T* dor = dout + r * EV; T* dqr = dq + r * E;
      walk(b, h, i, [&](int64_t s0, int64_t s1, bool masked) {
        for (int64_t j = s0; j < s1; ++j) {
          if (masked && !f_mask<T>(b, h, i, j, bufs)) continue;
          const T raw = dot(qr, K + j * E, E) * scale;
          const T p = std::exp(f_score<T>(raw, b, h, i, j, bufs) - lse[r]);
          if (p == 0) continue;
          const T ds = p * (dot(dor, V + j * EV, EV) - dl[r]) * f_dscore<T>(raw, b, h, i, j, bufs)
                       * scale;
          const T* kr = K + j * E; T* dkr = DK + j * E; T* dvr = DV + j * EV;
          for (int64_t e = 0; e < E; ++e) { dqr[e] += ds * kr[e]; dkr[e] += ds * qr[e]; }
          for (int64_t e = 0; e < EV; ++e) dvr[e] += p * dor[e];
        }
      });
    }
  }
}

#define EMFLEX_API(T, SFX)                                                                    \
extern "C" void emflex_fwd_##SFX(const T* q, const T* k, const T* v, T* out, T* lse,          \
    const int32_t* a, const int32_t* b, const int32_t* c, const int32_t* d,                   \
    const int64_t* sz, Bufs bufs, double scale, int nt) {                                     \
  fwd<T>(q, k, v, out, lse, Walk{sz, a, b, c, d}, bufs, scale, nt); }                         \
extern "C" void emflex_bwd_##SFX(const T* q, const T* k, const T* v, const T* dout,           \
    const T* lse, const T* dl, T* dq, T* dk, T* dv, const int32_t* a, const int32_t* b,       \
    const int32_t* c, const int32_t* d, const int64_t* sz, Bufs bufs, double scale, int nt) { \
  bwd<T>(q, k, v, dout, lse, dl, dq, dk, dv, Walk{sz, a, b, c, d}, bufs, scale, nt); }
EMFLEX_API(float, f32)
EMFLEX_API(double, f64)
"""


def _library(srcs):
    """{float32: (fwd, bwd), float64: (...)} for the traced mods, or None without a compiler."""
    if srcs in _libs:
        return _libs[srcs]
    from ember._ops import _cpujit
    fns = None
    if _cpujit.available():
        src = _KERNEL.replace("@SCORE@", srcs[0]).replace("@DSCORE@", srcs[1]) \
            .replace("@MASK@", srcs[2])
        lib = _cpujit._build([src])
        if lib is not None:
            p, i, d = ctypes.c_void_p, ctypes.c_int, ctypes.c_double
            fns = {}
            for dt, sfx in ((D.float32, "f32"), (D.float64, "f64")):
                f, b = getattr(lib, f"emflex_fwd_{sfx}"), getattr(lib, f"emflex_bwd_{sfx}")
                f.argtypes, f.restype = [p] * 11 + [d, i], None
                b.argtypes, b.restype = [p] * 15 + [d, i], None
                fns[dt] = (f, b)
    _libs[srcs] = fns
    return fns


def trace(score_mod, mask_mod):
    """((score, d score, mask) as C++ expressions, captured tensors they read); raises
    _modexpr.Unsupported (also for a captured tensor not on the CPU)."""
    s, ds, m, bufs = mx.trace(score_mod, mask_mod)
    if any(b.device.type != "cpu" for b in bufs):
        raise mx.Unsupported("a captured tensor on another device")
    return (mx.to_cpp(s), mx.to_cpp(ds), mx.to_cpp(m)), bufs


def flex_attention_cpu(query, key, value, score_mod, block_mask, scale, return_lse):
    """flex attention on CPU tensors through the fused C++ kernels (an autograd node over the
    fused backward where gradients are wanted), or NotImplemented (a mod the tracer cannot
    express, no C++ compiler, an integer dtype)."""
    if query.dtype not in (D.float32, D.float64, D.float16, D.bfloat16):
        return NotImplemented
    try:
        srcs, bufs = trace(score_mod, None if block_mask is None else block_mask.mask_mod)
    except mx.Unsupported:
        return NotImplemented
    fns = _library(srcs)
    if fns is None:
        return NotImplemented
    return _fused.run(CpuPlan(fns, block_mask, query, key, value, scale, bufs), query, key,
                      value, return_lse)


def _ptr(t):
    return t.detach().numpy().ctypes.data


class CpuPlan:
    """One call's sizes and block lists: `forward` and `backward` (core's `_fused`)."""

    def __init__(self, fns, block_mask, query, key, value, scale, bufs=()):
        B, H, L, E = query.shape
        self.work = D.float64 if query.dtype is D.float64 else D.float32
        self.fwd, self.bwd = fns[self.work]
        self.scale = float(scale)
        S, Ev = key.size(2), value.size(3)
        lists, walk = [None] * 4, [0, 1, 1, 0, 0, 0, 1]
        n = None if block_mask is None else block_mask.kv_num_blocks
        if n is not None and n.ndim == 3 and n.shape[0] in (1, B) and n.shape[1] in (1, H):
            qbs, kvbs = block_mask.BLOCK_SIZE
            i32 = [None if t is None else t.to("cpu").contiguous().to(ember.int32) for t in (
                n, block_mask.kv_indices, block_mask.full_kv_num_blocks,
                block_mask.full_kv_indices)]
            full = i32[2] is not None
            lists = [i32[0], i32[1], i32[2] if full else i32[0], i32[3] if full else i32[1]]
            bb, hh, rows = n.shape
            walk = [1, qbs, kvbs, int(full), hh * rows if bb > 1 else 0,
                    rows if hh > 1 else 0, lists[1].shape[-1]]
        self.lists = lists
        self.sz = (ctypes.c_int64 * 15)(B, H, H // key.size(1), L, S, E, Ev,
                                        1 if key.size(0) == B else 0, *walk)
        self.sparse = bool(walk[0])
        self.bufs = list(bufs)   # (kept alive: the kernels read them)
        self.buf_ptrs = (ctypes.c_void_p * max(1, len(bufs)))(*[_ptr(b) for b in bufs])

    def _args(self):
        return [None if t is None else _ptr(t) for t in self.lists] + [
            self.sz, self.buf_ptrs, self.scale, _threads()]

    def forward(self, query, key, value):
        B, H, L, _ = query.shape
        w = self.work
        q, k, v = (t.detach().to(w).contiguous() for t in (query, key, value))
        out = ember.empty(B, H, L, value.size(3), dtype=w)
        lse = ember.empty(B, H, L, dtype=w)
        self.fwd(_ptr(q), _ptr(k), _ptr(v), _ptr(out), _ptr(lse), *self._args())
        calls["forward"] += 1
        calls["sparse"] += self.sparse
        return out.to(query.dtype), lse

    def backward(self, query, key, value, out, lse, dout, dlse):
        B, H, L, E = query.shape
        S, Ev, w = key.size(2), value.size(3), self.work
        q, k, v = (t.detach().to(w).contiguous() for t in (query, key, value))
        do = ember.zeros_like(out, dtype=w) if dout is None else dout.to(w).contiguous()
        dl = _fused.delta(out, lse, do, dlse).to(w).contiguous()
        lse = lse.to(w).contiguous()
        dq = ember.zeros(B, H, L, E, dtype=w)
        dk = ember.zeros(B, H, S, E, dtype=w)
        dv = ember.zeros(B, H, S, Ev, dtype=w)
        self.bwd(_ptr(q), _ptr(k), _ptr(v), _ptr(do), _ptr(lse), _ptr(dl), _ptr(dq), _ptr(dk),
                 _ptr(dv), *self._args())
        calls["backward"] += 1
        return (dq.to(query.dtype), _fused.reduce_kv(dk, key), _fused.reduce_kv(dv, value))


def _threads() -> int:
    from ember import _flags
    from ember._ops import _cpujit
    return max(1, _cpujit._threads_after_fork or _flags._threads or _cpujit._NCPU)
