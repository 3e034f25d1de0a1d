"""The misc family of the cuda backend (creation, movement, special functions, einsum) against
the CPU on cases the op database's samples miss: strides, dtypes, broadcasting, edge values,
errors. The same script runs on the fake device (Triton's interpreter, in a subprocess so the
environment takes effect before triton is imported) and, when there is one, on the GPU; it also
checks that none of these ops ran on host copies."""
from cuda_script import run_script

SCRIPT = r"""
import numpy as np, ember
from ember._device import get_backend
be = get_backend("cuda")
rng = np.random.default_rng(0)

def close(e, g, tol=1e-5):
    g = g.detach().cpu()
    assert e.dtype == g.dtype, (e.dtype, g.dtype)
    assert tuple(e.shape) == tuple(g.shape), (e.shape, g.shape)
    a, b = e.numpy(), g.numpy()
    if a.dtype.kind in "fc" or a.dtype.name == "bfloat16":
        np.testing.assert_allclose(b.astype(np.float64), a.astype(np.float64), rtol=tol,
                                   atol=tol, equal_nan=True)
    else:
        assert np.array_equal(a, b), (a, b)

def same(f, *xs, tol=1e-5):
    e = f(*xs)
    g = f(*[x.cuda() if isinstance(x, ember.Tensor) else
            [t.cuda() for t in x] if isinstance(x, list) else x for x in xs])
    close(e, g, tol)

def raises(f, *xs):
    try:
        f(*xs)
    except Exception as exc:
        et = type(exc)
    else:
        raise AssertionError("the CPU did not raise")
    try:
        f(*[x.cuda() if isinstance(x, ember.Tensor) else
            [t.cuda() for t in x] if isinstance(x, list) else x for x in xs])
    except et:
        return
    raise AssertionError(f"cuda did not raise {et}")

def T(*shape, dtype="float32"):
    return ember.tensor(rng.standard_normal(shape).astype(dtype))

a, b = T(3, 4), T(2, 4)
t = T(4, 5).t()                      # non-contiguous
i = ember.tensor(rng.integers(-9, 9, (3, 4)))

# cat: contiguous rows (memcpy), columns (strided), promotion, non-contiguous, legacy empties
same(lambda x, y: ember.cat([x, y]), a, b)
same(lambda x, y: ember.cat([x, y, x], 1), a, T(3, 2))
same(lambda x, y: ember.cat([x, y], -1), a, i)
same(lambda x, y: ember.cat([x, y], 0), t, a[:, :4])
same(lambda x, y: ember.cat([x, ember.empty(0, device=x.device), y]), a, b)
same(lambda x: ember.cat([x[:0], x[:0]]), a)
same(lambda x, y: ember.stack([x, y], 1), a, a * 2)
same(lambda x: ember.cat([x.half(), x.half()], 1), a)
raises(lambda x, y: ember.cat([x, y], 1), a, b)
raises(lambda x, y: ember.cat([x.sum(), y.sum()]), a, b)
raises(lambda x: ember.cat([x], 2), a)
big = T(1100, 300)
same(lambda x: ember.cat([x, x[:5]], 0), big)

# flip / roll / repeat
same(lambda x: x.flip(0), a)
same(lambda x: x.flip([0, 1]), t)
same(lambda x: x.flip(-1), i)
same(lambda x: x.flip(0), a[:0])
same(lambda x: x.flip([0, 2]), T(2, 3, 4))
raises(lambda x: x.flip([0, 0]), a)
for shifts, dims in ((1, 0), (-2, 1), (7, 1), ([1, 2], [0, 1]), ([1, 1], [0, 0]), (5, ())):
    same(lambda x: x.roll(shifts, dims), a)
    same(lambda x: x.roll(shifts, dims), t)
same(lambda x: x.roll(3), i)
raises(lambda x: x.roll([1, 2], [0]), a)
same(lambda x: x.repeat(2, 3), a)
same(lambda x: x.repeat(2, 1, 2), t)
same(lambda x: x.repeat(0, 2), a)
same(lambda x: x.sum().repeat(3), a)
same(lambda x: x.repeat(2, 2), i)
raises(lambda x: x.repeat(2), a)

# diagonals, eye
for k in (-2, 0, 1, 5):
    same(lambda x: ember.diag(x[0], k), a)
    same(lambda x: ember.diag(x, k), a)
    same(lambda x: ember.diag(x, k), t)
raises(lambda x: ember.diag(x.reshape(2, 3, 2)), a)
same(lambda x: ember.diag_embed(x), a)
same(lambda x: ember.diag_embed(x, 1, 0, 2), a)
same(lambda x: ember.diag_embed(x, -2, -1, 0), t)
raises(lambda x: ember.diag_embed(x, 0, 1, 1), a)
for args, kw in (((3,), {}), ((3, 5), {}), ((4, 2), {"dtype": ember.int32}),
                 ((0,), {}), ((2,), {"dtype": ember.bool}), ((3,), {"dtype": ember.float16})):
    close(ember.eye(*args, **kw), ember.eye(*args, device="cuda", **kw))

# linspace / logspace
for args, kw in (((0.0, 1.0, 5), {}), ((-3, 7, 3000), {}), ((2.0, 2.0, 1), {}),
                 ((0, 10, 0), {}), ((0, 10, 7), {"dtype": ember.int64}),
                 ((-1.5, 2.5, 11), {"dtype": ember.float16}),
                 ((0.1, 0.7, 13), {"dtype": ember.float64})):
    close(ember.linspace(*args, **kw), ember.linspace(*args, device="cuda", **kw), 1e-6)
for args, kw in (((0.0, 2.0, 4), {}), ((-2, 3, 9), {"base": 2.0}),
                 ((0.0, 1.0, 6), {"dtype": ember.float64, "base": 3.0})):
    close(ember.logspace(*args, **kw), ember.logspace(*args, device="cuda", **kw), 1e-6)

# nan_to_num, angle, conj_physical (real), linalg_cross
v = np.array([1.0, np.nan, np.inf, -np.inf, -2.5, 0.0])
for dt in ("float16", "float32", "float64", "bfloat16"):
    x = ember.tensor(v).to(getattr(ember, dt))
    same(lambda y: y.nan_to_num(), x)
    same(lambda y: y.nan_to_num(1.0, 2.0, -3.0), x)
    same(lambda y: y.angle(), x)
same(lambda y: y.nan_to_num(), i)
same(lambda y: y.angle(), i)
same(lambda y: y.nan_to_num(posinf=5.0), ember.tensor(v).reshape(2, 3).t())
same(lambda y: ember.conj_physical(y), t)
same(lambda x, y: ember.linalg.cross(x, y), T(2, 3), T(1, 3))
same(lambda x, y: ember.linalg.cross(x, y, dim=0), T(3, 4), T(3, 1))
same(lambda x, y: ember.linalg.cross(x, y), T(4, 3).t().t(), T(3, 4).t())
same(lambda x, y: ember.linalg.cross(x, y), i[:, :3], i[:, 1:])
raises(lambda x, y: ember.linalg.cross(x, y), T(2, 4), T(2, 4))

# einsum: matmul forms, diagonals, sums, transposes, broadcasting, three operands
for eq, shapes in (("ij,jk->ik", [(3, 4), (4, 2)]), ("ii->i", [(4, 4)]), ("ii", [(4, 4)]),
                   ("ij->ji", [(3, 4)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
                   ("...ij,...jk", [(2, 3, 4), (1, 4, 5)]), ("i,j->ij", [(3,), (4,)]),
                   ("ijk->", [(2, 3, 4)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
                   ("ij,ij->i", [(3, 4), (3, 4)]), ("iij,jk->ik", [(3, 3, 4), (4, 2)]),
                   ("ij->ij", [(3, 4)]), ("i,i->", [(5,), (5,)])):
    xs = [T(*s) for s in shapes]
    same(lambda *ys: ember.einsum(eq, *ys), *xs, tol=1e-4)
raises(lambda x, y: ember.einsum("ij,jk->ik", x, y), T(3, 4), T(3, 4))
x = T(3, 4).cuda().requires_grad_()
ember.einsum("ij,kj->ik", x, x).sum().backward()
close((ember.ones(3, 3) @ x.detach().cpu()) * 2, x.grad, 1e-4)

# digamma / polygamma: poles, signed zeros, negatives (reflection), large values
v = np.array([0.0, -0.0, 1e-3, 0.5, 1.0, 3.3, 9.99, 10.0, 25.0, 1e18, np.inf, -np.inf, np.nan,
              -1.0, -2.0, -0.5, -1.3, -7.7, -123.4])
for dt in ("float32", "float64"):
    x = ember.tensor(v.astype(dt))
    same(lambda y: y.digamma(), x, tol=1e-4 if dt == "float32" else 1e-9)
    for n in (1, 2, 3, 6):
        same(lambda y: y.polygamma(n), x, tol=1e-4 if dt == "float32" else 1e-9)
same(lambda y: y.digamma(), ember.tensor(v).half(), tol=2e-3)
same(lambda y: y.digamma(), i)

assert not be.fallback_ops, be.fallback_ops
print("ok")
"""


def test_misc_ops_on_cuda():
    run_script(SCRIPT, "test_cuda_misc", timeout=900)
