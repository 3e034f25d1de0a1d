"""The cuda kernels of scatter_reduce, bincount, histc, searchsorted/bucketize, repeat_interleave,
reflect/replicate/circular padding, embedding_bag, embedding_renorm_, max_unpool and the pooling
gather against ember's CPU ops (values, dtypes, errors, gradients), and that none of them ran on
host copies. Runs on the GPU when there is one, else on the fake device (Triton's interpreter) in
a subprocess, so the environment takes effect before triton is imported."""
from cuda_script import run_script

SCRIPT = r"""
import numpy as np, ember
from ember._device import get_backend
F = ember.nn.functional
rng = np.random.default_rng(1)
be = get_backend("cuda")
before = dict(be.fallback_ops)

def cu(a):
    if isinstance(a, ember.Tensor):
        return a.cuda()
    if isinstance(a, (list, tuple)):
        return type(a)(cu(e) for e in a)
    return a

def host(t):
    t = t.detach().cpu()
    return t.float().numpy() if t.dtype in (ember.bfloat16, ember.float16) else t.numpy()

def same(e, g, what, tol=None):
    if isinstance(e, (tuple, list)):
        assert len(e) == len(g), what
        for a, b in zip(e, g):
            same(a, b, what, tol)
        return
    if e is None:
        assert g is None, what
        return
    assert g.device.type == "cuda", what
    assert g.dtype == e.dtype and tuple(g.shape) == tuple(e.shape), (what, g.dtype, e.dtype,
                                                                      g.shape, e.shape)
    a, b = host(e), host(g)
    if a.dtype.kind == "f":
        t = tol or (1e-2 if e.dtype in (ember.float16, ember.bfloat16) else 1e-5)
        assert np.allclose(a, b, rtol=t, atol=t, equal_nan=True), (what, a, b)
    else:
        assert np.array_equal(a, b), (what, a, b)

def check(what, f, *args, tol=None):
    try:
        e = f(*args)
    except Exception as exc:
        try:
            f(*cu(args))
            ember.cuda.synchronize()  # (an error a kernel flags is raised at the next wait)
        except type(exc):
            return
        raise AssertionError(f"{what}: cuda did not raise {type(exc).__name__}")
    same(e, f(*cu(args)), what, tol)

def grads(what, f, *args, tol=None):
    # the values and the gradients of sum(f(args) * w) for the float args, CPU vs cuda
    def run(xs):
        xs = [x.detach().requires_grad_(True) if isinstance(x, ember.Tensor)
              and x.dtype.is_floating_point else x for x in xs]
        y = f(*xs)
        w = ember.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape)).astype("float32"))
        (y * w.to(y.device).to(y.dtype)).sum().backward()
        return [y] + [x.grad for x in xs if isinstance(x, ember.Tensor) and x.requires_grad]
    same(run(list(args)), run(cu(list(args))), what, tol)

def randn(*s, dtype="float32"):
    return ember.tensor(rng.standard_normal(s).astype("float32")).to(getattr(ember, dtype))

def ints(lo, hi, *s, dtype=ember.int64):
    return ember.tensor(rng.integers(lo, hi, s)).to(dtype)

# ---- scatter_reduce ------------------------------------------------------------------------------
x = randn(4, 6)
for red in ("sum", "prod", "mean", "amax", "amin"):
    for inc in (True, False):
        i = ints(0, 6, 4, 9)
        check(f"scatter_reduce {red} {inc}",
              lambda a, j, s: a.scatter_reduce(1, j, s, red, include_self=inc), x, i,
              randn(4, 9), tol=1e-4)
    check(f"scatter_reduce {red} dim0 strided",
          lambda a, j, s: a.t().scatter_reduce(0, j, s, red), x, ints(-4, 4, 5, 3),
          randn(3, 6).t())
    check(f"scatter_reduce {red} contended",
          lambda a, j, s: a.scatter_reduce(0, j, s, red, include_self=False), randn(3),
          ints(0, 3, 3000), randn(3000) * 0.01 + 1, tol=1e-3)
    grads(f"scatter_reduce {red} grad",
          lambda a, s: a.scatter_reduce(1, ember.tensor([[0, 2], [1, 1], [3, 3]]).to(a.device),
                                        s, red), randn(3, 4), randn(3, 2), tol=1e-4)
check("scatter_reduce bad reduce", lambda a, j, s: a.scatter_reduce(1, j, s, "max"), x,
      ints(0, 6, 4, 2), randn(4, 2))
check("scatter_reduce oob", lambda a, j, s: a.scatter_reduce(1, j, s, "sum"), x,
      ember.tensor([[6]]), randn(1, 1))
check("scatter_reduce empty", lambda a, j, s: a.scatter_reduce(1, j, s, "prod"), x,
      ints(0, 6, 4, 0), randn(4, 0))

print("ok before: bincount / histc", flush=True)
# ---- bincount / histc ----------------------------------------------------------------------------
check("bincount", lambda a: a.bincount(), ints(0, 9, 50))
check("bincount int32 big", lambda a: a.bincount(), ints(0, 3000, 5000, dtype=ember.int32))
check("bincount minlength", lambda a: a.bincount(minlength=20), ints(0, 9, 50))
for dt in ("float32", "float64", "float16"):
    check(f"bincount weights {dt}", lambda a, w: a.bincount(w), ints(0, 9, 50), randn(50, dtype=dt))
check("bincount int weights", lambda a, w: a.bincount(w), ints(0, 9, 50), ints(0, 9, 50))
check("bincount empty", lambda a: a.bincount(minlength=3), ints(0, 1, 0))
check("bincount negative", lambda a: a.bincount(), ember.tensor([1, -1]))
check("bincount 2-d", lambda a: a.bincount(), ints(0, 3, 2, 2))
check("bincount float", lambda a: a.bincount(), randn(4))
check("bincount bad weights", lambda a, w: a.bincount(w), ints(0, 9, 5), randn(4))
for dt in ("float32", "float64", "float16", "bfloat16"):
    check(f"histc {dt}", lambda a: a.histc(7), randn(1000, dtype=dt))
    check(f"histc range {dt}", lambda a: a.histc(5, -1, 1), randn(300, dtype=dt))
check("histc const", lambda a: a.histc(4), ember.ones(10))
check("histc empty", lambda a: a.histc(4), randn(0))
check("histc strided", lambda a: a.t().histc(6, -2, 3), randn(30, 20))
check("histc bins 0", lambda a: a.histc(0), randn(5))
check("histc int", lambda a: a.histc(3), ints(0, 4, 5))
check("histc inf", lambda a: a.histc(3), ember.tensor([1.0, float("inf")]))
check("histc min > max", lambda a: a.histc(3, 2, 1), randn(5))

print("ok before: searchsorted / bucketize", flush=True)
# ---- searchsorted / bucketize --------------------------------------------------------------------
seq = ember.tensor(np.sort(rng.integers(-5, 6, 40)).astype("float32"))
vals = ember.tensor(rng.integers(-7, 8, (3, 50)).astype("float32"))
for right in (False, True):
    check(f"searchsorted 1-d {right}", lambda s, v: ember.searchsorted(s, v, right=right), seq,
          vals)
    check(f"bucketize {right}", lambda v, s: ember.bucketize(v, s, right=right), vals, seq)
    s2 = ember.tensor(np.sort(rng.standard_normal((3, 17)), -1).astype("float32"))
    check(f"searchsorted n-d {right}", lambda s, v: ember.searchsorted(s, v, right=right,
          out_int32=True), s2, randn(3, 33))
    perm = ember.tensor(rng.permutation(40))
    check(f"searchsorted sorter {right}",
          lambda s, v, p: ember.searchsorted(s, v, side="right" if right else "left", sorter=p),
          seq[perm.argsort()], vals, perm)
check("searchsorted nan", lambda s, v: ember.searchsorted(s, v),
      ember.tensor([1.0, 2.0, float("nan")]), ember.tensor([float("nan"), 1.5, 9.0]))
check("searchsorted int64", lambda s, v: ember.searchsorted(s, v),
      ember.tensor([2**40, 2**41 + 1, 2**42]), ember.tensor([2**41, 2**41 + 1, 2**41 + 2]))
check("searchsorted mixed", lambda s, v: ember.searchsorted(s, v), seq, ints(-6, 6, 7))
check("searchsorted empty seq", lambda s, v: ember.searchsorted(s, v), randn(0), randn(4))
check("searchsorted 0-d", lambda s, v: ember.searchsorted(s, v), seq, ember.tensor(0.5))
check("searchsorted shape", lambda s, v: ember.searchsorted(s, v), randn(2, 4), randn(3, 4))
check("searchsorted side", lambda s, v: ember.searchsorted(s, v, right=True, side="left"),
      seq, vals)
check("searchsorted sorter oob", lambda s, v, p: ember.searchsorted(s, v, sorter=p),
      randn(3), randn(2), ember.tensor([0, 1, 3]))
check("bucketize 2-d", lambda v, s: ember.bucketize(v, s), vals, randn(2, 2))

print("ok before: repeat_interleave", flush=True)
# ---- repeat_interleave ---------------------------------------------------------------------------
check("repeat_interleave", lambda a, r: a.repeat_interleave(r, 0), randn(4, 3),
      ember.tensor([1, 0, 3, 2]))
check("repeat_interleave dim1", lambda a, r: a.repeat_interleave(r, 1), randn(4, 3),
      ember.tensor([2, 0, 1], dtype=ember.int32))
check("repeat_interleave flat", lambda a, r: a.repeat_interleave(r), randn(2, 3), ints(0, 4, 6))
check("repeat_interleave 0-d repeats", lambda a, r: a.repeat_interleave(r, 0), randn(3, 2),
      ember.tensor(2))
check("repeat_interleave int", lambda a: a.repeat_interleave(3, 1), randn(2, 3))
check("repeat_interleave int flat", lambda a: a.repeat_interleave(2), randn(2, 3))
check("repeat_interleave int 0", lambda a: a.repeat_interleave(0, 0), randn(2, 3))
check("repeat_interleave int negative", lambda a: a.repeat_interleave(-1, 0), randn(2, 3))
check("repeat_interleave counts", lambda r: ember.repeat_interleave(r), ints(0, 5, 300))
check("repeat_interleave big", lambda a, r: a.repeat_interleave(r, 0), randn(2100, 2),
      ints(0, 3, 2100))
check("repeat_interleave negative", lambda a, r: a.repeat_interleave(r, 0), randn(2),
      ember.tensor([1, -1]))
check("repeat_interleave size", lambda a, r: a.repeat_interleave(r, 0), randn(2),
      ember.tensor([1, 1, 1]))
check("repeat_interleave zeros", lambda a, r: a.repeat_interleave(r, 0), randn(2),
      ember.tensor([0, 0]))
grads("repeat_interleave grad", lambda a: a.repeat_interleave(
      ember.tensor([1, 0, 3]).to(a.device), 1), randn(2, 3))

print("ok before: padding", flush=True)
# ---- padding -------------------------------------------------------------------------------------
for mode in ("reflect", "replicate", "circular"):
    for shp, pad in (((1, 2, 6), [2, 3]), ((2, 3, 5, 4), [1, 2, 3, 0]),
                     ((1, 2, 3, 4, 5), [1, 1, 2, 0, 1, 2]), ((2, 3, 5), [-1, 2])):
        grads(f"pad {mode} {shp} {pad}", lambda a: F.pad(a, pad, mode=mode), randn(*shp))
    check(f"pad {mode} strided", lambda a: F.pad(a.transpose(1, 2), [2, 1], mode=mode),
          randn(2, 5, 4))
    check(f"pad {mode} int", lambda a: F.pad(a, [1, 1], mode=mode), ints(0, 9, 1, 2, 3))
    check(f"pad {mode} half", lambda a: F.pad(a, [1, 1, 1, 1], mode=mode),
          randn(1, 2, 3, 3, dtype="float16"))
check("pad reflect too big", lambda a: F.pad(a, [4, 0], mode="reflect"), randn(1, 2, 4))
check("pad circular too big", lambda a: F.pad(a, [5, 0], mode="circular"), randn(1, 2, 4))

print("ok before: embedding, embedding_bag", flush=True)
# ---- embedding, embedding_bag, embedding_renorm_ -----------------------------------------------
w = randn(10, 7)
check("embedding", lambda ww, i: F.embedding(i, ww), w, ints(0, 10, 3, 4))
check("embedding oob", lambda ww, i: F.embedding(i, ww), w, ember.tensor([0, 10]))
check("embedding negative", lambda ww, i: F.embedding(i, ww), w, ember.tensor([0, -1]))
idx = ints(0, 10, 13)
off = ember.tensor([0, 3, 3, 8])
for mode in ("sum", "mean", "max"):
    for last in (False, True):
        for pad in (None, 2):
            grads(f"embedding_bag {mode} {last} {pad}",
                  lambda ww: F.embedding_bag(idx.to(ww.device), ww, off.to(ww.device), mode=mode,
                                             include_last_offset=last, padding_idx=pad), w)
    grads(f"embedding_bag 2-d {mode}",
          lambda ww: F.embedding_bag(ints(0, 10, 4, 3, dtype=ember.int64).to(ww.device) * 0 +
                                     ember.tensor([0, 1, 2]).to(ww.device), ww, mode=mode), w)
    grads(f"embedding_bag wide {mode}",
          lambda ww: F.embedding_bag(ember.tensor([1, 2, 2, 0]).to(ww.device), ww,
                                     ember.tensor([0, 1]).to(ww.device), mode=mode),
          randn(3, 300))
grads("embedding_bag psw", lambda ww, p: F.embedding_bag(idx.to(ww.device), ww, off.to(ww.device),
      mode="sum", per_sample_weights=p, padding_idx=4), w, randn(13))
grads("embedding_bag freq", lambda ww: F.embedding_bag(idx.to(ww.device), ww, off.to(ww.device),
      mode="mean", scale_grad_by_freq=True), w)
check("embedding_bag float64", lambda ww, i, o: F.embedding_bag(i, ww, o, mode="max"),
      randn(10, 7, dtype="float64"), idx, off)
check("embedding_bag int32", lambda ww, i, o: F.embedding_bag(i, ww, o),
      w, idx.int(), off.int())
check("embedding_bag oob", lambda ww, i, o: F.embedding_bag(i, ww, o), w,
      ember.tensor([1, 10]), ember.tensor([0]))
check("embedding_bag offsets[0]", lambda ww, i, o: F.embedding_bag(i, ww, o), w,
      ember.tensor([1, 2]), ember.tensor([1]))
check("embedding_bag empty", lambda ww, i, o: F.embedding_bag(i, ww, o, mode="max"), w,
      ints(0, 1, 0), ember.tensor([0, 0]))

def renorm(ww, i, p):
    ww = ww.clone()
    F.embedding(i, ww, max_norm=0.9, norm_type=p)
    return ww
for p in (2.0, 1.0, float("inf"), 3.0):
    check(f"embedding max_norm p={p}", renorm, randn(10, 300), ints(0, 10, 40), p)
check("embedding max_norm half", renorm, randn(6, 5, dtype="float16"), ints(0, 6, 9), 2.0)
check("embedding max_norm oob", renorm, randn(6, 5), ember.tensor([6]), 2.0)

print("ok before: max_unpool, pooling", flush=True)
# ---- max_unpool, pooling gather / scatter --------------------------------------------------------
v = randn(2, 3, 6, 6)
def pool_unpool(a):
    y, i = F.max_pool2d(a, 2, return_indices=True)
    return F.max_unpool2d(y, i, 2)
grads("max_unpool2d", pool_unpool, v)
def unpool1(a):
    y, i = F.max_pool1d(a, 3, 2, return_indices=True)
    return F.max_unpool1d(y, i, 3, 2, output_size=[9])
grads("max_unpool1d", unpool1, randn(2, 2, 9))
check("max_unpool oob", lambda a, i: F.max_unpool1d(a, i, 2), randn(1, 1, 2),
      ember.tensor([[[0, 4]]]))
from ember._ops import OPS
check("_pool_gather", lambda a, i: OPS["_pool_gather"](a, i, 2), v, ints(-36, 36, 2, 3, 2, 5))
check("_pool_gather oob", lambda a, i: OPS["_pool_gather"](a, i, 2), v, ints(36, 37, 2, 3, 1, 1))
check("_pool_scatter", lambda g, a, i: OPS["_pool_scatter"](g, a, i, 2), randn(2, 3, 2, 5), v,
      ints(0, 36, 2, 3, 2, 5))
# (a private op fed only by max-pool's forward: out-of-plane indices are not read back, as a
# sync per step; the kernel skips them, writing nothing outside the output)
oob = OPS["_pool_scatter"](randn(2, 3, 1, 1).cuda(), v.cuda(), ints(36, 37, 2, 3, 1, 1).cuda(), 2)
assert not host(oob).any() and tuple(oob.shape) == tuple(v.shape), "_pool_scatter oob"
grads("max_pool3d", lambda a: F.max_pool3d(a, 2), randn(1, 2, 4, 4, 4))

def dtype_sweep():   # last: the most kernel variants to compile on a GPU
    for red in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            i = ints(0, 6, 4, 9)
            for dt in ("float64", "float16", "bfloat16", "int32", "int64", "int8"):
                if dt == "bfloat16" and red in ("amax", "amin") and not inc:
                    continue   # core's CPU kernel takes bfloat16 for an integer type there
                mk = (lambda *sh: ints(-3, 4, *sh, dtype=getattr(ember, dt))) if "int" in dt \
                    else (lambda *sh: randn(*sh, dtype=dt))
                check(f"scatter_reduce {red} {inc} {dt}",
                      lambda a, j, s: a.scatter_reduce(1, j, s, red, include_self=inc),
                      mk(4, 6), i, mk(4, 9), tol=5e-2)
dtype_sweep()
print("scatter_reduce dtypes ok", flush=True)

from ember._ops import OPS
INDEX_FAMILY = tuple("ember.cuda.kernels." + m for m in
                     ("indexing", "scatter", "nn", "joining", "sorting", "pool"))
mine = {q for q, o in OPS.items()   # hand-written kernels of these families
        if getattr(o.kernels.get("cuda"), "__module__", "") in INDEX_FAMILY} | {
    "embedding", "_pool_scatter"}
ran = {q for q, n in be.fallback_ops.items() if n != before.get(q, 0)}
assert not (ran & mine), f"ran on host copies: {ran & mine}"
print("OK")
"""


def test_index_reduce_ops_on_cuda():
    run_script(SCRIPT, "test_cuda_index_reduce", timeout=1500)
