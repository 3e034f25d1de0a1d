"""The cuda index/gather/scatter kernels against ember's CPU ops: strides, broadcasting, negative
(wrapped or refused, as the op does) and out-of-range indices, dtypes, sizes over one block, and
that none of them ran on host copies. Runs on the GPU when there is one, else on the fake device
(Triton's interpreter) in a subprocess, so the environment takes effect before triton is imported.
"""
from cuda_script import run_script

SCRIPT = r"""
import numpy as np, ember
from ember._device import get_backend
rng = np.random.default_rng(0)
be = get_backend("cuda")
before = dict(be.fallback_ops)

def cu(a):
    if isinstance(a, ember.Tensor):
        return a.cuda()
    if isinstance(a, (list, tuple)):
        return type(a)(cu(e) for e in a)
    return a

def same(e, g, what):
    if isinstance(e, (tuple, list)):
        for a, b in zip(e, g):
            same(a, b, what)
        return
    g = g.cpu()
    assert g.dtype == e.dtype and tuple(g.shape) == tuple(e.shape), (what, g, e)
    a, b = e.float().numpy() if e.dtype == ember.bfloat16 else e.numpy(), \
        g.float().numpy() if g.dtype == ember.bfloat16 else g.numpy()
    if a.dtype.kind == "f":
        tol = 1e-2 if e.dtype in (ember.float16, ember.bfloat16) else 1e-5
        assert np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True), (what, a, b)
    else:
        assert np.array_equal(a, b), (what, a, b)

def check(what, f, *args):
    try:
        e = f(*args)
    except Exception as exc:
        try:
            f(*cu(args))
        except type(exc):
            return
        raise AssertionError(f"{what}: cuda did not raise {type(exc).__name__}")
    same(e, f(*cu(args)), what)

def randn(*s, dtype="float32"):
    return ember.tensor(rng.standard_normal(s).astype("float32")).to(getattr(ember, dtype))

def ints(lo, hi, *s, dtype=ember.int64):
    return ember.tensor(rng.integers(lo, hi, s)).to(dtype)

x = randn(4, 5, 6)
# ---- gather / take / index_select ------------------------------------------------------------
for d in (0, 1, 2, -1):
    check(f"gather d{d}", lambda a, i: a.gather(d, i), x, ints(0, x.shape[d], 4, 5, 6))
check("gather negative", lambda a, i: a.gather(1, i), x, ints(-5, 0, 4, 5, 6))  # PyTorch: error
check("gather smaller index", lambda a, i: a.gather(1, i), x, ints(0, 5, 2, 7, 3))
check("gather strided", lambda a, i: a.transpose(0, 2).gather(0, i), x, ints(0, 6, 3, 5, 4))
check("gather int32 index", lambda a, i: a.gather(2, i), x, ints(0, 6, 4, 5, 2, dtype=ember.int32))
check("gather big", lambda a, i: a.gather(0, i), randn(300, 17), ints(0, 300, 500, 17))
check("gather 0-dim", lambda a, i: a.gather(0, i), randn(), ints(0, 1))
for dt in ("float16", "bfloat16", "float64", "int32", "bool"):
    check(f"gather {dt}", lambda a, i: a.gather(1, i), randn(3, 4, dtype=dt), ints(0, 4, 3, 4))
check("gather oob", lambda a, i: a.gather(1, i), x, ints(0, 6, 4, 5, 6))
check("gather too small self", lambda a, i: a.gather(1, i), x, ints(0, 4, 5, 5, 6))
check("gather float index", lambda a, i: a.gather(1, i), x, randn(4, 5, 6))
for d in (0, 1, -1):
    check(f"index_select d{d}", lambda a, i: a.index_select(d, i), x, ints(0, x.shape[d], 7))
check("index_select strided", lambda a, i: a.permute(2, 0, 1).index_select(1, i), x,
      ints(0, 4, 9, dtype=ember.int32))
check("index_select big", lambda a, i: a.index_select(0, i), randn(2000, 3), ints(0, 2000, 3000))
check("index_select negative", lambda a, i: a.index_select(0, i), x, ember.tensor([-1, 0]))
check("index_select oob", lambda a, i: a.index_select(0, i), x, ember.tensor([0, 4]))
check("index_select 2-d index", lambda a, i: a.index_select(0, i), x, ints(0, 4, 2, 2))
check("take", lambda a, i: a.take(i), x, ints(-120, 120, 3, 7))
check("take strided", lambda a, i: a.transpose(0, 1).take(i), x, ints(-120, 120, 50))
check("take oob", lambda a, i: a.take(i), x, ember.tensor([120]))

# ---- scatter family --------------------------------------------------------------------------
y = randn(5, 6)
idx = ints(0, 5, 4, 6)
check("scatter src", lambda a, i, s: a.scatter(0, i, s), y, ember.tensor([[0, 1, 2, 3, 4, 0]]),
      randn(2, 6))
check("scatter value", lambda a, i: a.scatter(1, i, 2.5), y, ints(0, 6, 5, 2))
check("scatter negative", lambda a, i: a.scatter(1, i, 2.5), y, ints(-6, 0, 5, 2))
check("scatter reduce add", lambda a, i, s: a.scatter(0, i, s, reduce="add"), y, idx,
      randn(4, 6))
check("scatter_add dups", lambda a, i, s: a.scatter_add(0, i, s), y, idx, randn(4, 7))
check("scatter_add big", lambda a, i, s: a.scatter_add(0, i, s), randn(50, 20),
      ints(0, 50, 400, 20), randn(400, 20))
for dt in ("float16", "bfloat16", "float64", "int8", "int32", "int64"):
    check(f"scatter_add {dt}", lambda a, i, s: a.scatter_add(0, i, s), randn(5, 6, dtype=dt), idx,
          randn(4, 6, dtype=dt) * 3)
check("scatter_add bool", lambda a, i, s: a.scatter_add(0, i, s), randn(5, 6) > 0, idx,
      randn(4, 6) > 0)
perm = ember.tensor(np.argsort(rng.random((5, 6)), 1)[:, :3].copy())  # no duplicates: a
check("scatter_ in place", lambda a, i, s: a.clone().scatter_(1, i, s), y, perm,  # plain store
      randn(5, 3))
check("scatter oob", lambda a, i, s: a.scatter_add(0, i, s), y, idx + 1, randn(4, 6))
check("scatter int32 index", lambda a, i, s: a.scatter(0, i, s), y, idx.int(), randn(4, 6))
check("scatter dtype mismatch", lambda a, i, s: a.scatter(0, i, s), y, idx, randn(4, 6).double())
check("index_add dups", lambda a, i, s: a.index_add(0, i, s), y, ember.tensor([0, 4, 0, 4]),
      randn(4, 6))
check("index_add negative", lambda a, i, s: a.index_add(0, i, s), y, ember.tensor([0, -1]),
      randn(2, 6))
check("index_add alpha", lambda a, i, s: a.index_add(1, i, s, alpha=-2.5), y,
      ember.tensor([5, 5, 1]), randn(5, 3))
check("index_add int", lambda a, i, s: a.index_add(0, i, s, alpha=3), ints(0, 9, 5, 6),
      ember.tensor([1, 1]), ints(0, 9, 2, 6))
check("index_add fp16", lambda a, i, s: a.index_add(0, i, s), randn(5, 6, dtype="float16"),
      ember.tensor([1, 1, 2]), randn(3, 6, dtype="float16"))
check("index_add oob", lambda a, i, s: a.index_add(0, i, s), y, ember.tensor([5]), randn(1, 6))
check("index_add count", lambda a, i, s: a.index_add(0, i, s), y, ember.tensor([1, 2]),
      randn(1, 6))
check("index_copy", lambda a, i, s: a.index_copy(1, i, s), y, ember.tensor([4, 0, 3]),
      randn(5, 3))
check("index_copy negative", lambda a, i, s: a.index_copy(1, i, s), y, ember.tensor([4, -3]),
      randn(5, 2))
check("index_copy_ strided", lambda a, i, s: a.clone().t().index_copy_(0, i, s), y,
      ember.tensor([2, 3]), randn(2, 5))
check("index_fill", lambda a, i: a.index_fill(0, i, -7.0), y, ember.tensor([0, 3, -1]))
check("index_fill tensor", lambda a, i, v: a.index_fill(1, i, v), ints(0, 5, 5, 6),
      ember.tensor([2]), ember.tensor(9))
check("index_fill bool", lambda a, i: a.index_fill(1, i, True), randn(3, 4) > 0,
      ember.tensor([0, 3]))
check("put", lambda a, i, s: a.put(i, s), y, ember.tensor([[0, -2], [7, 29]]), randn(2, 2))
check("put accumulate", lambda a, i, s: a.put(i, s, accumulate=True), y,
      ember.tensor([3, 3, 3, -27]), randn(4))
check("put oob", lambda a, i, s: a.put(i, s), y, ember.tensor([30]), randn(1))

# ---- advanced indexing -----------------------------------------------------------------------
z = randn(4, 5, 6, 3)
i4, i5, i6 = ints(-4, 4, 2, 3), ints(-5, 5, 3), ints(0, 6, 2, 1)
for name, f in [("x[i]", lambda a, i, j, k: a[i]), ("x[:, j]", lambda a, i, j, k: a[:, j]),
                ("x[i, j]", lambda a, i, j, k: a[i, j]),
                ("x[:, j, k]", lambda a, i, j, k: a[:, j, k]),
                ("x[i, :, k] (separated)", lambda a, i, j, k: a[i, :, k]),
                ("x[..., k, 1]", lambda a, i, j, k: a[..., k.reshape(-1), 1]),
                ("x.t()[j]", lambda a, i, j, k: a.transpose(0, 1)[j]),
                ("x[i][:, j]", lambda a, i, j, k: a[i][:, :, j])]:
    check(name, f, z, i4, i5, i6)
m = randn(4, 5) > 0
check("x[mask]", lambda a, mm: a[mm], z, m)
check("x[:, mask1]", lambda a, mm: a[:, mm], z, m[0])
check("x[mask, idx]", lambda a, mm, j: a[mm, j], z, m, ember.tensor([1]))
check("x[empty]", lambda a, i: a[i], z, ember.tensor([], dtype=ember.int64))
check("x[all false]", lambda a, mm: a[mm], z, m & False)
check("x[oob]", lambda a, i: a[i], z, ember.tensor([4]))
check("x[-oob]", lambda a, i: a[:, i], z, ember.tensor([-6]))
check("x[bad mask]", lambda a, mm: a[mm], z, randn(3, 5) > 0)
check("x[i, j] no broadcast", lambda a, i, j: a[i, j], z, ember.tensor([0, 1]),
      ember.tensor([1, 2, 3]))
check("x[big]", lambda a, i: a[i], randn(3000, 2), ints(-3000, 3000, 2500))
for dt in ("float16", "int8", "bool", "float64"):
    check(f"x[i] {dt}", lambda a, i: a[i], randn(5, 3, dtype=dt), ints(0, 5, 4))

def setitem(a, key, v, acc=False):
    a = a.clone()
    if acc:
        a.index_put_(key, v, accumulate=True)
    else:
        a[key] = v
    return a

check("x[i] = v", lambda a, i, v: setitem(a, (i,), v), z, ember.tensor([3, 0]), randn(2, 5, 6, 3))
check("x[:, j] = s", lambda a, j: setitem(a, (slice(None), j), 1.5), z, ember.tensor([-1, 2]))
check("x[mask] = 0", lambda a, mm: setitem(a, mm, 0.0), z, m)
check("x[i, :, k] = v bcast", lambda a, i, k, v: setitem(a, (i, slice(None), k), v), z,
      ember.tensor([1, 2]), ember.tensor([0, 5]), randn(5, 3))
check("accumulate dups", lambda a, i, v: setitem(a, (i,), v, True), y, ember.tensor([1, 1, -4, 1]),
      randn(4, 6))
check("accumulate 2 idx", lambda a, i, j, v: setitem(a, (i, j), v, True), y,
      ember.tensor([1, 1, 1]), ember.tensor([2, 2, 0]), randn(3))
check("accumulate fp16", lambda a, i, v: setitem(a, (i,), v, True), randn(5, 6, dtype="float16"),
      ember.tensor([1, 1]), randn(2, 6, dtype="float16"))
check("accumulate int8", lambda a, i, v: setitem(a, (i,), v, True), ints(0, 9, 5, 6,
      dtype=ember.int8), ember.tensor([1, 1]), ints(0, 9, 2, 6, dtype=ember.int8))
check("accumulate bool", lambda a, i, v: setitem(a, (i,), v, True), randn(5, 6) > 1,
      ember.tensor([1, 1]), randn(2, 6) > 0)
check("index_put functional", lambda a, i, v: a.index_put((i,), v, True), y,
      ember.tensor([0, 0]), randn(6))
check("setitem oob", lambda a, i, v: setitem(a, (i,), v), y, ember.tensor([5]), randn(6))
check("setitem shape", lambda a, i, v: setitem(a, (i,), v), y, ember.tensor([1]), randn(5))
check("setitem dtype", lambda a, i, v: a.index_put_((i,), v), y, ember.tensor([1]),
      randn(6).double())

def view_put(a, i, v, acc):  # writes through a strided view, the base sees it
    a = a.clone()
    a.t().index_put_((i,), v, accumulate=acc)
    return a
for acc in (False, True):
    check(f"view index_put_ acc={acc}", view_put, y, ember.tensor([1, 4]), randn(2, 5), acc)
    check(f"view index_put_ fp16 acc={acc}", view_put, randn(5, 6, dtype="float16"),
          ember.tensor([1, 1 if acc else 3]), randn(2, 5, dtype="float16"), acc)

# ---- masks -----------------------------------------------------------------------------------
for s in [(7,), (3, 4), (2, 3, 4), (2, 1, 3, 1, 2, 2, 3), (4100,), ()]:
    v = randn(*s)
    check(f"nonzero {s}", lambda a: (a > 0.3).nonzero(), v)
    check(f"nonzero float {s}", lambda a: (a * (a > 0)).nonzero(), v)
check("nonzero strided", lambda a: a.t().nonzero(), ints(0, 2, 40, 50))
check("nonzero empty", lambda a: a.nonzero(), randn(0, 3))
check("nonzero nan", lambda a: a.nonzero(), ember.tensor([0.0, float("nan"), 0.0, -0.0, 1.0]))
check("nonzero as_tuple", lambda a: a.nonzero(as_tuple=True), ints(0, 2, 5, 6))
check("masked_select", lambda a, mm: a.masked_select(mm), z[:, :, 0, 0], m)
check("masked_select bcast", lambda a, mm: a.masked_select(mm), randn(4, 1), randn(3) > 0)
check("masked_select big", lambda a, mm: a.masked_select(mm), randn(5000), randn(5000) > 0)
check("masked_select bad", lambda a, mm: a.masked_select(mm), y, y)
check("masked_scatter", lambda a, mm, s: a.masked_scatter(mm, s), y, randn(6) > 0, randn(40))
check("masked_scatter big", lambda a, mm, s: a.masked_scatter(mm, s), randn(3000),
      randn(3000) > 0, randn(3000))
check("masked_scatter short", lambda a, mm, s: a.masked_scatter(mm, s), y, randn(6) > -9,
      randn(20))

# ---- one_hot, *_scatter ----------------------------------------------------------------------
F = ember.nn.functional
check("one_hot", lambda a: F.one_hot(a), ints(0, 7, 3, 4))
check("one_hot n", lambda a: F.one_hot(a, 9), ints(0, 7, 5))
check("one_hot neg", lambda a: F.one_hot(a), ember.tensor([0, -1]))
check("one_hot big", lambda a: F.one_hot(a, 3), ember.tensor([0, 3]))
check("one_hot empty", lambda a: F.one_hot(a), ember.tensor([], dtype=ember.int64))
check("one_hot int32", lambda a: F.one_hot(a), ember.tensor([0, 1], dtype=ember.int32))
check("select_scatter", lambda a, s: a.select_scatter(s, 1, -2), y, randn(5))
check("select_scatter oob", lambda a, s: a.select_scatter(s, 1, 6), y, randn(5))
check("select_scatter shape", lambda a, s: a.select_scatter(s, 1, 0), y, randn(4))
check("diagonal_scatter", lambda a, s: a.diagonal_scatter(s, 1), y, randn(5))
check("diagonal_scatter 3d", lambda a, s: a.diagonal_scatter(s, -1, 0, 2), z, randn(5, 3, 3))
check("as_strided_scatter", lambda a, s: a.as_strided_scatter(s, (2, 3), (6, 2), 1), y,
      randn(2, 3))
check("as_strided_scatter dtype", lambda a, s: a.as_strided_scatter(s, (2,), (1,)), y,
      randn(2).double())

from ember._ops import OPS
INDEX_FAMILY = tuple("ember.cuda.kernels." + m for m in
                     ("indexing", "scatter", "nn", "joining", "sorting", "pool"))
mine = {q for q, o in OPS.items()   # hand-written kernels of these families
        if getattr(o.kernels.get("cuda"), "__module__", "") in INDEX_FAMILY}
host = {q for q, n in be.fallback_ops.items() if n != before.get(q, 0) and q in mine}
assert not host, f"ran on host copies: {host}"
print("OK")
"""


def test_index_ops_on_cuda():
    run_script(SCRIPT, "test_cuda_index", timeout=900)
