"""mode, quantile/nanquantile and the unique family on cuda (compositions of GPU ops) match the
CPU exactly: interpolation modes (nearest: half to even), NaN rows, mode's ties and NaNs, unique's
NaNs/inverse/counts/dims, empty inputs, errors; and none of them runs on host copies. On a GPU
in-process, else on the fake device (a subprocess: the environment must be set before triton is
imported)."""
from cuda_script import run_script

SCRIPT = r"""
import math
import numpy as np, ember
from ember._device import get_backend
be = get_backend("cuda")
rng = np.random.default_rng(0)
nan = math.nan

def T(a, dt=None):
    return ember.tensor(np.asarray(a, dtype=dt))

def same(a, b, k):
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    assert len(a) == len(b), k
    for u, v in zip(a, b):
        v = v.cpu()
        assert u.dtype == v.dtype and tuple(u.shape) == tuple(v.shape), (k, u, v)
        un = u.float().numpy() if u.dtype in (ember.float16, ember.bfloat16) else u.numpy()
        vn = v.float().numpy() if v.dtype in (ember.float16, ember.bfloat16) else v.numpy()
        assert np.array_equal(un, vn, equal_nan=un.dtype.kind == "f"), (k, un, vn)

def check(k, f, *xs):
    before = dict(be.fallback_ops)
    try:
        want = f(*xs)
    except Exception as exc:
        try:
            f(*[x.cuda() if isinstance(x, ember.Tensor) else x for x in xs])
        except type(exc):
            return
        raise AssertionError((k, "cuda did not raise", type(exc)))
    got = f(*[x.cuda() if isinstance(x, ember.Tensor) else x for x in xs])
    same(want, got, k)
    host = {q for q, n in be.fallback_ops.items() if n != before.get(q, 0)}
    assert not host, (k, host)

# quantile / nanquantile: every interpolation; q scalar, 0-d and 1-d; dims, keepdim; NaN rows
x = rng.standard_normal((3, 5)).astype("float32")
x[1, 2] = nan
xn = T(x)
xd = T(rng.standard_normal((4, 6)))                      # float64
q1 = T([0.0, 0.125, 0.375, 0.5, 0.9, 1.0], "float32")   # 0.125/0.375 of 5: ranks .5/1.5
for interp in ("linear", "lower", "higher", "midpoint", "nearest"):
    for name in ("quantile", "nanquantile"):
        fn = getattr(ember, name)
        check((name, interp, 1), lambda t, q: fn(t, q, 1, interpolation=interp), xn, q1)
        check((name, interp, 2), lambda t: fn(t, 0.375, 0, True, interpolation=interp), xn)
        check((name, interp, 3), lambda t: fn(t, 0.3, interpolation=interp), xd)
        check((name, interp, 4), lambda t, q: fn(t, q, -1, True, interpolation=interp), xd,
              T([0.5, 0.25]))
check("q 0-d", lambda t, q: ember.quantile(t, q, 1), xn, T(0.5, "float32"))
check("all-NaN row", lambda t: ember.nanquantile(t, 0.5, 1), T([[nan, nan], [1.0, nan]], "f4"))
check("keepdim None", lambda t, q: ember.quantile(t, q, None, True), xd, T([0.1, 0.7]))
check("0-d x", lambda t: ember.quantile(t, 0.5), T(2.5, "float32"))
check("q range", lambda t, q: ember.quantile(t, q, 1), xn, T([0.5, 1.5], "float32"))
check("q nan", lambda t, q: ember.quantile(t, q, 1), xn, T([nan], "float32"))
check("int x", lambda t: ember.quantile(t, 0.5), T([1, 2, 3]))

# mode: ties (smallest most frequent value, its last index), NaNs, dtypes, dims, keepdim
ties = T([[3, 1, 3, 1, 2], [5, 5, 4, 4, 4], [7, 8, 9, 6, 0], [2, 2, 2, 2, 2]], "float32")
check("mode ties", lambda t: ember.mode(t, 1), ties)
check("mode dim0 keepdim", lambda t: ember.mode(t, 0, True), ties)
check("mode int32", lambda t: ember.mode(t, -1), T(rng.integers(0, 3, (3, 7)), "int32"))
check("mode int64", lambda t: ember.mode(t, 1), T(rng.integers(-2, 2, (2, 9))))
check("mode bool", lambda t: ember.mode(t, 1), T(rng.integers(0, 2, (3, 4)) > 0))
check("mode f16", lambda t: ember.mode(t, 1), T(rng.integers(0, 3, (2, 6)), "float16"))
check("mode nan", lambda t: ember.mode(t, 1),
      T([[nan, 1, nan, 2], [nan, nan, nan, nan], [1, 1, nan, nan]], "float32"))
check("mode 0-d", lambda t: ember.mode(t), T(4.0, "float32"))
check("mode empty rows", lambda t: ember.mode(t, 1), T(np.zeros((0, 3), "float32")))
check("mode empty dim", lambda t: ember.mode(t, 1), T(np.zeros((2, 0), "float32")))

# unique: NaNs distinct and last, inverse in the input's shape, counts; dtypes; empty
uf = T([[2.0, nan, 1.0, 2.0], [nan, -1.0, 1.0, 2.0]], "float32")
check("unique f32", lambda t: ember.unique(t, return_inverse=True, return_counts=True), uf)
check("unique i64", lambda t: ember.unique(t, return_inverse=True, return_counts=True),
      T(rng.integers(0, 5, (3, 4))))
check("unique bool", lambda t: ember.unique(t, return_counts=True), T([True, False, True]))
check("unique f16", lambda t: ember.unique(t, return_inverse=True), T([1.5, 0.5, 1.5], "f2"))
check("unique plain", lambda t: ember.unique(t), T([3, 1, 3, 2], "int32"))
check("unique empty", lambda t: ember.unique(t, return_inverse=True, return_counts=True),
      T(np.zeros((2, 0), "float32")))
# unique(dim): lexicographic slices along dim 0 and 1, NaN slices distinct
m = T(rng.integers(0, 2, (6, 3)))
check("unique dim0", lambda t: ember.unique(t, dim=0, return_inverse=True, return_counts=True), m)
check("unique dim1", lambda t: ember.unique(t, dim=1, return_inverse=True, return_counts=True),
      T(rng.integers(0, 2, (2, 7)), "float32"))
check("unique dim nan", lambda t: ember.unique(t, dim=0, return_inverse=True, return_counts=True),
      T([[1.0, nan], [1.0, nan], [0.0, 2.0], [0.0, 2.0]], "float64"))
check("unique dim 3-d", lambda t: ember.unique(t, dim=-1, return_counts=True),
      T(rng.integers(0, 2, (2, 2, 5)), "int32"))
check("unique bad dim", lambda t: ember.unique(t, dim=3), m)
# unique_consecutive: flat (inverse in x's shape) and along dims; empty
uc = T([[1, 1, 2], [2, 1, 1]])
check("uc flat", lambda t: ember.unique_consecutive(t, True, True), uc)
check("uc nan", lambda t: ember.unique_consecutive(t, True, True), T([nan, nan, 1, 1], "f4"))
check("uc dim0", lambda t: ember.unique_consecutive(t, True, True, 0),
      T([[1, 2], [1, 2], [3, 4], [1, 2]], "int32"))
check("uc dim1", lambda t: ember.unique_consecutive(t, True, True, 1),
      T([[1, 1, 2, 2], [0, 0, 0, 5]], "float32"))
check("uc empty", lambda t: ember.unique_consecutive(t, True, True), T(np.zeros(0, "int64")))
print("ok")
"""


def test_sort_family_compositions():
    run_script(SCRIPT, "test_cuda_sort2", timeout=600)
