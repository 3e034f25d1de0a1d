"""GPU kernels for linear algebra: factorizations through cuSOLVER, triangular solves through
cuBLAS (`..solver`: the glue, and the fake device's numpy stand-ins).

`cuda_kernel` fills the op entries' cuda slots with kernels `f(backend, op, *args)`
(NotImplemented declines a call). HOST lists the linear-algebra ops that still run their CPU
kernel on host copies, with the reason.

cuSOLVER is column-major: a contiguous row-major copy of A is, to cuSOLVER, A^T. Each kernel
either factors A^T and solves the transposed problem (solve, inv, cholesky) or copies A^T
first (a strided copy: det, slogdet, qr, eigh, svd with m >= n), so one copy of the input
(which cuSOLVER overwrites anyway) is all the setup. Batches loop over their matrices (one
cuSOLVER call each: the batched routines cover few of these factorizations).
float32/float64 only: complex inputs, and empty matrices, run on host copies.

Errors: the op's meta raises the CPU's input errors. A failed factorization (singular, not
positive-definite, no convergence) is found by reading cuSOLVER's info once per call (one sync,
as PyTorch's checks do); the call then runs the CPU kernel on host copies, which raises the CPU's
error with its exact message (the failure path only).
"""
from __future__ import annotations

from ember._ops.registry import Tensor
from ember._ops.registry import dtypes as D

from .. import solver as S
from .base import cuda_kernel


def _as(t, shape, stride, offset=None):
    """A view of t's memory (a kernel's operand, no view bookkeeping)."""
    return Tensor._make(t._storage, tuple(shape), tuple(stride),
                        t._offset if offset is None else offset, t.dtype, t.device)


def _cstride(shape):
    st, acc = [], 1
    for n in reversed(shape):
        st.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(st))


def _mT(t):
    sh, st = t._shape, t._stride
    return _as(t, sh[:-2] + (sh[-1], sh[-2]), st[:-2] + (st[-1], st[-2]))


def _expand(t, batch):
    """t (..., r, c) broadcast to batch + (r, c) (zero strides, no copy)."""
    sh, st = t._shape, t._stride
    pad = len(batch) - (len(sh) - 2)
    bst = (0,) * pad + tuple(0 if n == 1 else s for n, s in zip(sh[:-2], st[:-2]))
    return _as(t, tuple(batch) + sh[-2:], bst + st[-2:])


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _copy(be, t, batch=None, transpose=False):
    """A fresh contiguous copy of t (broadcast to batch, transposed): a cuSOLVER buffer."""
    if transpose:
        t = _mT(t)
    if batch is not None:
        t = _expand(t, batch)
    return be._copy_new(t, t.dtype)


def _flat(t):
    """A contiguous (..., r, c) tensor as (nb, r, c)."""
    r, c = t._shape[-2], t._shape[-1]
    return _as(t, (t.numel() // max(r * c, 1), r, c), (r * c, c, 1))


def _int32(be, shape, dev):
    return be._new(tuple(shape), D.int32, dev)


def _failed(info) -> bool:
    """Whether any matrix failed (reads cuSOLVER's info: one sync)."""
    return bool((info != 0).any().item()) if info.numel() else False


def _ok(a, *others):
    """float32/float64, same dtype, on this device, non-empty: the cuSOLVER path."""
    return (S.supported(a.dtype) and a.numel() > 0 and
            all(isinstance(o, Tensor) and o.dtype is a.dtype and o.device == a.device
                for o in others))


# ---- cholesky -----------------------------------------------------------------------------------
@cuda_kernel("linalg_cholesky")
def _cholesky(be, op, a, upper=False):
    op.meta(a, upper)
    if not _ok(a):
        return NotImplemented
    c = _copy(be, a)                       # to cuSOLVER: A^T, whose upper triangle is A's lower
    info = _int32(be, (c.numel() // (a.shape[-1] ** 2),), a.device)
    S.potrf(_flat(c), S.UPPER, info)       # A^T = U^T U: the row-major view holds L = U^T
    if _failed(info):
        return NotImplemented              # the CPU kernel raises its LinAlgError
    return _mT(c).triu() if upper else c.tril()


# ---- LU: solve, inv, det, slogdet ---------------------------------------------------------------
def _lu(be, a, batch, transpose=False):
    """getrf of A^T (of A when transpose) for every matrix of a broadcast to batch:
    (LU buffer, ipiv, info)."""
    n = a.shape[-1]
    c = _copy(be, a, batch, transpose)
    nb = c.numel() // (n * n)
    ipiv, info = _int32(be, (nb, n), a.device), _int32(be, (nb,), a.device)
    S.getrf(_flat(c), ipiv, info)
    return c, ipiv, info


@cuda_kernel("linalg_solve")
def _solve(be, op, a, b, left=True):
    from ember._ops.registry import solve_vector_case
    if not isinstance(b, Tensor):
        return NotImplemented
    shape = tuple(op.meta(a, b, left).shape)
    if not _ok(a, b) or _prod(shape) == 0:
        return NotImplemented
    vec = solve_vector_case(a, b)
    bm = _as(b, b._shape + (1,), b._stride + (1,)) if vec else b
    batch = shape[:-1] if vec else shape[:-2]
    lu, ipiv, info = _lu(be, a, batch)
    # left: A X = B is (A^T)^T X = B: B's columns, column-major, are the rows of B^T;
    # right: X A = B is A^T X^T = B^T, and row-major B is column-major B^T
    x = _copy(be, bm, batch, transpose=left)
    S.getrs(_flat(lu), ipiv, _flat(x), S.OP_T if left else S.OP_N,
            _int32(be, info.shape, a.device))   # getrs' own info: getrf's says singular
    if _failed(info):
        return NotImplemented
    if left:
        x = be._copy_new(_mT(x), x.dtype)
    return x.reshape(shape) if vec else x


@cuda_kernel("linalg_inv")
def _inv(be, op, a):
    op.meta(a)
    if not _ok(a):
        return NotImplemented
    import ember
    n = a.shape[-1]
    batch = tuple(a.shape[:-2])
    lu, ipiv, info = _lu(be, a, batch)
    # A^T Y = I gives Y = A^-T, whose row-major view is A^-1
    x = _copy(be, ember.eye(n, dtype=a.dtype, device=a.device), batch)
    S.getrs(_flat(lu), ipiv, _flat(x), S.OP_N, _int32(be, info.shape, a.device))
    if _failed(info):
        return NotImplemented
    return x


def _lu_parts(be, a):
    """(diagonal of U, permutation parity as 0/1 int64) of A's LU. A itself is factored (a
    strided copy), as LAPACK and PyTorch do: det(A^T) = det(A), but A^T's elimination rounds
    differently, and a singular A whose LU is exact (a zero pivot, sign 0) should stay so."""
    import ember
    n = a.shape[-1]
    lu, ipiv, _ = _lu(be, a, tuple(a.shape[:-2]), transpose=True)
    diag = lu.diagonal(0, -2, -1)
    steps = ember.arange(1, n + 1, dtype=D.int32, device=a.device)
    swaps = (ipiv != steps).sum(-1).reshape(tuple(a.shape[:-2]))
    return diag, swaps % 2


@cuda_kernel("linalg_det")
def _det(be, op, a):
    op.meta(a)
    if not _ok(a):
        return NotImplemented
    diag, odd = _lu_parts(be, a)           # no sync: a singular A has a zero on U's diagonal
    return diag.prod(-1) * (1 - 2 * odd).to(a.dtype)


@cuda_kernel("linalg_slogdet")
def _slogdet(be, op, a):
    op.meta(a)
    if not _ok(a):
        return NotImplemented
    diag, odd = _lu_parts(be, a)
    sign = diag.sign().prod(-1) * (1 - 2 * odd).to(a.dtype)
    return sign, diag.abs().log().sum(-1)


# ---- qr -----------------------------------------------------------------------------------------
@cuda_kernel("linalg_qr")
def _qr(be, op, a, mode="reduced"):
    op.meta(a, mode)
    if not _ok(a):
        return NotImplemented
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    batch = tuple(a.shape[:-2])
    ncols = 0 if mode == "r" else (m if mode == "complete" else k)
    cols = max(n, ncols)
    buf = be._new(batch + (cols, m), a.dtype, a.device)   # column-major (m, cols) matrices
    be._copy_into(_as(buf, batch + (n, m), _cstride(batch + (cols, m))), _mT(a))
    nb = buf.numel() // (cols * m)
    flat = _as(buf, (nb, cols, m), (cols * m, m, 1))
    tau, info = be._new((nb, max(k, 1)), a.dtype, a.device), _int32(be, (nb,), a.device)
    S.geqrf(flat, m, n, tau, info)
    bst = _cstride(batch + (cols, m))[:-2]
    kr = m if mode == "complete" else k                   # R: (m, n) when complete
    r = _as(buf, batch + (kr, n), bst + (1, m)).triu()    # R[i, j] at column j, row i
    if mode == "r":
        return be._new((0,), a.dtype, a.device), r
    S.orgqr(flat, m, ncols, k, tau, info)
    q = be._copy_new(_as(buf, batch + (m, ncols), bst + (1, m)), a.dtype)
    return q, r


# ---- eigh, eigvalsh -----------------------------------------------------------------------------
def _syevd(be, a, UPLO, vectors):
    """(eigenvalues, eigenvectors or None), or None when cuSOLVER reports a failure."""
    n = a.shape[-1]
    # column-major A itself and LAPACK's uplo (as PyTorch and numpy call syevd: A^T with the
    # other triangle is the same problem, but its eigenvectors can come out with other signs)
    c = _copy(be, a, transpose=True)
    nb = c.numel() // (n * n)
    w = be._new(tuple(a.shape[:-1]), a.dtype, a.device)
    info = _int32(be, (nb,), a.device)
    S.syevd(_flat(c), S.LOWER if UPLO.upper() == "L" else S.UPPER,
            _as(w, (nb, n), (n, 1)), vectors, info)
    if _failed(info):
        return None
    return w, (be._copy_new(_mT(c), a.dtype) if vectors else None)  # vectors: the columns


def _eigh_any(vectors):
    def f(be, op, a, UPLO="L"):
        op.meta(a, UPLO)
        if not _ok(a):
            return NotImplemented
        r = _syevd(be, a, UPLO, vectors)
        if r is None:
            return NotImplemented
        return r if vectors else r[0]
    return f


# ---- svd, svdvals -------------------------------------------------------------------------------
def _svd_run(be, a, full, uv):
    """gesvd on a column-major (p, q), p >= q: A itself when m >= n, else A^T (rows of a).
    Returns (s, U, Vh) (U, Vh None when not uv)."""
    m, n = a.shape[-2], a.shape[-1]
    tall = m >= n
    p, q = max(m, n), min(m, n)
    batch = tuple(a.shape[:-2])
    c = _copy(be, a, transpose=tall)       # (..., q, p) row-major = column-major (p, q)
    nb = c.numel() // (p * q)
    s = be._new(batch + (q,), a.dtype, a.device)
    info = _int32(be, (nb,), a.device)
    ucols = p if full else q
    u = be._new(batch + (ucols, p), a.dtype, a.device) if uv else None
    vt = be._new(batch + (q, q), a.dtype, a.device) if uv else None
    job = ("A" if full else "S") if uv else "N"
    S.gesvd(_flat(c), _as(s, (nb, q), (q, 1)), None if u is None else _flat(u),
            None if vt is None else _flat(vt), job, "A" if uv else "N", info)
    if _failed(info):
        return None
    if not uv:
        return s, None, None
    # column-major results: u holds U_c^T, vt holds VT_c^T (row-major views)
    if tall:                    # A = U_c S VT_c
        return s, be._copy_new(_mT(u), a.dtype), be._copy_new(_mT(vt), a.dtype)
    return s, vt, u             # A^T = U_c S VT_c, so A = VT_c^T S U_c^T


@cuda_kernel("linalg_svd")
def _svd(be, op, a, full_matrices=True, driver=None):
    op.meta(a, full_matrices, driver)
    if not _ok(a):
        return NotImplemented
    r = _svd_run(be, a, full_matrices, True)
    return NotImplemented if r is None else (r[1], r[0], r[2])


@cuda_kernel("linalg_svdvals")
def _svdvals(be, op, a, driver=None):
    op.meta(a, driver)
    if not _ok(a):
        return NotImplemented
    r = _svd_run(be, a, False, False)
    return NotImplemented if r is None else r[0]


# ---- solve_triangular (cuBLAS trsm) -------------------------------------------------------------
@cuda_kernel("linalg_solve_triangular")
def _solve_triangular(be, op, a, b, upper, left=True, unitriangular=False):
    shape = tuple(op.meta(a, b, upper, left, unitriangular).shape)   # PyTorch's errors
    if not (isinstance(b, Tensor) and _ok(a, b)):
        return NotImplemented   # complex: host copies
    n = a.shape[-1]
    batch = shape[:-2]
    x = _copy(be, b, batch)     # row-major (r, c) is column-major B^T
    if x.numel() == 0:
        return x
    abatch = tuple(a.shape[:-2])
    if _prod(abatch) == 1:
        ac, ast = be._copy_new(a, a.dtype) if not a.is_contiguous() else a, 0
    elif tuple(abatch) == tuple(batch):
        ac, ast = (a if a.is_contiguous() else be._copy_new(a, a.dtype)), n * n
    else:
        ac, ast = _copy(be, a, batch), n * n
    # A X = B is X^T A^T = B^T (A^T from the right), X A = B is A^T X^T = B^T (from the left);
    # a row-major A is column-major A^T, whose triangle is the other one
    S.trsm(ac, ast, _flat(x), left, S.LOWER if upper else S.UPPER, unitriangular)
    return x


# ---- matrix_rank --------------------------------------------------------------------------------
@cuda_kernel("linalg_matrix_rank")
def _matrix_rank(be, op, a, tol=None, hermitian=False, atol=None, rtol=None):
    from ember._ops.registry import rank_cutoff
    if a.ndim < 2 or not _ok(a):
        return NotImplemented
    if tol is not None:
        atol, rtol = tol, 0.0
    m, n = a.shape[-2], a.shape[-1]
    at, rt_ = rank_cutoff(None, atol, rtol, m, n, a.dtype)
    if hermitian:
        if m != n:
            return NotImplemented
        r = _syevd(be, a, "L", False)
        if r is None:
            return NotImplemented
        s = r[0].abs()
    else:
        r = _svd_run(be, a, False, False)
        if r is None:
            return NotImplemented
        s = r[0]
    cut = s.amax(-1, keepdim=True) * rt_
    if at:
        cut = cut.clamp(min=at)
    return (s > cut).sum(-1).to(D.int64)


cuda_kernel("linalg_eigh")(_eigh_any(True))
cuda_kernel("linalg_eigvalsh")(_eigh_any(False))

HOST: dict[str, str] = {
    "linalg_eig": "no cuSOLVER path yet (cusolverDnXgeev is in the bindings: complex outputs "
                  "to wire up)",
    "linalg_eigvals": "no cuSOLVER path yet (cusolverDnXgeev, as linalg_eig)",
    "linalg_lstsq": "no cuSOLVER path yet (gelsy/gelsd's rank, residuals and singular values "
                    "per driver)",
}
