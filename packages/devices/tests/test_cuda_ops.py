"""Every record of core's pointwise op database, and the hot non-pointwise ops, on cuda vs the CPU
result (needs a GPU: skipped only when none is present). Run on the lent GPU through run_gpu.sh."""
import os
import sys

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.skipif(not ember.cuda.is_available(), reason="no CUDA GPU present")

if ember.cuda.is_available():  # core's op database lives in its tests (only needed on a GPU)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "core", "tests"))
    from harness import make_array  # noqa: E402
    from test_pointwise import RECORDS  # noqa: E402
else:
    RECORDS = []

TOL = {"float16": 1e-2, "bfloat16": 5e-2, "float32": 2e-5, "float64": 1e-9}
DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool")


def _same(e, g, dtype):
    assert e.dtype == g.dtype, (e.dtype, g.dtype)
    assert tuple(e.shape) == tuple(g.shape)
    a, b = e.float().numpy() if e.dtype.is_floating_point else e.numpy(), g.cpu()
    b = b.float().numpy() if b.dtype.is_floating_point else b.numpy()
    tol = TOL.get(str(e.dtype).split(".")[-1])  # by the result's dtype (int -> float ops)
    if tol is None or not e.dtype.is_floating_point:
        assert np.array_equal(a, b), (a, b)
    else:
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rec", RECORDS, ids=[str(r) for r in RECORDS])
def test_record(rec, dtype):
    if dtype not in rec.dtypes:
        pytest.skip("dtype not in the record")
    rng = np.random.default_rng(0)
    shapes = [(3, 4), (4,), (3, 1)][:rec.n]
    try:
        arrs = [make_array(s, dtype, rng, rec.low, rec.high) for s in shapes]
    except ValueError:  # an integer dtype in a range narrower than one (acos of ints)
        arrs = [make_array(s, dtype, rng) for s in shapes]
    xs = [ember.tensor(a).to(getattr(ember, dtype)) for a in arrs]
    try:
        e = rec.fn(ember, *xs)
    except Exception as exc:  # the CPU raises: cuda raises the same type
        with pytest.raises(type(exc)):
            rec.fn(ember, *[x.cuda() for x in xs])
        return
    g = rec.fn(ember, *[x.cuda() for x in xs])
    if isinstance(e, tuple):
        for a, b in zip(e, g):
            _same(a, b, dtype)
    else:
        _same(e, g, dtype)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_strided_and_inplace(dtype):
    rng = np.random.default_rng(1)
    x = ember.tensor(make_array((6, 5), dtype, rng)).to(getattr(ember, dtype))
    y = ember.tensor(make_array((5, 6), dtype, rng)).to(getattr(ember, dtype))
    gx, gy = x.cuda(), y.cuda()
    _same(x + y.t(), gx + gy.t(), dtype)
    _same(x[::2, 1:] * 3, gx[::2, 1:] * 3, dtype)
    x[1:3].add_(y.t()[1:3])
    gx[1:3].add_(gy.t()[1:3])
    _same(x, gx, dtype)


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shapes", [((17, 33), (33, 9)), ((3, 17, 33), (33, 9)),
                                    ((2, 3, 7, 5), (2, 1, 5, 4)), ((5,), (5, 3)), ((4, 5), (5,))])
def test_matmul(dt, shapes):
    rng = np.random.default_rng(2)
    a, b = (ember.tensor(rng.standard_normal(s).astype("float32")).to(getattr(ember, dt))
            for s in shapes)
    e = (a.float() @ b.float())
    g = (a.cuda() @ b.cuda()).float().cpu()
    err = float((g - e).norm() / e.norm())
    assert err < (2e-3 if dt == "float32" else 1e-2), err


def test_matmul_transposed_and_highest():
    rng = np.random.default_rng(3)
    a = ember.tensor(rng.standard_normal((40, 30)).astype("float32"))
    b = ember.tensor(rng.standard_normal((20, 40)).astype("float32"))
    prev = ember.get_float32_matmul_precision()
    ember.set_float32_matmul_precision("highest")
    try:
        g = (a.cuda().t() @ b.cuda().t()).cpu()
    finally:
        ember.set_float32_matmul_precision(prev)
    np.testing.assert_allclose(g.numpy(), (a.t() @ b.t()).numpy(), rtol=1e-4, atol=1e-4)


REDUCTIONS = [lambda t: t.sum(), lambda t: t.sum(0), lambda t: t.sum((0, 2), keepdim=True),
              lambda t: t.mean(-1), lambda t: t.amax(1), lambda t: t.amin((0, 1)),
              lambda t: t.max(), lambda t: t.argmax(2), lambda t: t.argmin(),
              lambda t: t.softmax(1), lambda t: t.log_softmax(-1), lambda t: t.var(1),
              lambda t: t.norm(), lambda t: t.logsumexp(2), lambda t: t.cumsum(1),
              lambda t: t.sort(-1)[0], lambda t: t.topk(3)[1]]


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64"])
@pytest.mark.parametrize("i", range(len(REDUCTIONS)))
def test_reduction(i, dtype):
    f = REDUCTIONS[i]
    rng = np.random.default_rng(4)
    x = ember.tensor(make_array((5, 7, 300), dtype, rng)).to(getattr(ember, dtype))
    try:
        e = f(x)
    except Exception as exc:
        with pytest.raises(type(exc)):
            f(x.cuda())
        return
    g = f(x.cuda())
    if dtype == "float16" and e.dtype == ember.float16:
        np.testing.assert_allclose(g.float().cpu().numpy(), e.float().numpy(), rtol=2e-2,
                                   atol=2e-2)
    else:
        _same(e, g, "float32" if dtype == "float16" else dtype)


def test_nn_forward_backward_matches_cpu():
    import ember.autograd  # noqa: F401
    nn, F = ember.nn, ember.nn.functional
    ember.manual_seed(0)
    emb, ln, lin = nn.Embedding(50, 32), nn.LayerNorm(32), nn.Linear(32, 50)
    idx = ember.randint(0, 50, (4, 9))

    def loss(dev):
        mods = [m.to(dev) for m in (emb, ln, lin)]
        x = mods[1](mods[0](idx.to(dev)))
        logits = mods[2](F.gelu(x))
        return F.cross_entropy(logits.view(-1, 50), idx.to(dev).view(-1))

    lc = loss("cpu")
    lc.backward()
    gc = lin.weight.grad.clone()
    lin.weight.grad = None
    lg = loss("cuda")
    lg.backward()
    assert abs(lc.item() - lg.item()) < 1e-4
    np.testing.assert_allclose(lin.weight.grad.cpu().numpy(), gc.numpy(), atol=1e-4)


def test_random_reproducible():
    ember.cuda.manual_seed(5)
    a = ember.randn(100, device="cuda").cpu()
    ember.cuda.manual_seed(5)
    b = ember.randn(100, device="cuda").cpu()
    assert np.array_equal(a.numpy(), b.numpy())
    assert ember.rand(10, device="cuda").device == ember.device("cuda:0")


@pytest.mark.parametrize("cfg", [(1, 0, 1, True), (2, 1, 1, False), (1, 2, 2, True)])
def test_conv2d_forward_backward(cfg):
    import ember.autograd  # noqa: F401
    stride, pad, dil, bias = cfg
    F = ember.nn.functional
    rng = np.random.default_rng(5)
    x, w, b = (ember.tensor(rng.standard_normal(s).astype("float32"))
               for s in ((2, 3, 11, 10), (4, 3, 3, 3), (4,)))
    xc, wc, bc = (t.clone().requires_grad_() for t in (x, w, b))
    xg, wg, bg = (t.cuda().requires_grad_() for t in (x, w, b))
    yc = F.conv2d(xc, wc, bc if bias else None, stride, pad, dil)
    yg = F.conv2d(xg, wg, bg if bias else None, stride, pad, dil)
    gy = ember.tensor(rng.standard_normal(tuple(yc.shape)).astype("float32"))
    (yc * gy).sum().backward()
    (yg * gy.cuda()).sum().backward()
    for a, c in ((yc, yg), (xc.grad, xg.grad), (wc.grad, wg.grad)) + (
            ((bc.grad, bg.grad),) if bias else ()):
        np.testing.assert_allclose(c.detach().cpu().numpy(), a.detach().numpy(), rtol=2e-3,
                                   atol=2e-3)


def test_slice_scatter_tril_triu():
    x = ember.randn(4, 6)
    src = ember.randn(4, 2)
    for f in (lambda t, s: ember.slice_scatter(t, s, 1, 1, 5, 2), lambda t, s: t.tril(),
              lambda t, s: t.triu(1), lambda t, s: t.tril(-2)):
        np.testing.assert_array_equal(f(x.cuda(), src.cuda()).cpu().numpy(), f(x, src).numpy())


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, ceil_mode=True),
                                dict(kernel_size=2, dilation=2)])
def test_max_pool2d_forward_backward(kw):
    import ember.autograd  # noqa: F401
    F = ember.nn.functional
    rng = np.random.default_rng(6)
    x = ember.tensor(rng.standard_normal((2, 3, 9, 8)).astype("float32"))
    x[0, 0, 1, 1] = float("nan")
    xc, xg = x.clone().requires_grad_(), x.cuda().requires_grad_()
    yc, ic = F.max_pool2d(xc, return_indices=True, **kw)
    yg, ig = F.max_pool2d(xg, return_indices=True, **kw)
    gy = ember.tensor(rng.standard_normal(tuple(yc.shape)).astype("float32"))
    (yc * gy).sum().backward()
    (yg * gy.cuda()).sum().backward()
    np.testing.assert_allclose(yg.detach().cpu().numpy(), yc.detach().numpy())
    np.testing.assert_array_equal(ig.cpu().numpy(), ic.numpy())
    np.testing.assert_allclose(xg.grad.cpu().numpy(), xc.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_recorded_pointwise_takes_cached_plan():
    # autograd's record() asks the backend's cached plan first: results and gradients as on CPU
    be = ember.cuda._backend
    x0 = np.random.default_rng(1).standard_normal((5, 7)).astype("float32")
    ref = None
    for dev in ("cpu", "cuda", "cuda"):
        x = ember.tensor(x0, device=dev, requires_grad=True)
        y = (x * 2 + x).sigmoid() * x
        y.sum().backward()
        got = (y.detach().cpu().numpy(), x.grad.cpu().numpy())
        if ref is None:
            ref = got
        else:
            np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=1e-6)
            assert y.grad_fn is not None
    n = len(be._plans)
    x = ember.tensor(x0, device="cuda", requires_grad=True)
    y = (x * 2 + x).sigmoid() * x
    assert len(be._plans) == n  # every forward op hit a plan made by the runs above


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_fused_adamw_sgd_match_cpu(dt):
    rng = np.random.default_rng(2)
    w0 = rng.standard_normal((33, 65)).astype("float32")
    x0 = rng.standard_normal((4, 65)).astype("float32")
    tol = 2e-5 if dt == "float32" else 3e-2
    for make in (lambda p: ember.optim.AdamW(p, lr=0.05),
                 lambda p: ember.optim.SGD(p, lr=0.01, momentum=0.9)):
        res = []
        for dev in ("cpu", "cuda"):
            w = ember.nn.Parameter(ember.tensor(w0, device=dev).to(getattr(ember, dt)))
            x = ember.tensor(x0, device=dev).to(getattr(ember, dt))
            opt = make([w])
            for _ in range(3):
                opt.zero_grad()
                ((x @ w.t()).float() ** 2).mean().backward()
                opt.step()
            res.append(w.detach().float().cpu().numpy())
        np.testing.assert_allclose(res[1], res[0], rtol=tol, atol=tol)


def test_parameter_pointwise_is_recorded_after_plan_exists():
    # a seen-before call on an nn.Parameter must still be recorded by autograd
    w = ember.nn.Parameter(ember.ones(4, device="cuda"))
    for _ in range(3):
        y = w * 3
        assert y.grad_fn is not None
    y.sum().backward()
    assert w.grad.cpu().tolist() == [3.0] * 4


def test_inplace_pointwise_plans_write_into_self():
    # a seen-before in-place op launches its out-of-place plan into self: results, aliasing and
    # version counters as on the CPU
    rng = np.random.default_rng(3)
    a0 = rng.standard_normal((6, 6)).astype("float32")
    b0 = rng.standard_normal((6,)).astype("float32")
    res = {}
    for dev in ("cpu", "cuda"):
        a, b = ember.tensor(a0, device=dev), ember.tensor(b0, device=dev)
        out = []
        for _ in range(3):
            v = a._version
            a.add_(b, alpha=0.5)
            a.mul_(1.5)
            a.sub_(a)
            a.add_(b).add_(a.t())        # reads a transposed view of itself: no plan into self
            a[1:4].add_(b)                # a strided view: its own layout
            ai = a.to(ember.int32)
            ai.add_(2)
            assert a._version > v
            out.append((a.cpu().numpy().copy(), ai.cpu().numpy().copy()))
        res[dev] = out
    for (x, xi), (y, yi) in zip(res["cpu"], res["cuda"]):
        np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-5)
        assert np.array_equal(xi, yi)


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_column_sums_and_layer_norm_backward(dt):
    rng = np.random.default_rng(4)
    tol = 1e-4 if dt == "float32" else 6e-2
    for shape in [(7, 5), (8192, 768), (3, 300, 50)]:
        x = ember.tensor(rng.standard_normal(shape).astype("float32")).to(getattr(ember, dt))
        ref = x.float().sum(0).numpy()
        got = x.cuda().sum(0)
        assert got.dtype == x.dtype
        np.testing.assert_allclose(got.float().cpu().numpy(), ref, rtol=2e-2,
                                   atol=1e-3 if dt == "float32" else 0.5)
        np.testing.assert_allclose(x.cuda().float().mean((0, 1)).cpu().numpy(),
                                   x.float().mean((0, 1)).numpy(), rtol=1e-4, atol=1e-4)
    for shape, n in [((4, 6, 10), 10), ((64, 768), 768), ((5, 3000), 3000)]:
        x0 = rng.standard_normal(shape).astype("float32")
        w0 = rng.standard_normal(n).astype("float32")
        res = []
        for dev in ("cpu", "cuda"):
            ln = ember.nn.LayerNorm(n)
            with ember.no_grad():
                ln.weight.copy_(ember.tensor(w0))
            ln = ln.to(dev).to(getattr(ember, dt))
            x = ember.tensor(x0, device=dev).to(getattr(ember, dt)).requires_grad_()
            y = ln(x).float()
            (y * y.detach()).sum().backward()
            res.append([t.float().cpu().numpy() for t in (x.grad, ln.weight.grad, ln.bias.grad)])
        for a, b in zip(*res):
            np.testing.assert_allclose(b, a, rtol=tol, atol=tol * max(1.0, np.abs(a).max()))


def test_cublaslt_serves_matmuls():
    from ember.cuda import blaslt as _blaslt
    rng = np.random.default_rng(5)
    for dt, tol in (("float32", 2e-2), ("bfloat16", 5e-2)):
        a = ember.tensor(rng.standard_normal((3, 40, 24)).astype("float32"))
        b = ember.tensor(rng.standard_normal((24, 56)).astype("float32"))
        for x, y in ((a, b), (a[1:, :, 1:].transpose(-1, -2), a[0]), (a, a.transpose(-1, -2))):
            x, y = x.to(getattr(ember, dt)), y.to(getattr(ember, dt))
            e = (x.float() @ y.float()).numpy()
            g = (x.cuda() @ y.cuda()).float().cpu().numpy()
            np.testing.assert_allclose(g, e, rtol=tol, atol=tol * np.abs(e).max())
    assert not _blaslt._failed[0] and any(_blaslt._plans.values())
