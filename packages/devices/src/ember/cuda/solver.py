"""Dense factorizations through cuSOLVER (nvmath-python's low-level `cusolverDn` bindings: raw
device pointers, no cupy), and triangular solves through cuBLAS' trsm.

Every routine takes contiguous batched buffers of column-major matrices: a row-major (nb, r, c)
buffer is nb column-major (c, r) matrices (the transposes), which is how
`kernels.linalg_factor` sets up its problems. Batches loop over the matrices, one cuSOLVER
call each on the current stream (the batched cuSOLVER routines cover only some of these
factorizations and small sizes). `info` is an int32 device buffer (nb,): reading it is the
caller's choice (one sync).

On the fake device (EMBER_CUDA_FAKE=1: device memory is host memory) each routine has a numpy
stand-in with LAPACK's semantics on the same memory (as `blas._fake_gemm` for cuBLAS), so the
glue in `kernels.linalg_factor` runs in CI.
"""
from __future__ import annotations

import numpy as np

from ember._ops.registry import dtypes as D

from .runtime import driver as rt
from .runtime.streams import current_stream_handle

LOWER, UPPER = 0, 1          # cublasFillMode_t
OP_N, OP_T = 0, 1            # cublasOperation_t
_PRE = {D.float32: "s", D.float64: "d"}
_handles: dict = {}
_new = None


def supported(dtype) -> bool:
    return dtype in _PRE


def _empty(shape, dtype, device):
    global _new
    if _new is None:
        from ember._ops.registry import get_backend
        _new = get_backend("cuda")._new
    return _new(shape, dtype, device)


def _lib(t, name):
    """(function, handle) for the dtype's routine, the handle bound to the current stream."""
    from nvmath.bindings import cusolverDn
    dev = t.device.index or 0
    rt.ensure_context(dev)
    h = _handles.get(dev)
    if h is None:
        h = _handles[dev] = cusolverDn.create()
    cusolverDn.set_stream(h, current_stream_handle(dev))
    return getattr(cusolverDn, _PRE[t.dtype] + name), h


def _p(t, i, per):
    """Address of matrix i of a contiguous batched buffer (per elements a matrix)."""
    return t.data_ptr() + i * per * t.dtype.itemsize


def _work(lwork, t):
    return _empty((max(int(lwork), 1),), t.dtype, t.device)


# ---- the routines ------------------------------------------------------------------------------
def potrf(a, uplo, info):
    """Cholesky of each (n, n) matrix of a (nb, n, n), in place (the `uplo` triangle)."""
    nb, n = a.shape[0], a.shape[-1]
    if rt.FAKE:
        return _fake(_fake_potrf, a, uplo, info)
    size, h = _lib(a, "potrf_buffer_size")
    lw = size(h, uplo, n, a.data_ptr(), n)
    work = _work(lw, a)
    f, h = _lib(a, "potrf")
    for i in range(nb):
        f(h, uplo, n, _p(a, i, n * n), n, work.data_ptr(), lw, _p(info, i, 1))


def getrf(a, ipiv, info):
    """LU with partial pivoting of each (n, n) matrix of a (nb, n, n), in place; ipiv (nb, n)
    int32 (1-based, LAPACK's)."""
    nb, n = a.shape[0], a.shape[-1]
    if rt.FAKE:
        return _fake(_fake_getrf, a, ipiv, info)
    size, h = _lib(a, "getrf_buffer_size")
    work = _work(size(h, n, n, a.data_ptr(), n), a)
    f, h = _lib(a, "getrf")
    for i in range(nb):
        f(h, n, n, _p(a, i, n * n), n, work.data_ptr(), _p(ipiv, i, n), _p(info, i, 1))


def getrs(a, ipiv, b, trans, info):
    """Solve op(A_i) X = B_i with getrf's factors; b (nb, k, n) holds the (n, k) right-hand
    sides, overwritten by X."""
    nb, n, k = a.shape[0], a.shape[-1], b.shape[-2]
    if rt.FAKE:
        return _fake(_fake_getrs, a, ipiv, b, trans, info)
    f, h = _lib(a, "getrs")
    for i in range(nb):
        f(h, trans, n, k, _p(a, i, n * n), n, _p(ipiv, i, n), _p(b, i, n * k), n,
          _p(info, i, 1))


def geqrf(a, m, n, tau, info):
    """Householder QR of the first n columns of each column-major (m, C) matrix of a
    (nb, C, m), in place (R above the diagonal, the reflectors below); tau (nb, min(m, n))."""
    nb, per = a.shape[0], a.shape[1] * a.shape[2]
    k = min(m, n)
    if rt.FAKE:
        return _fake(_fake_geqrf, a, m, n, tau, info)
    size, h = _lib(a, "geqrf_buffer_size")
    lw = size(h, m, n, a.data_ptr(), m)
    work = _work(lw, a)
    f, h = _lib(a, "geqrf")
    for i in range(nb):
        f(h, m, n, _p(a, i, per), m, _p(tau, i, k), work.data_ptr(), lw, _p(info, i, 1))


def orgqr(a, m, ncols, k, tau, info):
    """Q's first ncols columns from geqrf's reflectors, in place in a (nb, C, m), C >= ncols."""
    nb, per = a.shape[0], a.shape[1] * a.shape[2]
    if rt.FAKE:
        return _fake(_fake_orgqr, a, m, ncols, k, tau, info)
    size, h = _lib(a, "orgqr_buffer_size")
    lw = size(h, m, ncols, k, a.data_ptr(), m, tau.data_ptr())
    work = _work(lw, a)
    f, h = _lib(a, "orgqr")
    for i in range(nb):
        f(h, m, ncols, k, _p(a, i, per), m, _p(tau, i, k), work.data_ptr(), lw, _p(info, i, 1))


def syevd(a, uplo, w, vectors, info):
    """Symmetric eigendecomposition of each (n, n) matrix of a (nb, n, n) (its `uplo` triangle):
    eigenvalues ascending into w (nb, n), eigenvectors (columns) over a when `vectors`."""
    nb, n = a.shape[0], a.shape[-1]
    if rt.FAKE:
        return _fake(_fake_syevd, a, uplo, w, vectors, info)
    jobz = 1 if vectors else 0   # cusolverEigMode_t
    size, h = _lib(a, "syevd_buffer_size")
    lw = size(h, jobz, uplo, n, a.data_ptr(), n, w.data_ptr())
    work = _work(lw, a)
    f, h = _lib(a, "syevd")
    for i in range(nb):
        f(h, jobz, uplo, n, _p(a, i, n * n), n, _p(w, i, n), work.data_ptr(), lw,
          _p(info, i, 1))


def gesvd(a, s, u, vt, jobu, jobvt, info):
    """SVD of each column-major (p, q) matrix of a (nb, q, p), p >= q (cuSOLVER's gesvd needs
    it): s (nb, q); u (nb, ucols, p) for U (p, ucols) or None; vt (nb, q, q) for V^T or None.
    jobu/jobvt: "A", "S" or "N" (LAPACK's). a is overwritten."""
    nb, q, p = a.shape
    if rt.FAKE:
        return _fake(_fake_gesvd, a, s, u, vt, jobu, jobvt, info)
    size, h = _lib(a, "gesvd_buffer_size")
    lw = size(h, p, q)
    work = _work(lw, a)
    rwork = _work(q, s)
    f, h = _lib(a, "gesvd")
    up = u.shape[1] * p if u is not None else 0
    for i in range(nb):
        f(h, ord(jobu), ord(jobvt), p, q, _p(a, i, p * q), p, _p(s, i, q),
          _p(u, i, up) if u is not None else 0, p,
          _p(vt, i, q * q) if vt is not None else 0, max(q, 1),
          work.data_ptr(), lw, rwork.data_ptr(), _p(info, i, 1))


def trsm(a, a_bstride, b, right, uplo, unit):
    """In place b_i = op^-1 solves with the triangular (n, n) column-major matrices of a: b is
    (nb, r, c) row-major = column-major (c, r) matrices; right: X A = B (A is (r, r)), else
    A X = B (A is (c, c)). a_bstride: a's batch stride in elements (0 when broadcast)."""
    nb, r, c = b.shape
    if rt.FAKE:
        return _fake_trsm(a, a_bstride, b, right, uplo, unit)
    from . import blas as _blas
    cublas, h = _blas._handle(b.device.index or 0)
    rt.ensure_context(b.device.index or 0)
    cublas.set_stream(h, current_stream_handle(b.device.index or 0))
    f = getattr(cublas, _PRE[b.dtype] + "trsm")
    one = _blas._ONE_P[np.float64 if b.dtype is D.float64 else np.float32]
    n = r if right else c
    for i in range(nb):
        f(h, 1 if right else 0, uplo, OP_N, 1 if unit else 0, c, r, one,
          _p(a, i, a_bstride), max(n, 1), _p(b, i, r * c), max(c, 1))


# ---- the fake device's stand-ins (numpy on the same memory, LAPACK's conventions) --------------
def _fake(fn, *args):
    if rt.NOLAUNCH:
        return
    views = [rt.fake_view(x) if hasattr(x, "data_ptr") else x for x in args]
    fn(*views)


def _cm(v):
    """The column-major matrices of a row-major (nb, r, c) view: (nb, c, r), same memory."""
    return np.swapaxes(v, -1, -2)


def _sym(m, uplo):
    t = np.triu(m) if uplo == UPPER else np.tril(m)
    return t + np.swapaxes(t, -1, -2) - np.diag(np.diag(m))


def _fake_potrf(a, uplo, info):
    for i, m in enumerate(_cm(a)):
        s = _sym(m.astype(np.float64), uplo)
        info[i] = 0
        for k in range(1, m.shape[0] + 1):
            try:
                low = np.linalg.cholesky(s[:k, :k])
            except np.linalg.LinAlgError:
                info[i] = k
                break
        else:
            low = np.linalg.cholesky(s) if m.shape[0] else s
            if uplo == UPPER:
                iu = np.triu_indices(m.shape[0])
                m[iu] = low.T[iu]
            else:
                il = np.tril_indices(m.shape[0])
                m[il] = low[il]


def _fake_getrf(a, ipiv, info):
    for i, m in enumerate(_cm(a)):
        w = m.astype(np.float64)
        n = w.shape[0]
        info[i] = 0
        for k in range(n):
            p = k + int(np.argmax(np.abs(w[k:, k])))
            ipiv[i, k] = p + 1
            if w[p, k] == 0:
                if not info[i]:
                    info[i] = k + 1
                continue
            w[[k, p]] = w[[p, k]]
            w[k + 1:, k] /= w[k, k]
            w[k + 1:, k + 1:] -= np.outer(w[k + 1:, k], w[k, k + 1:])
        m[...] = w


def _unlu(lu, piv):
    n = lu.shape[0]
    a = (np.tril(lu, -1) + np.eye(n)) @ np.triu(lu)
    for k in reversed(range(n)):   # undo the row swaps, last first
        p = int(piv[k]) - 1
        a[[k, p]] = a[[p, k]]
    return a


def _fake_getrs(a, ipiv, b, trans, info):
    for i, (lu, x) in enumerate(zip(_cm(a), _cm(b))):
        m = _unlu(lu.astype(np.float64), ipiv[i])
        with np.errstate(all="ignore"):
            try:
                x[...] = np.linalg.solve(m.T if trans == OP_T else m, x.astype(np.float64))
            except np.linalg.LinAlgError:
                x[...] = np.nan
        info[i] = 0


def _fake_geqrf(a, m, n, tau, info):
    for i, full in enumerate(_cm(a)):
        w = full[:, :n].astype(np.float64)
        for j in range(min(m, n)):
            alpha, x = w[j, j], w[j + 1:, j]
            xn = np.linalg.norm(x)
            if xn == 0:
                tau[i, j] = 0
                continue
            beta = -np.copysign(np.hypot(alpha, xn), alpha)
            tau[i, j] = t = (beta - alpha) / beta
            v = np.concatenate([[1.0], x / (alpha - beta)])
            w[j + 1:, j] = v[1:]
            w[j, j] = beta
            w[j:, j + 1:] -= t * np.outer(v, v @ w[j:, j + 1:])
        full[:, :n] = w
        info[i] = 0


def _fake_orgqr(a, m, ncols, k, tau, info):
    for i, full in enumerate(_cm(a)):
        q = np.eye(m, ncols)
        for j in reversed(range(k)):
            v = np.concatenate([[1.0], full[j + 1:, j].astype(np.float64)])
            q[j:, :] -= tau[i, j] * np.outer(v, v @ q[j:, :])
        full[:, :ncols] = q
        info[i] = 0


def _fake_syevd(a, uplo, w, vectors, info):
    for i, m in enumerate(_cm(a)):
        lam, v = np.linalg.eigh(m, UPLO="U" if uplo == UPPER else "L")
        w[i] = lam
        if vectors:
            m[...] = v
        info[i] = 0


def _fake_gesvd(a, s, u, vt, jobu, jobvt, info):
    for i, m in enumerate(_cm(a)):
        uu, ss, vv = np.linalg.svd(m, full_matrices=jobu == "A")
        s[i] = ss
        if u is not None and jobu != "N":
            _cm(u)[i][...] = uu
        if vt is not None and jobvt != "N":
            _cm(vt)[i][...] = vv
        info[i] = 0


def _fake_trsm(a, a_bstride, b, right, uplo, unit):
    if rt.NOLAUNCH:
        return
    nb, r, c = b.shape
    n = r if right else c
    av = np.lib.stride_tricks.as_strided(
        rt.fake_view(a).reshape(-1), (nb, n, n),
        (a_bstride * a.dtype.itemsize, a.dtype.itemsize, n * a.dtype.itemsize))  # column-major
    for x, t in zip(_cm(rt.fake_view(b)), av):
        t = np.triu(t) if uplo == UPPER else np.tril(t)
        t = t.astype(np.float64)
        if unit:
            np.fill_diagonal(t, 1)
        with np.errstate(all="ignore"):
            try:
                x[...] = (np.linalg.solve(t.T, x.T).T if right else np.linalg.solve(t, x))
            except np.linalg.LinAlgError:
                x[...] = np.nan
