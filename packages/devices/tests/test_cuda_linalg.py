"""The linear-algebra family of the cuda backend (cuSOLVER factorizations, cuBLAS trsm) against the
CPU on cases the op database's samples miss: batches, broadcasting, strides, both float dtypes,
wide and tall matrices, modes, gradients, errors (same type and message). Eigenvectors and
singular vectors are checked up to their sign (the gauge the libraries may pick differently). The
same script runs on the fake device (numpy stand-ins of cuSOLVER, in a subprocess so the
environment takes effect before triton is imported) and, when there is one, on the GPU; it checks
that only the failure paths ran on host copies."""
from cuda_script import run_script

SCRIPT = r"""
import sys
import numpy as np, ember
import ember.autograd
from ember._device import get_backend
be = get_backend("cuda")
rng = np.random.default_rng(0)
L = ember.linalg

def T(*shape, dtype="float32"):
    return ember.tensor(rng.standard_normal(shape).astype(dtype))

def spd(n, *batch, dtype="float32"):
    a = rng.standard_normal(batch + (n, n))
    return ember.tensor((a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype))

def tol_of(t):
    return 1e-9 if t.dtype == ember.float64 else 2e-4

def close(e, g, tol=None):
    g = g.detach().cpu()
    e = e.detach()
    assert e.dtype == g.dtype, (e.dtype, g.dtype)
    assert tuple(e.shape) == tuple(g.shape), (e.shape, g.shape)
    tol = tol_of(e) if tol is None else tol
    np.testing.assert_allclose(g.numpy().astype(np.float64), e.numpy().astype(np.float64),
                               rtol=tol, atol=tol, equal_nan=True)

def cu(xs):
    return [x.cuda() if isinstance(x, ember.Tensor) else x for x in xs]

def same(f, *xs, tol=None, **kw):
    e = f(*xs, **kw)
    g = f(*cu(xs), **kw)
    if isinstance(e, ember.Tensor):
        e, g = (e,), (g,)
    for a, b in zip(e, g):
        assert b.device.type == "cuda"
        close(a, b, tol)
    return e, g

def grads(f, *xs, tol=None):
    # gradients of sum(f(x) * w) for the float inputs, cuda vs CPU
    out = []
    for dev in ("cpu", "cuda"):
        ins = [x.to(dev).detach().clone().requires_grad_() for x in xs]
        r = f(*ins)
        r = r if isinstance(r, tuple) else (r,)
        w = [ember.tensor(np.random.default_rng(3).standard_normal(tuple(o.shape)).astype(
            str(o.dtype)[6:])).to(dev) for o in r]
        loss = sum((o * v).sum() for o, v in zip(r, w))
        out.append(ember.autograd.grad(loss, ins))
    for a, b in zip(*out):
        close(a, b, tol)

def unsign(e, g, axis):
    # g's vectors (along axis) flipped to e's signs: the gauge of eigen/singular vectors
    e, g = e.detach().numpy(), g.detach().cpu().numpy()
    s = np.sign(np.sum(e * g, axis=axis, keepdims=True))
    return g * np.where(s == 0, 1, s)

def check_vecs(e, g, axis, tol):
    np.testing.assert_allclose(unsign(e, g, axis), e.numpy(), rtol=tol, atol=tol)

FAILED = []

def run(name, f, *args):
    # a failing section is reported and the others still run (one GPU run shows them all)
    import traceback
    try:
        f(*args)
    except Exception:
        FAILED.append(name)
        tb = traceback.format_exc().splitlines()
        print(f"FAILED {name}", *tb[-8:], sep="\n", file=sys.stderr)

SECTIONS = []

def _sec0(dt):
    # cholesky: batches, upper, a transposed (non-contiguous) input
    a = spd(5, 2, 3, dtype=dt)
    same(L.cholesky, a)
    same(L.cholesky, a, upper=True)
    same(L.cholesky, a.transpose(-1, -2))
    same(L.cholesky, spd(70, dtype=dt), tol=1e-3 if dt == "float32" else None)
SECTIONS.append(("cholesky", _sec0))

def _sec1(dt):
    # solve: left/right, vector, broadcast batches, strided B
    a, b = spd(4, 2, 1, dtype=dt), T(3, 4, 2, dtype=dt)
    same(L.solve, a, b)
    same(L.solve, a, T(3, 2, 4, dtype=dt), left=False)
    same(L.solve, a[0, 0], T(4, dtype=dt))
    same(L.solve, a, T(2, 1, 4, dtype=dt))        # b == A.shape[:-1]: a batch of vectors
    same(L.solve, T(4, 4, dtype=dt), T(2, 4, dtype=dt).t())
    same(L.solve, T(6, 6, dtype=dt).t(), T(6, 5, dtype=dt), tol=1e-3 if dt == "float32" else None)
SECTIONS.append(("solve", _sec1))

def _sec2(dt):
    # inv, det, slogdet (negative and zero determinants)
    m = T(2, 3, 5, 5, dtype=dt)
    same(L.inv, m, tol=1e-3 if dt == "float32" else None)
    same(L.inv, m.transpose(-1, -2), tol=1e-3 if dt == "float32" else None)
    sing = ember.tensor(np.array([[1, 2, 3], [2, 4, 6], [1, 0, 1]], dt))
    exact = ember.tensor(np.array([[4, 2, 2], [2, 1, 1], [2, 1, 1]], dt))  # an exact 0 pivot
    neg = ember.tensor(np.array([[0, 1], [1, 0]], dt))
    for x in (m, sing, exact, neg, spd(3, 4, dtype=dt)):
        same(L.det, x, tol=1e-3 if dt == "float32" else None)
        # slogdet's sign of a singular matrix is 0 only where its LU rounds to an exact 0
        if x is not sing:
            same(L.slogdet, x, tol=1e-3 if dt == "float32" else None)
SECTIONS.append(("inv/det/slogdet", _sec2))

def _sec3(dt):
    # qr: tall, wide, square batches, every mode
    for shape in ((5, 3), (3, 5), (2, 4, 4), (3, 6, 2)):
        x = T(*shape, dtype=dt)
        for mode in ("reduced", "complete", "r"):
            q, r = L.qr(x, mode=mode)
            gq, gr = L.qr(x.cuda(), mode=mode)
            assert gr.device.type == "cuda" and gq.dtype == q.dtype and gr.dtype == r.dtype
            assert tuple(gq.shape) == tuple(q.shape) and tuple(gr.shape) == tuple(r.shape)
            tol = tol_of(x) * 10
            check_vecs(r, gr, -1, tol)               # R's rows up to sign
            if mode != "r":
                k = min(shape[-2], shape[-1])
                qq, rr = gq.cpu().numpy(), gr.cpu().numpy()
                np.testing.assert_allclose(qq[..., :k] @ rr[..., :k, :], x.numpy(), atol=tol)
                np.testing.assert_allclose(np.swapaxes(qq, -1, -2) @ qq,
                                           np.broadcast_to(np.eye(qq.shape[-1]),
                                                           qq.shape[:-2] + (qq.shape[-1],) * 2),
                                           atol=tol)
SECTIONS.append(("qr", _sec3))

def _sec4(dt):
    # eigh / eigvalsh: batches, UPLO (only that triangle is read)
    for x in (spd(4, 3, dtype=dt), T(5, 5, dtype=dt)):
        for uplo in ("L", "U"):
            (w, v), (gw, gv) = L.eigh(x, UPLO=uplo), L.eigh(x.cuda(), UPLO=uplo)
            close(w, gw, 1e-3 if dt == "float32" else 1e-8)
            check_vecs(v, gv, -2, 1e-3 if dt == "float32" else 1e-8)
            same(L.eigvalsh, x, UPLO=uplo, tol=1e-3 if dt == "float32" else 1e-8)
SECTIONS.append(("eigh / eigvalsh", _sec4))

def _sec5(dt):
    # svd / svdvals: tall, wide, batches, full_matrices
    for shape in ((5, 3), (3, 5), (2, 4, 6), (2, 6, 4), (4, 4)):
        x = T(*shape, dtype=dt)
        tol = 1e-3 if dt == "float32" else 1e-8
        same(L.svdvals, x, tol=tol)
        for full in (True, False):
            u, s, vh = L.svd(x, full_matrices=full)
            gu, gs, gvh = L.svd(x.cuda(), full_matrices=full)
            close(s, gs, tol)
            assert tuple(gu.shape) == tuple(u.shape) and tuple(gvh.shape) == tuple(vh.shape)
            k = s.shape[-1]
            check_vecs(u[..., :k], gu[..., :k], -2, tol)
            check_vecs(vh[..., :k, :], gvh[..., :k, :], -1, tol)
            uu, vv = gu.cpu().numpy(), gvh.cpu().numpy()
            for o in (uu, np.swapaxes(vv, -1, -2)):
                np.testing.assert_allclose(np.swapaxes(o, -1, -2) @ o, np.broadcast_to(
                    np.eye(o.shape[-1]), o.shape[:-2] + (o.shape[-1],) * 2), atol=tol)
SECTIONS.append(("svd / svdvals", _sec5))

def _sec6(dt):
    # solve_triangular: upper/lower, left/right, unit diagonal, broadcasting, strides
    a = T(3, 4, 4, dtype=dt) + 4 * ember.eye(4, dtype=getattr(ember, dt))
    for upper in (True, False):
        for left in (True, False):
            for unit in (True, False):
                b = T(3, 4, 2, dtype=dt) if left else T(3, 2, 4, dtype=dt)
                same(L.solve_triangular, a, b, upper=upper, left=left, unitriangular=unit)
                same(L.solve_triangular, a[0].t(), b, upper=upper, left=left,
                     unitriangular=unit)
                same(L.solve_triangular, a.reshape(3, 1, 4, 4), b.unsqueeze(1).expand(3, 2,
                     *b.shape[1:]), upper=upper, left=left, unitriangular=unit)
                same(L.solve_triangular, a[:1], b, upper=upper, left=left, unitriangular=unit)
SECTIONS.append(("solve_triangular", _sec6))

def _sec7(dt):
    # matrix_rank: rank-deficient, hermitian, tolerances
    r2 = T(6, 2, dtype=dt) @ T(2, 5, dtype=dt)
    for kw in ({}, {"atol": 1.0}, {"rtol": 0.5}, {"tol": 1e-3}):
        same(L.matrix_rank, r2, **kw)
        same(L.matrix_rank, spd(4, 2, dtype=dt), hermitian=True, **kw)
SECTIONS.append(("matrix_rank", _sec7))

for dt in ("float32", "float64"):
    for name, f in SECTIONS:
        run(f"{name} {dt}", f, dt)

# gradients through core's vjps, on cuda (float64)
a, b = spd(4, 2, dtype="float64"), T(2, 4, 3, dtype="float64")
run("grad 0", lambda: grads(L.cholesky, a))
run("grad 1", lambda: grads(lambda x, y: L.solve(x, y), a, b))
run("grad 2", lambda: grads(lambda x, y: L.solve(x, y, left=False), a, b.transpose(-1, -2)))
run("grad 3", lambda: grads(L.inv, a))
run("grad 4", lambda: grads(L.det, a))
run("grad 5", lambda: grads(lambda x: L.slogdet(x)[1], a))
run("grad 6", lambda: grads(lambda x: L.qr(x), T(5, 3, dtype="float64")))
run("grad 7", lambda: grads(lambda x: L.qr(x), T(3, 5, dtype="float64")))
run("grad 8", lambda: grads(lambda x: L.eigh(x)[0], a))
run("grad 9", lambda: grads(L.eigvalsh, a))
run("grad 10", lambda: grads(lambda x: L.svd(x, full_matrices=False)[1],
                            T(5, 3, dtype="float64")))
run("grad 11", lambda: grads(L.svdvals, T(3, 5, dtype="float64")))
run("grad 12", lambda: grads(lambda x, y: L.solve_triangular(x, y, upper=True),
                            T(4, 4, dtype="float64").triu() + 4 * ember.eye(4, dtype=ember.float64),
                            b))
if be.fallback_ops:   # only the failure paths below may run on host copies
    FAILED.append(f"host copies: {dict(be.fallback_ops)}")

# errors: the CPU's exception type and message (the failure path reads info, then the CPU kernel)
def same_error(f, *xs, **kw):
    try:
        f(*xs, **kw)
    except Exception as exc:
        et, msg = type(exc), str(exc)
    else:
        raise AssertionError("the CPU did not raise")
    try:
        f(*cu(xs), **kw)
    except et as exc:
        assert str(exc) == msg, (str(exc), msg)
        return
    raise AssertionError(f"cuda did not raise {et}")

notpd = spd(4, 3)
notpd[1, 2, 2] = -50.0
run("error cholesky", lambda: same_error(L.cholesky, notpd))
run("error cholesky", lambda: same_error(L.cholesky, -spd(3)))
sing = ember.tensor(np.array([[[1, 2], [3, 4]], [[1, 2], [2, 4.0]]], "float32"))
run("error solve", lambda: same_error(L.solve, sing, T(2, 2, 1)))
run("error inv", lambda: same_error(L.inv, sing))
run("error inv", lambda: same_error(L.inv, T(3, 4)))
run("error solve", lambda: same_error(L.solve, T(3, 3), T(4, 1)))
run("error qr", lambda: same_error(L.qr, T(3, 3), mode="bad"))
run("error eigh", lambda: same_error(L.eigh, T(3, 3), UPLO="X"))
run("error det", lambda: same_error(L.det, T(3, 4)))
run("error cholesky", lambda: same_error(L.cholesky, T(3, 3).to(ember.int64)))
assert not FAILED, FAILED
print("ok")
"""


def test_linalg_on_cuda():
    run_script(SCRIPT, "test_cuda_linalg", timeout=900)
