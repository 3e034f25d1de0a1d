"""Linear algebra against torch: products (all matmul rank cases), einsum, factorizations, norms,
their errors and their gradients. Decompositions with a sign/phase freedom are compared through
invariants (reconstructions, absolute values), not raw factors."""
import numpy as np
import pytest
from harness import LOWP, check, check_error

import ember

F64 = ("float64",)


def T(t, a):
    return a.transpose(-2, -1)


def spd(t, a):
    """A symmetric positive-definite matrix (batch) from any square a."""
    n = a.shape[-1]
    return a @ T(t, a) + n * t.eye(n, dtype=a.dtype)


# ---- matmul and its family ---------------------------------------------------------------------
MATMUL_SHAPES = [
    [(4,), (4,)], [(3, 4), (4,)], [(4,), (4, 5)], [(3, 4), (4, 5)], [(2, 3, 4), (4,)],
    [(4,), (2, 4, 5)], [(2, 3, 4), (4, 5)], [(3, 4), (2, 4, 5)], [(2, 3, 4), (2, 4, 5)],
    [(2, 1, 3, 4), (5, 4, 2)], [(0, 3), (3, 2)], [(3, 0), (0, 2)],
]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul_ranks(shapes):
    check(lambda t, a, b: t.matmul(a, b), shapes=shapes, grad=True)
    check(lambda t, a, b: a @ b, shapes=shapes, dtypes=LOWP + ("int32", "int64"))


def test_matmul_transposed_inputs_and_grad():
    check(lambda t, a, b: T(t, a) @ T(t, b), shapes=[(4, 3), (5, 4)], grad=True)
    check(lambda t, a, b: T(t, a) @ b, shapes=[(2, 4, 3), (2, 4, 5)], grad=True)


@pytest.mark.parametrize("fn,shapes", [
    (lambda t, a, b: t.mm(a, b), [(3, 4), (4, 5)]),
    (lambda t, a, b: a.mm(b), [(3, 4), (4, 5)]),
    (lambda t, a, b: t.bmm(a, b), [(2, 3, 4), (2, 4, 5)]),
    (lambda t, a, b: t.mv(a, b), [(3, 4), (4,)]),
    (lambda t, a, b: t.dot(a, b), [(4,), (4,)]),
    (lambda t, a, b: t.vdot(a, b), [(4,), (4,)]),
    (lambda t, a, b: t.inner(a, b), [(2, 3, 4), (5, 4)]),
    (lambda t, a, b: t.inner(a.sum(), b), [(2,), (5, 4)]),
    (lambda t, a, b: t.outer(a, b), [(3,), (4,)]),
    (lambda t, a, b: t.ger(a, b), [(3,), (4,)]),
    (lambda t, a, b: t.kron(a, b), [(2, 3), (4, 2)]),
    (lambda t, a, b: t.kron(a, b), [(2,), (3, 2)]),
    (lambda t, a, b: t.tensordot(a, b, dims=2), [(2, 3, 4), (3, 4, 5)]),
    (lambda t, a, b: t.tensordot(a, b, dims=([0, 2], [2, 0])), [(2, 3, 4), (4, 5, 2)]),
    (lambda t, a, b: t.tensordot(a, b, dims=0), [(2,), (3,)]),
    (lambda t, a, b: t.linalg.cross(a, b), [(4, 3), (4, 3)]),
    (lambda t, a, b: t.linalg.cross(a, b, dim=0), [(3, 2), (3, 2)]),
    (lambda t, a, b: t.cross(a, b, dim=1), [(2, 3), (1, 3)]),
    (lambda t, a, b: t.cdist(a, b), [(4, 3), (5, 3)]),
    (lambda t, a, b: t.cdist(a, b, p=1), [(2, 4, 3), (2, 5, 3)]),
    (lambda t, a, b: t.cdist(a, b, p=3), [(4, 3), (5, 3)]),
    (lambda t, a, b: t.cdist(a, b), [(30, 3), (5, 3)]),         # the mm path
    (lambda t, a, b: t.linalg.vecdot(a, b), [(2, 3), (3,)]),
])
def test_products(fn, shapes):
    check(fn, shapes=shapes, grad=True)


def test_cdist_inf_and_zero():
    check(lambda t, a, b: t.cdist(a, b, p=float("inf")), shapes=[(4, 3), (5, 3)], grad=True)
    check(lambda t, a, b: t.cdist(a, b, p=0), shapes=[(4, 3), (5, 3)])


@pytest.mark.parametrize("name", ["addmm", "addmv", "addbmm", "baddbmm", "addr"])
def test_add_products(name):
    shapes = {"addmm": [(3, 5), (3, 4), (4, 5)], "addmv": [(3,), (3, 4), (4,)],
              "addbmm": [(3, 5), (2, 3, 4), (2, 4, 5)], "baddbmm": [(2, 3, 5), (2, 3, 4),
                                                                     (2, 4, 5)],
              "addr": [(3, 4), (3,), (4,)]}[name]
    check(lambda t, s, a, b: getattr(t, name)(s, a, b), shapes=shapes, grad=True)
    check(lambda t, s, a, b: getattr(t, name)(s, a, b, beta=0.5, alpha=2), shapes=shapes,
          grad=True)
    check(lambda t, s, a, b: getattr(t, name)(s, a, b, beta=0), shapes=shapes, grad=True)


def test_inplace_add_products():
    check(lambda t, s, a, b: s.clone().addmm_(a, b, beta=2), shapes=[(3, 5), (3, 4), (4, 5)],
          grad=True)
    check(lambda t, s, a, b: s.clone().baddbmm_(a, b, alpha=0.5),
          shapes=[(2, 3, 5), (2, 3, 4), (2, 4, 5)], grad=True)


def test_addmm_broadcast_self_and_nan_with_beta_zero():
    check(lambda t, s, a, b: t.addmm(s, a, b), shapes=[(5,), (3, 4), (4, 5)], grad=True)
    nan = np.full((3, 5), np.nan, np.float32)
    check(lambda t, s, a, b: t.addmm(s, a, b, beta=0), args=[
        nan, np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)], dtypes=("float32",))


def test_trace_and_matrix_power():
    check(lambda t, a: t.trace(a), shapes=[(3, 4)], grad=True)
    check(lambda t, a: t.trace(a), shapes=[(3, 3)], dtypes=("int32", "int64"))
    for n in (0, 1, 2, 3, 5):
        check(lambda t, a, n=n: t.linalg.matrix_power(a, n), shapes=[(2, 3, 3)], grad=True)
    check(lambda t, a: t.matrix_power(spd(t, a), -2), shapes=[(3, 3)], dtypes=F64)


def test_multi_dot():
    check(lambda t, a, b, c: t.linalg.multi_dot([a, b, c]), shapes=[(4,), (4, 6), (6, 2)],
          grad=True)
    check(lambda t, a, b, c, d: t.linalg.multi_dot([a, b, c, d]),
          shapes=[(2, 30), (30, 3), (3, 20), (20,)], grad=True)
    check(lambda t, a, b: t.linalg.multi_dot([a, b]), shapes=[(3,), (3,)], grad=True)


# ---- einsum --------------------------------------------------------------------------------------
@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("ij->", [(3, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ba", [(3, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...i,...i->...", [(2, 1, 3), (4, 3)]),
    ("b...,b->...", [(2, 3, 4), (2,)]),
    ("ij,ij->ij", [(1, 3), (2, 1)]),
    ("ijk,kl,lm->im", [(2, 3, 4), (4, 5), (5, 2)]),
    ("iij->j", [(3, 3, 2)]),
    ("ij,k->ijk", [(2, 3), (2,)]),
    (" i j , j k -> i k ", [(2, 3), (3, 4)]),
    ("ij,jk->i", [(2, 3), (3, 4)]),
    ("bij,bkj->bki", [(2, 3, 4), (2, 5, 4)]),
    ("i,i->i", [(3,), (3,)]),
    ("abc,cd->", [(2, 3, 4), (4, 2)]),
    ("ij,ji->j", [(3, 3), (3, 3)]),
])
def test_einsum(eq, shapes):
    check(lambda t, *xs: t.einsum(eq, *xs), shapes=shapes, grad=True)


def test_einsum_forms():
    check(lambda t, a, b: t.einsum("ij,jk->ik", [a, b]), shapes=[(2, 3), (3, 4)])
    check(lambda t, a, b: t.einsum(a, [0, 1], b, [1, 2], [0, 2]), shapes=[(2, 3), (3, 4)])
    check(lambda t, a, b: t.einsum(a, [..., 1], b, [1, 2]), shapes=[(5, 2, 3), (3, 4)])
    check(lambda t, a, b: t.einsum("ij,jk->ik", a, b), shapes=[(2, 3), (3, 4)], dtypes=LOWP)


@pytest.mark.parametrize("fn", [
    lambda t: t.einsum("ij,jk->ik", t.ones(2, 3), t.ones(4, 5)),
    lambda t: t.einsum("ij,jk", t.ones(2, 3)),
    lambda t: t.einsum("i,i->", t.ones(2), t.ones(2), t.ones(2)),
    lambda t: t.einsum("ij->ik", t.ones(2, 3)),
    lambda t: t.einsum("ii->ii", t.ones(2, 2)),
    lambda t: t.einsum("ii->i", t.ones(2, 3)),
    lambda t: t.einsum("ij->i", t.ones(2, 3, 4)),
    lambda t: t.einsum("...ij->i", t.ones(2)),
    lambda t: t.einsum("i$", t.ones(2)),
    lambda t: t.einsum("i..->", t.ones(2)),
    lambda t: t.einsum("i,i", t.ones(2), t.ones(2, dtype=t.float64)),
])
def test_einsum_errors(fn):
    check_error(fn)


def test_einsum_error_messages():
    with pytest.raises(RuntimeError, match="subscript j has size 4 for operand 1 which does not "
                                           "broadcast with previously seen size 3"):
        ember.einsum("ij,jk->ik", ember.ones(2, 3), ember.ones(4, 5))


# ---- product errors ------------------------------------------------------------------------------
@pytest.mark.parametrize("fn,match", [
    (lambda t: t.matmul(t.ones(2, 3), t.ones(4, 5)),
     r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    (lambda t: t.matmul(t.ones(2, 3), t.ones(3, 4, dtype=t.float64)),
     "expected m1 and m2 to have the same dtype, but got: float != double"),
    (lambda t: t.mm(t.ones(2, 3, dtype=t.int32), t.ones(3, 4, dtype=t.int64)),
     "int != long int"),
    (lambda t: t.matmul(t.ones(3), t.ones(3, dtype=t.float64)),
     "dot : expected both vectors to have same dtype, but found Float and Double"),
    (lambda t: t.matmul(t.ones(3), t.ones(4)), "inconsistent tensor size"),
    (lambda t: t.matmul(t.ones(2, 3), t.ones(4)),
     r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
    (lambda t: t.matmul(t.ones(3), t.ones(4, 5)),
     r"mat1 and mat2 shapes cannot be multiplied \(1x3 and 4x5\)"),
    (lambda t: t.matmul(t.ones(2, 3, 4), t.ones(5, 6)), r"\(6x4 and 5x6\)"),
    (lambda t: t.matmul(t.ones(2, 2, 3), t.ones(2, 4, 5)),
     r"Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: "
     r"\[2, 4\]\."),
    (lambda t: t.matmul(t.ones(2, 2, 3), t.ones(3, 3, 4)), "must match the size"),
    (lambda t: t.matmul(t.ones(2, 2, 3), t.ones(2, 3, 4, dtype=t.float64)),
     "expected scalar type Float but found Double"),
    (lambda t: t.matmul(t.tensor(1.), t.ones(3)), "need to be at least 1D, but they are 0D and "
                                                  "1D"),
    (lambda t: t.mm(t.ones(2, 2, dtype=t.bool), t.ones(2, 2, dtype=t.bool)),
     "\"addmm_impl_cpu_\" not implemented for 'Bool'"),
    (lambda t: t.mm(t.ones(3), t.ones(3, 4)), "self must be a matrix"),
    (lambda t: t.mm(t.ones(3, 3), t.ones(3)), "mat2 must be a matrix"),
    (lambda t: t.bmm(t.ones(2, 3), t.ones(3, 4)), "batch1 must be a 3D tensor"),
    (lambda t: t.bmm(t.ones(2, 2, 3), t.ones(3, 3, 4)), r"\[2, 3\] but got: \[3, 3\]"),
    (lambda t: t.mv(t.ones(3), t.ones(3)), "vector \\+ matrix @ vector expected, got 1, 1, 1"),
    (lambda t: t.dot(t.ones(3, 1), t.ones(3)), "1D tensors expected, but got 2D and 1D tensors"),
    (lambda t: t.dot(t.ones(2, dtype=t.bool), t.ones(2, dtype=t.bool)), "not implemented"),
    (lambda t: t.addmm(t.ones(3), t.ones(2, 3), t.ones(3, 4)), "expanded size"),
    (lambda t: t.addmm(t.ones(4), t.ones(2, 3), t.ones(3, 4, dtype=t.float64)),
     "self and mat2 must have the same dtype, but got Float and Double"),
    (lambda t: t.addmv(t.ones(2), t.ones(2, 3), t.ones(3, dtype=t.float64)),
     "addmv input tensors must have the same dtype, but got Float, Float, and Double"),
    (lambda t: t.inner(t.ones(2, 3), t.ones(4)), "inner\\(\\) the last dimension must match"),
    (lambda t: t.outer(t.ones(2, 2), t.ones(3)), "outer: Expected 1-D argument self, but got 2-D"),
    (lambda t: t.tensordot(t.ones(2, 3), t.ones(4, 5), dims=([1], [0])),
     "contracted dimensions need to match, but first has size 3 in dim 1 and second has size 4"),
    (lambda t: t.linalg.cross(t.ones(2, 4), t.ones(2, 4)),
     "linalg.cross: inputs dimension -1 must have length 3. Got 4 and 4"),
    (lambda t: t.trace(t.ones(2, 2, 2)), "trace: expected a matrix, but got tensor with dim 3"),
    (lambda t: t.cdist(t.ones(2, 3), t.ones(2, 4)),
     "X1 and X2 must have the same number of columns. X1: 3 X2: 4"),
    (lambda t: t.cdist(t.ones(3), t.ones(3)), "cdist only supports at least 2D tensors"),
    (lambda t: t.linalg.multi_dot([t.ones(2, 3)]), "expected at least 2 tensors but got 1"),
    (lambda t: t.linalg.matrix_power(t.ones(2, 3), 2), "A must be batches of square matrices"),
])
def test_product_errors(fn, match):
    check_error(fn, match=match)


# ---- factorizations ------------------------------------------------------------------------------
def test_inv_det_slogdet():
    check(lambda t, a: t.linalg.inv(a), shapes=[(2, 3, 3)], grad=True)
    check(lambda t, a: t.inverse(a), shapes=[(4, 4)], grad=True)
    check(lambda t, a: t.linalg.det(a), shapes=[(2, 3, 3)], grad=True)
    check(lambda t, a: a.det(), shapes=[(1, 1)], grad=True)
    check(lambda t, a: t.linalg.slogdet(a), shapes=[(2, 3, 3)], grad=True)
    check(lambda t, a: t.logdet(spd(t, a)), shapes=[(3, 3)], grad=True)
    check(lambda t, a: t.logdet(a), args=[np.array([[-1.0, 0], [0, 2]])], dtypes=F64)


def _cofactors(a):
    """The matrix of cofactors of a square a: d det(A) / dA, defined for singular A too."""
    n = a.shape[0]
    c = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, 0), j, 1)
            c[i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return c


@pytest.mark.parametrize("a", [
    [[1.0, 2, 3], [2, 4, 6], [1, 0, 1]],     # rank 2: the gradient (adjugate^T) is rank 1, not 0
    [[1.0, 2, 3], [2, 4, 6], [3, 6, 9]],     # rank 1: the gradient is exactly zero
    [[0.0, 0], [0, 5]],
], ids=["rank2", "rank1", "2x2"])
def test_det_grad_of_singular_matrix(a):
    # PyTorch's gradient at a singular matrix depends on its BLAS build (all zeros on some): the
    # oracle is the analytic one, d det(A)/dA = cofactor matrix of A.
    a = np.array(a)
    x = ember.tensor(a, requires_grad=True)
    d = ember.linalg.det(x)
    assert d.item() == pytest.approx(0.0, abs=1e-12)
    d.backward()
    np.testing.assert_allclose(x.grad.numpy(), _cofactors(a), atol=1e-10)


def test_solve():
    check(lambda t, a, b: t.linalg.solve(a, b), shapes=[(3, 3), (3,)], grad=True)
    check(lambda t, a, b: t.linalg.solve(a, b), shapes=[(2, 3, 3), (2, 3)], grad=True)
    check(lambda t, a, b: t.linalg.solve(a, b), shapes=[(2, 3, 3), (3, 4)], grad=True)
    check(lambda t, a, b: t.linalg.solve(a, b, left=False), shapes=[(3, 3), (4, 3)], grad=True)
    check(lambda t, a, b: t.linalg.solve_triangular(a, b, upper=True), shapes=[(3, 3), (3, 2)],
          grad=True)
    check(lambda t, a, b: t.linalg.solve_triangular(a, b, upper=False, left=False,
                                                    unitriangular=True),
          shapes=[(3, 3), (2, 3)], grad=True)


def test_cholesky():
    check(lambda t, a: t.linalg.cholesky(spd(t, a)), shapes=[(2, 4, 4)], grad=True)
    check(lambda t, a: t.linalg.cholesky(spd(t, a), upper=True), shapes=[(3, 3)], grad=True)
    check(lambda t, a: t.cholesky(spd(t, a)), shapes=[(3, 3)], dtypes=F64)


def test_qr():
    for shape in [(4, 3), (3, 3), (2, 5, 3)]:
        check(lambda t, a: tuple(x.abs() for x in t.linalg.qr(a)), shapes=[shape], grad=True)
        check(lambda t, a: (lambda q, r: q @ r)(*t.linalg.qr(a)), shapes=[shape], grad=True)
    check(lambda t, a: (lambda q, r: (q @ r, r.abs()))(*t.linalg.qr(a)), shapes=[(3, 5)],
          dtypes=F64, grad=True)
    check(lambda t, a: tuple(x.abs() for x in t.linalg.qr(a, mode="complete")),
          shapes=[(4, 3)])
    check(lambda t, a: t.linalg.qr(a, mode="r").R.abs(), shapes=[(4, 3)])
    check(lambda t, a: t.linalg.qr(a, mode="r").Q, shapes=[(4, 3)])
    check(lambda t, a: tuple(x.abs() for x in t.qr(a, some=False)), shapes=[(4, 3)])


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (3, 3), (2, 4, 3)])
def test_svd(shape):
    def f(t, a):
        u, s, vh = t.linalg.svd(a, full_matrices=False)
        return s, u.abs(), vh.abs(), (u * s.unsqueeze(-2)) @ vh
    check(f, shapes=[shape], grad=True, dtypes=F64)
    check(f, shapes=[shape], dtypes=("float32",))
    check(lambda t, a: t.linalg.svdvals(a), shapes=[shape], grad=True)
    check(lambda t, a: tuple(x.abs() for x in t.linalg.svd(a)), shapes=[shape])   # full
    check(lambda t, a: tuple(x.abs() for x in t.svd(a)), shapes=[shape])


def test_svd_legacy_no_uv():
    check(lambda t, a: t.svd(a, compute_uv=False), shapes=[(4, 3)])


def test_eigh():
    def f(t, a, uplo="L"):
        lam, v = t.linalg.eigh(a + T(t, a), UPLO=uplo)
        return lam, v * v, (v * lam.unsqueeze(-2)) @ T(t, v)
    check(f, shapes=[(2, 4, 4)], grad=True, dtypes=F64)
    check(lambda t, a: f(t, a, "U"), shapes=[(3, 3)], grad=True, dtypes=F64)
    check(lambda t, a: t.linalg.eigvalsh(a), shapes=[(2, 3, 3)], grad=True)
    check(lambda t, a: t.linalg.eigvalsh(a, UPLO="U"), shapes=[(3, 3)])


def test_eig():
    import torch
    a = np.random.default_rng(0).uniform(-1, 1, (2, 4, 4))
    lam, v = ember.linalg.eig(ember.tensor(a))
    assert lam.dtype == ember.complex128 and v.dtype == ember.complex128
    want = torch.linalg.eigvals(torch.from_numpy(a)).numpy()
    key = lambda z: np.sort_complex(np.round(z, 8))  # noqa: E731 - order is not fixed
    np.testing.assert_allclose(key(lam.numpy()), key(want), atol=1e-10)
    # A v = lambda v for each pair
    np.testing.assert_allclose(a @ v.numpy(), v.numpy() * lam.numpy()[..., None, :], atol=1e-10)
    np.testing.assert_allclose(key(ember.linalg.eigvals(ember.tensor(a)).numpy()), key(want),
                               atol=1e-10)
    assert ember.linalg.eig(ember.ones(2, 2)).eigenvalues.dtype == ember.complex64


def test_pinv_rank_lstsq():
    check(lambda t, a: t.linalg.pinv(a), shapes=[(4, 3)], grad=True, dtypes=F64)
    check(lambda t, a: t.linalg.pinv(a), shapes=[(2, 3, 5)])
    check(lambda t, a: t.linalg.pinv(a + T(t, a), hermitian=True), shapes=[(3, 3)], dtypes=F64)
    check(lambda t, a: t.pinverse(a), shapes=[(3, 4)])
    low_rank = np.outer(np.arange(1.0, 5), np.arange(1.0, 4))
    check(lambda t, a: t.linalg.pinv(a), args=[low_rank], dtypes=F64)
    check(lambda t, a: t.linalg.matrix_rank(a), args=[low_rank], dtypes=F64)
    check(lambda t, a: t.linalg.matrix_rank(a), shapes=[(2, 4, 3)])
    check(lambda t, a: t.linalg.matrix_rank(a, atol=1.0, rtol=0.0), shapes=[(4, 3)])
    check(lambda t, a: t.linalg.matrix_rank(a + T(t, a), hermitian=True), shapes=[(3, 3)])
    check(lambda t, a, b: t.linalg.lstsq(a, b).solution, shapes=[(5, 3), (5, 2)])
    check(lambda t, a, b: t.linalg.lstsq(a, b), shapes=[(2, 5, 3), (2, 5, 2)], dtypes=F64)
    check(lambda t, a, b: t.linalg.lstsq(a, b, driver="gelsd"), shapes=[(5, 3), (5, 2)],
          dtypes=F64)


# ---- norms ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda t, a: t.linalg.vector_norm(a),
    lambda t, a: t.linalg.vector_norm(a, 1, dim=1),
    lambda t, a: t.linalg.vector_norm(a, float("inf"), dim=(0, 2), keepdim=True),
    lambda t, a: t.linalg.vector_norm(a, 3.5, dim=-1),
    lambda t, a: t.linalg.vector_norm(a, dtype=t.float64),
    lambda t, a: t.linalg.matrix_norm(a),
    lambda t, a: t.linalg.matrix_norm(a, "nuc"),
    lambda t, a: t.linalg.matrix_norm(a, 2, keepdim=True),
    lambda t, a: t.linalg.matrix_norm(a, -2),
    lambda t, a: t.linalg.matrix_norm(a, 1, dim=(0, 2)),
    lambda t, a: t.linalg.matrix_norm(a, -1),
    lambda t, a: t.linalg.matrix_norm(a, float("inf"), keepdim=True),
    lambda t, a: t.linalg.matrix_norm(a, -float("inf"), dim=(2, 1)),
    lambda t, a: t.linalg.norm(a),
    lambda t, a: t.linalg.norm(a, dim=1),
    lambda t, a: t.linalg.norm(a, dim=(1, 2)),
    lambda t, a: t.linalg.norm(a, 2, dim=(1, 2)),
    lambda t, a: t.linalg.norm(a[0], "fro"),
    lambda t, a: t.linalg.norm(a[0], "nuc"),
    lambda t, a: t.linalg.norm(a[0, 0], 3),
    lambda t, a: t.linalg.cond(a),
])
def test_norms(fn):
    check(fn, shapes=[(2, 3, 3)], grad=True, dtypes=F64)
    check(fn, shapes=[(2, 3, 3)], dtypes=("float32",))


def test_cond_fro():  # torch's own backward of this one trips over an in-place op
    check(lambda t, a: t.linalg.cond(a, "fro"), shapes=[(2, 3, 3)])


# ---- factorization errors ------------------------------------------------------------------------
@pytest.mark.parametrize("fn,match", [
    (lambda t: t.linalg.inv(t.zeros(3, 3)), "linalg.inv: The diagonal element 1 is zero, the "
                                            "inversion could not be completed because the input "
                                            "matrix is singular."),
    (lambda t: t.linalg.inv(t.stack([t.eye(2), t.tensor([[1., 2.], [2., 4.]])])),
     r"linalg.inv: \(Batch element 1\): The diagonal element 2 is zero"),
    (lambda t: t.linalg.inv(t.zeros(3, 2)), "linalg.inv: A must be batches of square matrices, "
                                            "but they are 3 by 2 matrices"),
    (lambda t: t.linalg.inv(t.zeros(3)), "must have at least 2 dimensions"),
    (lambda t: t.linalg.inv(t.eye(3, dtype=t.int64)), "Expected a floating point or complex "
                                                      "tensor as input. Got Long"),
    (lambda t: t.linalg.inv(t.eye(3, dtype=t.half)), None),
    (lambda t: t.linalg.det(t.eye(3, dtype=t.int64)), "linalg.det: Expected a floating point"),
    (lambda t: t.linalg.det(t.ones(3, 3, dtype=t.half)), None),
    (lambda t: t.linalg.cholesky(-t.eye(3)), r"the leading minor of order 1 is not "
                                             r"positive-definite\)\."),
    (lambda t: t.linalg.cholesky(t.stack([t.eye(3), -t.eye(3)])), r"\(Batch element 1\)"),
    (lambda t: t.linalg.cholesky(t.tensor([[1., 5.], [2., 1.]])), "order 2"),
    (lambda t: t.linalg.cholesky(t.ones(2, 2, dtype=t.half)), "\"cholesky_cpu\" not implemented "
                                                              "for 'Half'"),
    (lambda t: t.linalg.solve(t.zeros(3, 3), t.ones(3)), "torch.linalg.solve: The solver failed "
                                                         "because the input matrix is singular."),
    (lambda t: t.linalg.solve(t.eye(3), t.ones(4)), r"Incompatible shapes of A and B for the "
                                                    r"equation AX = B \(3x3 and 4x1\)"),
    (lambda t: t.linalg.solve(t.eye(2), t.ones(3), left=False), r"XA = B \(2x2 and 3x1\)"),
    (lambda t: t.linalg.solve(t.eye(2), t.ones(2, dtype=t.float64)), "Expected A and B to have "
                                                                     "the same dtype"),
    (lambda t: t.linalg.eigh(t.ones(2, 3)), "linalg.eigh: A must be batches of square matrices"),
    (lambda t: t.linalg.eigh(t.ones(2, 2), UPLO="X"), "Expected UPLO argument to be 'L' or 'U', "
                                                      "but got X"),
    (lambda t: t.linalg.eigh(t.ones(2, 2, dtype=t.int64)), None),
    (lambda t: t.linalg.qr(t.ones(2, 3), mode="bad"), "qr received unrecognized mode 'bad'"),
    (lambda t: t.linalg.svd(t.ones(2, 3, dtype=t.half)), None),
    (lambda t: t.linalg.svd(t.ones(2, 2, dtype=t.int64)), "Got Long"),
    (lambda t: t.linalg.matrix_rank(t.ones(2, 2, dtype=t.int64)), None),
    (lambda t: t.linalg.pinv(t.ones(2, 3, dtype=t.int64)), r"linalg.pinv\(Long\{\[2, 3\]\}\)"),
    (lambda t: t.linalg.matrix_norm(t.ones(2, 2), ord=3), "linalg.matrix_norm: Order 3 not "
                                                          "supported."),
    (lambda t: t.linalg.matrix_norm(t.ones(2)), "must have at least 2 dimensions"),
    (lambda t: t.linalg.norm(t.ones(3, 3, 3), ord=2), "If dim is not specified but ord is, the "
                                                      "input must be 1D or 2D. Got 3D."),
    (lambda t: t.linalg.norm(t.ones(3), ord="fro"), "at least 2 dimensions"),
    (lambda t: t.linalg.vector_norm(t.ones(3), ord="fro"), "must be Number, not str"),
    (lambda t: t.linalg.vector_norm(t.ones(2, dtype=t.int64)), "Got Long"),
    (lambda t: t.linalg.matrix_power(t.zeros(2, 2), -1), "linalg.inv: The diagonal element 1"),
])
def test_factorization_errors(fn, match):
    import torch
    try:
        fn(torch)
    except torch.linalg.LinAlgError:  # torch's is a RuntimeError subclass; so is ember's
        check_error(fn, exc_types=ember.linalg.LinAlgError, match=match)
        return
    except Exception:
        pass
    check_error(fn, match=match)


def test_linalg_error_type():
    assert issubclass(ember.linalg.LinAlgError, RuntimeError)
    with pytest.raises(ember.linalg.LinAlgError):
        ember.linalg.inv(ember.zeros(2, 2))


def test_qr_backward_mode_r_raises():
    a = ember.ones(3, 2).requires_grad_()
    q, r = ember.linalg.qr(a, mode="r")
    with pytest.raises(RuntimeError, match="mode='r'"):
        r.sum().backward()


def test_matmul_is_bound_everywhere():
    a, b = ember.ones(2, 3), ember.ones(3, 4)
    assert ember.linalg.matmul is ember.matmul
    assert tuple((a @ b).shape) == (2, 4) and tuple(a.matmul(b).shape) == (2, 4)
    assert not hasattr(ember, "linalg_inv")  # one public name per op: ember.linalg.inv


def test_double_backward_matmul():
    check(lambda t, a, b: t.autograd.grad((a @ b).pow(2).sum(), a, create_graph=True)[0]
          if t is ember else __import__("torch").autograd.grad((a @ b).pow(2).sum(), a,
                                                               create_graph=True)[0],
          shapes=[(2, 3), (3, 4)], grad=True)


def test_meta_shapes():
    m = ember.empty(2, 3, 4, device="meta")
    n = ember.empty(4, 5, device="meta")
    assert tuple(ember.matmul(m, n).shape) == (2, 3, 5)
    assert tuple(ember.einsum("bij,jk->bik", m, n).shape) == (2, 3, 5)
    sq = ember.empty(2, 3, 3, device="meta")
    assert tuple(ember.linalg.det(sq).shape) == (2,)
    u, s, vh = ember.linalg.svd(m, full_matrices=False)
    assert (tuple(u.shape), tuple(s.shape), tuple(vh.shape)) == ((2, 3, 3), (2, 3), (2, 3, 4))


def test_cross_default_dim_and_chain_matmul():
    with pytest.warns(UserWarning, match="without specifying the dim arg is deprecated"):
        check(lambda t, a, b: t.cross(a, b), shapes=[(4, 3, 2), (4, 3, 2)])
    check(lambda t, a, b, c: t.chain_matmul(a, b, c), shapes=[(2, 3), (3, 4), (4, 2)])
    check(lambda t, a: t.linalg.diagonal(a), shapes=[(2, 3, 4)])
    check_error(lambda t: t.cross(t.ones(4, 2), t.ones(4, 2)), match="no dimension of size 3")


@pytest.mark.parametrize("fn,shapes", [
    (lambda t, a, b: t.matmul(a, b), [(2, 3), (3, 4)]),
    (lambda t, a, b: t.matmul(a, b), [(3,), (3,)]),
    (lambda t, a, b: t.einsum("ij,kj->ik", a, b), [(2, 3), (4, 3)]),
    (lambda t, a, b: t.linalg.inv(a) @ b, [(3, 3), (3, 2)]),
    (lambda t, a, b: t.linalg.solve(a, b), [(3, 3), (3, 2)]),
])
def test_complex_grads(fn, shapes):
    import torch
    rng = np.random.default_rng(0)
    arrs = [rng.uniform(-1, 1, s) + 1j * rng.uniform(-1, 1, s) for s in shapes]
    ein = [ember.tensor(a).requires_grad_() for a in arrs]
    tin = [torch.tensor(a, requires_grad=True) for a in arrs]
    eo, to = fn(ember, *ein), fn(torch, *tin)
    w = rng.uniform(-1, 1, tuple(to.shape)) + 1j * rng.uniform(-1, 1, tuple(to.shape))
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), atol=1e-10)
    ge = ember.autograd.grad(eo, ein, ember.tensor(w))
    gt = torch.autograd.grad(to, tin, torch.tensor(w))
    for x, y in zip(ge, gt):
        np.testing.assert_allclose(x.numpy(), y.numpy(), atol=1e-10)
