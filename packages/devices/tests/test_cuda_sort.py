"""Sorting, selection, scans and the reductions of ember.cuda.kernels (reduction, sorting) against
ember's CPU kernels (PyTorch's semantics): dtypes, NaNs, ties, strides, non-last dims, rows longer
than one block, the packed tl.sort path and the rank-sort path. Each case must run on the GPU (no
host fallback). On the fake device (Triton's interpreter) the script runs in a subprocess; on a real
GPU it runs in-process."""
from cuda_script import run_script

SCRIPT = r"""
import math
import numpy as np
import ember
from ember._device import get_backend

rng = np.random.default_rng(0)
be = get_backend("cuda")


def close(e, g, tol, what):
    if isinstance(e, (tuple, list)):
        for a, b in zip(e, g):
            close(a, b, tol, what)
        return
    g = g.cpu()
    assert g.dtype == e.dtype and tuple(g.shape) == tuple(e.shape), (what, g.dtype, e.dtype,
                                                                      g.shape, e.shape)
    a, b = e.float().numpy() if e.dtype == ember.bfloat16 else e.numpy(), \
        g.float().numpy() if g.dtype == ember.bfloat16 else g.numpy()
    if a.dtype.kind == "f":
        assert np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True), (what, a, b)
    else:
        assert np.array_equal(a, b), (what, a, b)


def check(what, f, *xs, tol=1e-5):
    before = dict(be.fallback_ops)
    e = f(*xs)
    g = f(*[x.cuda() for x in xs])
    close(e, g, tol, what)
    host = {q for q, n in be.fallback_ops.items() if n != before.get(q, 0)}
    assert not host, (what, host)


def t(a):
    return ember.tensor(a)


f32 = t(rng.standard_normal((4, 37)).astype("float32"))
f32n = f32.clone()
f32n[0, 3] = float("nan"); f32n[2, 30] = float("nan"); f32n[3, :] = float("nan")
f16 = t(rng.standard_normal((3, 5, 6)).astype("float16"))
bf = f16.to(ember.bfloat16)
f64 = t(rng.standard_normal((5, 13)))
i64 = t(rng.integers(-5, 5, (5, 13)))
i32 = t(rng.integers(-3, 3, (3, 20)).astype("int32"))
u8 = t(rng.integers(0, 3, (5, 8)).astype("uint8"))
b = t(rng.random((4, 6)) > 0.5)
ties = t(rng.integers(0, 4, (3, 30)).astype("float32"))
zeros = t(np.array([[0.0, -0.0, 0.0, -0.0, 1.0, -1.0]], "float32"))
strided = f32[:, ::3].t()          # non-contiguous (13, 4)
long = t(rng.standard_normal((2, 2500)).astype("float32"))   # rows longer than one block
long[1, 2100] = float("nan")

# ---- reductions ----
for x in (f32, f32n, f16, bf, f64, strided):
    tol = 1e-2 if x.dtype in (ember.float16, ember.bfloat16) else 1e-4
    check("var", lambda a: a.var(), x, tol=tol)
    check("var dim", lambda a: a.var(0, correction=0), x, tol=tol)
    check("std dim keep", lambda a: a.std(-1, keepdim=True), x, tol=tol)
    check("logsumexp", lambda a: a.logsumexp(-1), x, tol=tol)
    check("logsumexp all", lambda a: a.logsumexp(list(range(a.ndim))), x, tol=tol)
    for p in (2, 1, 0, 3, 0.5, float("inf"), -float("inf")):
        check(f"norm {p}", lambda a: a.norm(p, -1), x, tol=tol)
    check("nansum", lambda a: a.nansum(0), x, tol=tol)
    check("max.dim", lambda a: a.max(-1), x)
    check("min.dim", lambda a: a.min(0, keepdim=True), x)
for name, f in (("var", lambda a: a.var(1)), ("logsumexp", lambda a: a.logsumexp(1)),
                ("norm", lambda a: a.norm(3, 1)), ("max.dim", lambda a: a.max(1)),
                ("nansum", lambda a: a.nansum(1)), ("any", lambda a: (a > 3).any(1)),
                ("cumsum", lambda a: a.cumsum(1)), ("cummax", lambda a: a.cummin(1)),
                ("logcumsumexp", lambda a: a.logcumsumexp(1)),
                ("cumprod", lambda a: (a * 1e-3 + 1).cumprod(1))):
    check(name + " long", f, long, tol=1e-3)
print("long rows", flush=True)
check("prod", lambda a: (a * 0.1 + 1).prod(1), f32, tol=1e-3)
check("prod f64", lambda a: a.prod(0), f64)
check("std_mean", lambda a: ember.std_mean(a, 1), f64)
check("var 3d", lambda a: a.var((0, 2)), f16, tol=1e-2)
for x in (i64, i32, u8, b):
    check("prod int", lambda a: a.prod(1), x)
    check("prod int dtype", lambda a: a.prod(0, dtype=ember.float64), x)
    check("all", lambda a: a.all(), x)
    check("all dim", lambda a: a.all(1), x)
    check("any dim", lambda a: a.any(0, keepdim=True), x)
    check("count_nonzero", lambda a: ember.count_nonzero(a, 1), x)
    check("logsumexp int", lambda a: a.logsumexp(1), x)
    check("max.dim int", lambda a: a.max(1), x)
    check("min.dim int", lambda a: a.min(0), x)
    check("trace", lambda a: a.trace(), x)
check("all float", lambda a: (a > 0).float().all(1), f32)
check("any nan", lambda a: a.any(1), f32n)
check("ties max", lambda a: a.max(1), ties)
check("ties min", lambda a: a.min(1), ties)
check("trace f", lambda a: a.trace(), f64)
check("trace strided", lambda a: a.trace(), strided)
check("empty prod", lambda a: a[:, :0].prod(1), f64)
check("empty all", lambda a: a[:, :0].all(1), b)
check("empty var", lambda a: a[:, :0].var(1), f64)
check("0-d max.dim", lambda a: a[0, 0].max(0), f64)

print("reductions", flush=True)
# ---- scans ----
for x in (f32, f32n, f16, f64, strided, ties):
    tol = 1e-2 if x.dtype is ember.float16 else 1e-4
    for d in (0, 1, -1):
        check("cumsum", lambda a: a.cumsum(d), x, tol=tol * 10)
        check("cumprod", lambda a: (a * 0.01 + 1).cumprod(d), x, tol=tol)
        check("logcumsumexp", lambda a: a.logcumsumexp(d), x, tol=tol)
        check("cummax", lambda a: a.cummax(d), x)
        check("cummin", lambda a: a.cummin(d), x)
for x in (i64, i32, u8, b):
    check("cumsum int", lambda a: a.cumsum(1), x)
    check("cumsum int dtype", lambda a: a.cumsum(0, dtype=ember.float32), x)
    check("cumprod int", lambda a: a.cumprod(1), x)
    check("cummax int", lambda a: a.cummax(1), x)
    check("cummin int", lambda a: a.cummin(0), x)
inf = t(np.array([[-np.inf, -np.inf, 1.0, np.inf, np.inf, 2.0]]))
check("logcumsumexp inf", lambda a: a.logcumsumexp(1), inf)
check("cumsum 0-d", lambda a: a[0, 0].cumsum(0), f64)

print("scans", flush=True)
# ---- sorting and selection ----
for x in (f32, f32n, f16, bf, f64, i64, i32, u8, b, ties, zeros, strided):
    for desc in (False, True):
        for d in (0, -1):
            check("sort", lambda a: a.sort(d, descending=desc, stable=True), x)
            check("argsort", lambda a: a.argsort(d, descending=desc, stable=True), x)
    n = x.shape[-1]
    for k in (1, min(3, n), n):
        check("topk", lambda a: a.topk(k, -1), x)
        check("topk smallest", lambda a: a.topk(k, 0 if x.shape[0] >= k else -1,
                                                largest=False), x)
    if x.dtype is not ember.bool:
        check("kthvalue", lambda a: a.kthvalue(2, -1), x)
        check("kthvalue keep", lambda a: a.kthvalue(1, 0, keepdim=True), x)
        check("median.dim", lambda a: a.median(-1), x)
        check("median", lambda a: a.median(), x)
        if x.dtype.is_floating_point:
            check("nanmedian.dim", lambda a: a.nanmedian(0), x)
            check("nanmedian", lambda a: a.nanmedian(), x)
print("sorting", flush=True)
longi = t(rng.integers(-100, 100, (1, 4500)).astype("float32"))   # > SORT_BLOCK_MAX: rank sort
check("sort long", lambda a: a.sort(-1), longi)
check("topk long", lambda a: a.topk(5), longi)
check("topk long smallest", lambda a: a.topk(7, largest=False), longi)
import ember.cuda.kernels.sorting as S   # the chunked topk path, at a small chunk size
S.SORT_BLOCK_MAX, saved = 64, S.SORT_BLOCK_MAX
huge = t(rng.integers(-300, 300, (2, 259)).astype("float32"))   # short last chunk
huge[0, 258] = float("nan")
check("topk chunked", lambda a: a.topk(5), huge)
check("topk chunked smallest", lambda a: a.topk(9, largest=False), huge)
check("topk chunked int", lambda a: a.to(ember.int32).topk(4), huge[1:])
check("topk chunked 2 rounds", lambda a: a.reshape(1, -1)[:, :4000].topk(16), long)
S.SORT_BLOCK_MAX = saved
check("sort 0-d", lambda a: a[0, 0].sort(0), f64)
print("ok")
"""


def test_sort_ops_on_cuda():
    run_script(SCRIPT, "test_cuda_sort", timeout=1800)
