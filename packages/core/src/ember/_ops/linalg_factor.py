"""Linear algebra, factorizations: inv, det, solve, cholesky, qr, svd, eigh, pinv, rank, lstsq.

Kernels are numpy's LAPACK wrappers (batched); failures raise `ember.linalg.LinAlgError` with
PyTorch's message. The vjps are the classic matrix-calculus rules, written in ember ops.
Ops named `linalg_*` are bound in `ember.linalg` without the prefix (see `ember/linalg`).
"""
from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._dispatch import TensorMeta, torch_name
from .._size import broadcast_shapes
from ._registry import OPS, complex_vjp, defop
from .linalg import LinAlgError, _dt, matmul, mH, square_check

_LOWP = (D.float16, D.bfloat16)


def _check(name, a, kernel=None, square=True, arg="A", int_kernel=False):
    """PyTorch's input checks: rank >= 2, float/complex, not low precision, square. `kernel`:
    the CPU kernel name PyTorch's NotImplementedError names for low precision (and for
    integers when `int_kernel`)."""
    dt = _dt(a)
    if len(a.shape) < 2:
        raise RuntimeError(f"{name}: The input tensor {arg} must have at least 2 dimensions.")
    if kernel and (dt in _LOWP or (int_kernel and not (dt.is_floating_point or dt.is_complex))):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{torch_name(dt)}'")
    if not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got "
                           f"{torch_name(dt)}")
    if dt in _LOWP:
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {torch_name(dt)}")
    if square:
        square_check(name, a, arg)


def _batches(a):
    """(index, matrix) over the batch of a (..., m, n) array."""
    flat = a.reshape((-1,) + a.shape[-2:])
    return enumerate(flat)


def _prefix(a, i):
    return f"(Batch element {i}): " if a.ndim > 2 else ""


def _zero_pivot(m) -> int:
    """1-based index of the first zero pivot of an LU with partial pivoting (as LAPACK's getrf
    reports it), or 0 if none. Only runs on the error path."""
    m = m.astype(np.complex128 if np.iscomplexobj(m) else np.float64, copy=True)
    n = m.shape[0]
    for k in range(n):
        p = k + int(np.argmax(np.abs(m[k:, k])))
        if m[p, k] == 0:
            return k + 1
        m[[k, p]] = m[[p, k]]
        m[k + 1:, k:] -= np.outer(m[k + 1:, k] / m[k, k], m[k, k:])
    return 0


def _singular_error(name, a, text):
    for i, m in _batches(a):
        k = _zero_pivot(m)
        if k:
            return LinAlgError(f"{name}: {_prefix(a, i)}" + text.format(k=k))
    return LinAlgError(f"{name}: " + text.format(k=1))


def _eye(x, n):
    import ember
    return ember.eye(n, dtype=x.dtype, device=x.device)


# ---- inverse and determinants --------------------------------------------------------------------
def _inv_kernel(a):
    _check("linalg.inv", a)
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise _singular_error("linalg.inv", a, "The diagonal element {k} is zero, the inversion "
                              "could not be completed because the input matrix is singular.") \
            from None


def _same_meta(name, kernel=None):
    def meta(a, *rest):
        _check(name, a, kernel)
        return TensorMeta(tuple(a.shape), a.dtype)
    return meta


@complex_vjp
def _inv_vjp(g, out, a):
    return (-matmul(mH(out), matmul(g, mH(out))),)


defop("linalg_inv(Tensor A) -> Tensor", function=False, method=False,
      kernels={"cpu": _inv_kernel}, meta=_same_meta("linalg.inv"), vjp=_inv_vjp)
defop("inverse(Tensor self) -> Tensor", decomp=lambda a: OPS["linalg_inv"](a))


def _det_kernel(a):
    _check("linalg.det", a, "lu_cpu")
    return np.asarray(np.linalg.det(a)).astype(a.dtype, copy=False)


def _det_meta(a):
    _check("linalg.det", a, "lu_cpu")
    return TensorMeta(tuple(a.shape[:-2]), a.dtype)


def _adjugate_t(a):
    """adj(A)^T, the gradient of det(A), from an SVD: also right for singular A."""
    import ember
    u, s, vh = OPS["linalg_svd"](a, False)
    n = s.shape[-1]
    eye = ember.eye(n, dtype=ember.bool, device=a.device)
    others = ember.where(eye, ember.ones((), dtype=s.dtype), s.unsqueeze(-2).expand(
        tuple(s.shape) + (n,))).prod(-1)                           # prod of s without s_i
    sign = (OPS["linalg_det"](u) * OPS["linalg_det"](vh)).detach()
    # adj(A) = det(U) det(Vh) * Vh^H diag(others) U^H; its transpose:
    return (sign.unsqueeze(-1).unsqueeze(-1) * matmul(u * others.unsqueeze(-2), vh)).conj() \
        if a.dtype.is_complex else sign.unsqueeze(-1).unsqueeze(-1) * matmul(
            u * others.unsqueeze(-2), vh)


@complex_vjp
def _det_vjp(g, det, a):
    gd = g.unsqueeze(-1).unsqueeze(-1)
    try:
        inv = OPS["linalg_inv"](a)
    except LinAlgError:
        return (gd * _adjugate_t(a),)
    return (gd * det.conj().unsqueeze(-1).unsqueeze(-1) * mH(inv) if a.dtype.is_complex
            else gd * det.unsqueeze(-1).unsqueeze(-1) * mH(inv),)


defop("linalg_det(Tensor A) -> Tensor", function=False, method=False,
      kernels={"cpu": _det_kernel}, meta=_det_meta, vjp=_det_vjp)
defop("det(Tensor self) -> Tensor", decomp=lambda a: OPS["linalg_det"](a))


def _slogdet_kernel(a):
    _check("linalg.slogdet", a)
    sign, lad = np.linalg.slogdet(a)
    return (np.asarray(sign).astype(a.dtype, copy=False),
            np.asarray(lad).astype(_dt(a).to_real().np, copy=False))


def _slogdet_meta(a):
    _check("linalg.slogdet", a)
    b = tuple(a.shape[:-2])
    return TensorMeta(b, a.dtype), TensorMeta(b, a.dtype.to_real())


@complex_vjp
def _slogdet_vjp(grads, out, a):
    g_sign, g_lad = grads
    inv_h = mH(OPS["linalg_inv"](a))
    if a.dtype.is_complex:  # the phase sign = det / |det| turns with A too
        g_lad = g_lad + 1j * (g_sign * out[0].conj()).imag
    return (g_lad.unsqueeze(-1).unsqueeze(-1) * inv_h,)  # sign is piecewise constant (real)


defop("linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet)", function=False,
      method=False, kernels={"cpu": _slogdet_kernel}, meta=_slogdet_meta, vjp=_slogdet_vjp)
defop("slogdet(Tensor self) -> (Tensor sign, Tensor logabsdet)",
      decomp=lambda a: OPS["linalg_slogdet"](a))


def _logdet(a):
    import ember
    sign, lad = OPS["linalg_slogdet"](a)
    if a.dtype.is_complex:
        return lad + sign.log()
    return ember.where(sign < 0, float("nan"), lad)


defop("logdet(Tensor self) -> Tensor", decomp=_logdet)


# ---- solve ---------------------------------------------------------------------------------------
def _vector_case(a, b) -> bool:
    return len(b.shape) == 1 or (len(b.shape) == len(a.shape) - 1 and
                                 tuple(b.shape) == tuple(a.shape[:-1]))


def _solve_shape(a, b, left):
    _check("linalg.solve", a, "lu_cpu")
    if _dt(a) != _dt(b):
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A "
                           f"of type {torch_name(_dt(a))} and B of type {torch_name(_dt(b))} "
                           f"instead")
    vec = _vector_case(a, b)
    bm = tuple(b.shape) + (1,) if vec else tuple(b.shape)
    n = a.shape[-1]
    ok = bm[-2] == n if left else bm[-1] == n
    if len(bm) < 2 or not ok:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation {eq} "
                           f"({a.shape[-2]}x{a.shape[-1]} and {bm[-2]}x{bm[-1]})")
    batch = broadcast_shapes(tuple(a.shape[:-2]), bm[:-2])
    return (tuple(batch) + bm[-2:-1]) if vec else tuple(batch) + bm[-2:]


def _solve_kernel(a, b, left):
    _solve_shape(a, b, left)
    vec = _vector_case(a, b)
    bm = b[..., None] if vec else b
    try:
        if left:
            x = np.linalg.solve(a, bm)
        else:  # X A = B  <=>  A^T X^T = B^T
            x = np.swapaxes(np.linalg.solve(np.swapaxes(a, -1, -2), np.swapaxes(bm, -1, -2)),
                            -1, -2)
    except np.linalg.LinAlgError:
        for i, m in _batches(a):
            if _zero_pivot(m):
                raise LinAlgError(f"torch.linalg.solve: {_prefix(a, i)}The solver failed "
                                  f"because the input matrix is singular.") from None
        raise LinAlgError("torch.linalg.solve: The solver failed because the input matrix is "
                          "singular.") from None
    return x[..., 0] if vec else x


@complex_vjp
def _solve_vjp(g, x, a, b, left):
    vec = _vector_case(a, b)
    g2, x2 = (g.unsqueeze(-1), x.unsqueeze(-1)) if vec else (g, x)
    gb = OPS["linalg_solve"](mH(a), g2, left=left)           # A^-H g  (or g A^-H)
    ga = -matmul(gb, mH(x2)) if left else -matmul(mH(x2), gb)
    return ga, (gb.squeeze(-1) if vec else gb)


defop("linalg_solve(Tensor A, Tensor B, *, bool left=True) -> Tensor", function=False,
      method=False, kernels={"cpu": _solve_kernel}, vjp=_solve_vjp,
      meta=lambda a, b, left: TensorMeta(_solve_shape(a, b, left), a.dtype))


def _tri(a, upper, unit):
    t = np.triu(a) if upper else np.tril(a)
    if unit:
        idx = np.arange(a.shape[-1])
        t[..., idx, idx] = 1
    return t


def _solve_triangular_checks(a, b, left):
    name = "linalg.solve_triangular"
    _check(name, a, "triangular_solve_cpu", int_kernel=True)
    if len(b.shape) < 2:
        raise RuntimeError(f"{name}: The input tensor B must have at least 2 dimensions.")
    n = a.shape[-1]
    if (b.shape[-2] if left else b.shape[-1]) != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation {eq} "
                           f"({a.shape[-2]}x{n} and {b.shape[-2]}x{b.shape[-1]})")


def _solve_triangular_kernel(a, b, upper, left, unitriangular):
    _solve_triangular_checks(a, b, left)
    t = _tri(a, upper, unitriangular)
    with np.errstate(all="ignore"):
        try:
            if left:
                return np.linalg.solve(t, b)
            return np.swapaxes(np.linalg.solve(np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)),
                               -1, -2)
        except np.linalg.LinAlgError:  # LAPACK's trtrs does not fail: it divides by zero
            inv = np.linalg.pinv(t) * np.inf
            return np.matmul(inv, b) if left else np.matmul(b, inv)


def _solve_triangular_meta(a, b, upper, left=True, unitriangular=False):
    _solve_triangular_checks(a, b, left)
    # batch dims broadcast; the matrix dims are B's
    return TensorMeta(broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
                      + tuple(b.shape[-2:]), a.dtype)


@complex_vjp
def _solve_triangular_vjp(g, x, a, b, upper, left, unitriangular):
    st = OPS["linalg_solve_triangular"]
    gb = st(mH(a), g, upper=not upper, left=left, unitriangular=unitriangular)
    ga = -matmul(gb, mH(x)) if left else -matmul(mH(x), gb)
    ga = ga.triu(int(unitriangular)) if upper else ga.tril(-int(unitriangular))
    return ga, gb


defop("linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True, "
      "bool unitriangular=False) -> Tensor", function=False, method=False,
      kernels={"cpu": _solve_triangular_kernel}, vjp=_solve_triangular_vjp,
      meta=_solve_triangular_meta)


# ---- cholesky ------------------------------------------------------------------------------------
def _cholesky_kernel(a, upper):
    _check("linalg.cholesky", a, "cholesky_cpu")
    try:
        low = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        for i, m in _batches(a):
            for k in range(1, m.shape[-1] + 1):  # the first leading minor that fails
                try:
                    np.linalg.cholesky(m[:k, :k])
                except np.linalg.LinAlgError:
                    raise LinAlgError(
                        f"linalg.cholesky: {_prefix(a, i)}The factorization could not be "
                        f"completed because the input is not positive-definite (the leading "
                        f"minor of order {k} is not positive-definite).") from None
        raise
    return np.swapaxes(low, -1, -2).conj() if upper else low


@complex_vjp
def _cholesky_vjp(g, out, a, upper):
    # gA = L^-H phi(L^H gL) L^-1 symmetrized, phi = lower triangle with half its diagonal
    low, gl = (mH(out), mH(g)) if upper else (out, g)
    p = matmul(mH(low), gl).tril()
    p = p - 0.5 * (p * _eye(p, p.shape[-1]))
    st = OPS["linalg_solve_triangular"]
    s = st(mH(low), p, upper=True)                                   # L^-H phi
    s = st(low, s, upper=False, left=False)                          # ... L^-1
    return (0.5 * (s + mH(s)),)


defop("linalg_cholesky(Tensor self, *, bool upper=False) -> Tensor", function=False,
      method=False, kernels={"cpu": _cholesky_kernel}, vjp=_cholesky_vjp,
      meta=_same_meta("linalg.cholesky", "cholesky_cpu"))
defop("cholesky(Tensor self, bool upper=False) -> Tensor",
      decomp=lambda a, upper: OPS["linalg_cholesky"](a, upper=upper), supports="fc")


# ---- qr ------------------------------------------------------------------------------------------
def _qr_mode(mode):
    if mode not in ("reduced", "r", "complete"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           f"'reduced' (default), 'r', or 'complete'")


def _qr_kernel(a, mode):
    _check("linalg.qr", a, "geqrf_cpu", square=False)
    _qr_mode(mode)
    if mode == "r":
        return np.empty((0,), a.dtype), np.linalg.qr(a, mode="r")
    return np.linalg.qr(a, mode=mode)


def _qr_meta(a, mode):
    _check("linalg.qr", a, "geqrf_cpu", square=False)
    _qr_mode(mode)
    m, n = a.shape[-2], a.shape[-1]
    k = m if mode == "complete" else min(m, n)
    b = tuple(a.shape[:-2])
    q = TensorMeta((0,), a.dtype) if mode == "r" else TensorMeta(b + (m, k), a.dtype)
    return q, TensorMeta(b + (k, n), a.dtype)


def _copyltu(m):
    """The Hermitian matrix with m's lower triangle (real diagonal part)."""
    low = m.tril(-1)
    d = m * _eye(m, m.shape[-1])
    return low + mH(low) + (d.real if m.dtype.is_complex else d)


def _qr_backward_tall(gq, gr, q, r):
    """m >= n: gA = (gQ + Q copyltu(M)) R^-H with M = R gR^H - gQ^H Q."""
    m = matmul(r, mH(gr)) - matmul(mH(gq), q)
    b = gq + matmul(q, _copyltu(m))
    return OPS["linalg_solve_triangular"](mH(r), b, upper=False, left=False)


@complex_vjp
def _qr_vjp(grads, out, a, mode):
    gq, gr = grads
    q, r = out
    m, n = a.shape[-2], a.shape[-1]
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed "
                           "when mode='r'. Please use linalg.qr(A, mode='reduced') if you are "
                           "going to differentiate through linalg.qr.")
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols.")
    if m >= n:
        return (_qr_backward_tall(gq, gr, q, r),)
    # wide: A = [X | Y], X = Q R_X, R = [R_X | Q^H Y]
    y = a.narrow(-1, m, n - m)
    gr_x, gr_y = gr.narrow(-1, 0, m), gr.narrow(-1, m, n - m)
    gx = _qr_backward_tall(gq + matmul(y, mH(gr_y)), gr_x, q, r.narrow(-1, 0, m))
    import ember
    return (ember.cat([gx, matmul(q, gr_y)], -1),)


defop("linalg_qr(Tensor A, str mode='reduced') -> (Tensor Q, Tensor R)", function=False,
      method=False, kernels={"cpu": _qr_kernel}, meta=_qr_meta, vjp=_qr_vjp)
defop("qr(Tensor self, bool some=True) -> (Tensor Q, Tensor R)",
      decomp=lambda a, some: OPS["linalg_qr"](a, "reduced" if some else "complete"))


# ---- svd -----------------------------------------------------------------------------------------
def _svd_kernel(a, full_matrices, driver):
    _check("linalg.svd", a, "linalg_svd_cpu", square=False)
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return u, s.astype(_dt(a).to_real().np, copy=False), vh


def _svd_meta(a, full_matrices, driver):
    _check("linalg.svd", a, "linalg_svd_cpu", square=False)
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    b = tuple(a.shape[:-2])
    return (TensorMeta(b + (m, m if full_matrices else k), a.dtype),
            TensorMeta(b + (k,), a.dtype.to_real()),
            TensorMeta(b + (n if full_matrices else k, n), a.dtype))


@complex_vjp
def _svd_vjp(grads, out, a, full_matrices, driver):
    """Townsend's rule for the reduced SVD (the extra columns of full U/Vh get no gradient)."""
    gu, gs, gvh = grads
    u, s, vh = out
    m, n = a.shape[-2], a.shape[-1]
    k = s.shape[-1]
    if full_matrices and m != n:
        u, gu = u.narrow(-1, 0, k), gu.narrow(-1, 0, k)
        vh, gvh = vh.narrow(-2, 0, k), gvh.narrow(-2, 0, k)
    v, gv = mH(vh), mH(gvh)
    s2 = s * s
    diff = s2.unsqueeze(-2) - s2.unsqueeze(-1)                        # s_j^2 - s_i^2
    eye = _eye(s, k)
    f = (1 - eye) / (diff + eye)                                        # 0 on the diagonal
    uhgu, vhgv = matmul(mH(u), gu), matmul(mH(v), gv)
    j = f * (uhgu - mH(uhgu))
    kk = f * (vhgv - mH(vhgv))
    core = j * s.unsqueeze(-2) + s.unsqueeze(-1) * kk + eye * gs.unsqueeze(-1)
    if a.dtype.is_complex:  # the phase of each singular pair: i Im(diag(U^H gU)) / s
        core = core + eye * (uhgu.diagonal(0, -2, -1).imag / s).unsqueeze(-1) * 1j
    ga = matmul(matmul(u, core.to(u.dtype)), vh)
    if m > k:   # gU outside the span of U
        ga = ga + matmul((gu - matmul(u, uhgu)) / s.unsqueeze(-2), vh)
    if n > k:   # gV outside the span of V
        ga = ga + matmul(u, mH((gv - matmul(v, vhgv)) / s.unsqueeze(-2)))
    return (ga,)


defop("linalg_svd(Tensor A, bool full_matrices=True, *, str? driver=None) -> "
      "(Tensor U, Tensor S, Tensor Vh)", function=False, method=False,
      kernels={"cpu": _svd_kernel}, meta=_svd_meta, vjp=_svd_vjp)


def _svdvals_kernel(a, driver):
    _check("linalg.svd", a, "linalg_svd_cpu", square=False)
    return np.linalg.svd(a, compute_uv=False).astype(_dt(a).to_real().np, copy=False)


@complex_vjp
def _svdvals_vjp(g, s, a, driver):
    u, _, vh = OPS["linalg_svd"](a, False)
    return (matmul(u * g.unsqueeze(-2).to(u.dtype), vh),)


defop("linalg_svdvals(Tensor A, *, str? driver=None) -> Tensor", function=False, method=False,
      kernels={"cpu": _svdvals_kernel}, vjp=_svdvals_vjp,
      meta=lambda a, driver: _svd_meta(a, False, driver)[1])


def _svd_legacy(a, some, compute_uv):
    """`torch.svd`: V instead of Vh, and zero U, V when compute_uv=False."""
    import ember
    if not compute_uv:
        s = OPS["linalg_svdvals"](a)
        m, n = a.shape[-2], a.shape[-1]
        b = tuple(a.shape[:-2])
        return (ember.zeros(b + (m, m), dtype=a.dtype), s,
                ember.zeros(b + (n, n), dtype=a.dtype))
    u, s, vh = OPS["linalg_svd"](a, not some)
    return u, s, mH(vh)


defop("svd(Tensor self, bool some=True, bool compute_uv=True) -> (Tensor U, Tensor S, Tensor V)",
      decomp=_svd_legacy)


# ---- eigen decompositions ------------------------------------------------------------------------
def _uplo(uplo):
    if uplo not in ("L", "U", "l", "u"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {uplo}")
    return uplo.upper()


def _eigh_kernel(a, uplo):
    _check("linalg.eigh", a, "linalg_eigh_cpu", int_kernel=True)
    w, v = np.linalg.eigh(a, UPLO=_uplo(uplo))
    return w.astype(_dt(a).to_real().np, copy=False), v


def _eigh_meta(a, uplo):
    _check("linalg.eigh", a, "linalg_eigh_cpu", int_kernel=True)
    _uplo(uplo)
    return TensorMeta(tuple(a.shape[:-1]), a.dtype.to_real()), TensorMeta(tuple(a.shape),
                                                                          a.dtype)


@complex_vjp
def _eigh_vjp(grads, out, a, uplo):
    gl, gv = grads
    lam, v = out
    n = lam.shape[-1]
    eye = _eye(lam, n)
    vhgv = matmul(mH(v), gv)
    vhgv = 0.5 * (vhgv - mH(vhgv))                    # the skew part: the rest is gauge
    e = lam.unsqueeze(-2) - lam.unsqueeze(-1)         # lambda_j - lambda_i
    inner = vhgv * ((1 - eye) / (e + eye)).to(v.dtype) + (eye * gl.unsqueeze(-1)).to(v.dtype)
    return (matmul(matmul(v, inner), mH(v)),)


defop("linalg_eigh(Tensor self, str UPLO='L') -> (Tensor eigenvalues, Tensor eigenvectors)",
      function=False, method=False, kernels={"cpu": _eigh_kernel}, meta=_eigh_meta,
      vjp=_eigh_vjp)


def _eigvalsh_kernel(a, uplo):
    _check("linalg.eigh", a, "linalg_eigh_cpu", int_kernel=True)
    return np.linalg.eigvalsh(a, UPLO=_uplo(uplo)).astype(_dt(a).to_real().np, copy=False)


@complex_vjp
def _eigvalsh_vjp(g, lam, a, uplo):
    _, v = OPS["linalg_eigh"](a, uplo)
    return (matmul(v * g.unsqueeze(-2).to(v.dtype), mH(v)),)


defop("linalg_eigvalsh(Tensor self, str UPLO='L') -> Tensor", function=False, method=False,
      kernels={"cpu": _eigvalsh_kernel}, vjp=_eigvalsh_vjp,
      meta=lambda a, uplo: _eigh_meta(a, uplo)[0])


def _eig_kernel(a):
    if not (_dt(a).is_floating_point or _dt(a).is_complex):
        raise RuntimeError(f"Unknown Complex ScalarType for {torch_name(_dt(a))}")
    _check("linalg.eig", a, "linalg_eig_cpu")
    cdt = _dt(a).to_complex().np
    w, v = np.linalg.eig(a)
    return w.astype(cdt), v.astype(cdt)


def _eig_meta(a):
    _check("linalg.eig", a, "linalg_eig_cpu")
    c = a.dtype.to_complex()
    return TensorMeta(tuple(a.shape[:-1]), c), TensorMeta(tuple(a.shape), c)


defop("linalg_eig(Tensor self) -> (Tensor eigenvalues, Tensor eigenvectors)", function=False,
      method=False, kernels={"cpu": _eig_kernel}, meta=_eig_meta, differentiable=())
defop("linalg_eigvals(Tensor self) -> Tensor", function=False, method=False, differentiable=(),
      kernels={"cpu": lambda a: _eig_kernel(a)[0]}, meta=lambda a: _eig_meta(a)[0])


# ---- pinv, matrix_rank, lstsq --------------------------------------------------------------------
def _cutoff(smax, atol, rtol, m, n, dt):
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else np.finfo(dt.to_real().np).eps * max(m, n)
    return max(atol or 0.0, 0.0), rtol


def _at_least(x, lo):
    import ember
    return ember.where(x > lo, x, lo) if lo else x


def _pinv(a, rcond, hermitian, atol, rtol):
    import ember
    if len(a.shape) < 2 or not (a.dtype.is_floating_point or a.dtype.is_complex):
        raise RuntimeError(f"linalg.pinv({torch_name(a.dtype)}{{{list(a.shape)}}}): expected a "
                           f"tensor with 2 or more dimensions of float, double, cfloat or "
                           f"cdouble types")
    if rcond is not None:
        rtol = rcond
    m, n = a.shape[-2], a.shape[-1]
    at, rt = _cutoff(None, atol, rtol, m, n, a.dtype)
    if hermitian:
        lam, v = OPS["linalg_eigh"](a)
        mag = lam.abs()
        cut = _at_least(mag.amax(-1, keepdim=True) * rt, at) if mag.numel() else mag
        inv = ember.where(mag > cut, 1 / ember.where(mag > cut, lam, 1), 0)
        return matmul(v * inv.unsqueeze(-2).to(v.dtype), mH(v))
    u, s, vh = OPS["linalg_svd"](a, False)
    cut = _at_least(s.narrow(-1, 0, 1) * rt, at) if s.numel() else s
    inv = ember.where(s > cut, 1 / ember.where(s > cut, s, 1), 0)     # (..., k)
    return matmul(mH(vh) * inv.unsqueeze(-2).to(a.dtype), mH(u))


defop("linalg_pinv(Tensor self, float? rcond=None, bool hermitian=False, *, float? atol=None, "
      "float? rtol=None) -> Tensor", function=False, method=False, decomp=_pinv)
defop("pinverse(Tensor self, float rcond=1e-15) -> Tensor",
      decomp=lambda a, rcond: _pinv(a, None, False, None, rcond))


def _rank_check(a):
    if len(a.shape) < 2 or not (_dt(a).is_floating_point or _dt(a).is_complex):
        raise RuntimeError("linalg.matrix_rank: The input tensor input must have at least 2 "
                           "dimensions." if len(a.shape) < 2 else
                           "This function doesn't handle types other than float and double")


def _rank_meta(a, *_):
    _rank_check(a)
    return TensorMeta(tuple(a.shape[:-2]), D.int64)


def _rank_kernel(a, tol, hermitian, atol, rtol):
    _rank_check(a)
    if tol is not None:
        atol, rtol = tol, 0.0
    m, n = a.shape[-2], a.shape[-1]
    at, rt = _cutoff(None, atol, rtol, m, n, _dt(a))
    if a.size == 0:
        return np.zeros(a.shape[:-2], np.int64)
    s = np.abs(np.linalg.eigvalsh(a)) if hermitian else np.linalg.svd(a, compute_uv=False)
    cut = np.maximum(at, s.max(-1, keepdims=True) * rt)
    return (s > cut).sum(-1).astype(np.int64)


defop("linalg_matrix_rank(Tensor self, float? tol=None, bool hermitian=False, *, "
      "float? atol=None, float? rtol=None) -> Tensor", function=False, method=False,
      kernels={"cpu": _rank_kernel}, differentiable=(),
      meta=_rank_meta)


def _lstsq_kernel(a, b, rcond, driver):
    if _dt(a) not in (D.float32, D.float64, D.complex64, D.complex128):
        raise RuntimeError("This function doesn't handle types other than float and double")
    _check("linalg.lstsq", a, square=False)
    driver = driver or "gelsy"
    vec = len(b.shape) == len(a.shape) - 1
    bm = b[..., None] if vec else b
    m, n = a.shape[-2], a.shape[-1]
    batch = broadcast_shapes(a.shape[:-2], bm.shape[:-2])
    aa = np.broadcast_to(a, batch + a.shape[-2:]).reshape((-1, m, n))
    bb = np.broadcast_to(bm, batch + bm.shape[-2:]).reshape((-1, m, bm.shape[-1]))
    rc = rcond if rcond is not None else np.finfo(_dt(a).to_real().np).eps * max(m, n)
    sols, res, ranks, svs = [], [], [], []
    for x, y in zip(aa, bb):
        sol, r, rank, sv = np.linalg.lstsq(x, y, rcond=rc)
        sols.append(sol)
        res.append(r)
        ranks.append(rank)
        svs.append(sv)
    rdt = _dt(a).to_real().np
    sol = np.array(sols, a.dtype).reshape(batch + (n, bm.shape[-1]))
    full = all(r.size for r in res) and m > n and driver != "gelsy"
    residuals = (np.array(res, rdt).reshape(batch + (bm.shape[-1],)) if full
                 else np.empty((0,), rdt))
    rank = (np.array(ranks, np.int64).reshape(batch) if driver != "gels"
            else np.empty((0,), np.int64))
    sv = (np.array(svs, rdt).reshape(batch + (min(m, n),)) if driver in ("gelsd", "gelss")
          else np.empty((0,), rdt))
    return (sol[..., 0] if vec else sol), residuals, rank, sv


defop("linalg_lstsq(Tensor self, Tensor b, float? rcond=None, *, str? driver=None) -> "
      "(Tensor solution, Tensor residuals, Tensor rank, Tensor singular_values)",
      function=False, method=False, kernels={"cpu": _lstsq_kernel}, differentiable=())

from . import linalg_norm as _norms  # noqa: E402,F401 - the norms, in their own file
