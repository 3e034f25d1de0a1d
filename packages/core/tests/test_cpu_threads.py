"""The CPU kernels split across threads (_cpu_bmm, _cpu_strided) and cross_entropy's one-pass
backward (_log_softmax_nll) against torch: values and gradients, one and two threads, and with
the C++ kernels off (numpy's path)."""
import numpy as np
import pytest
from harness import check, torch

import ember
from ember import _blas, _dispatch, _flags
from ember._ops import _cpu_bmm, _cpu_conv, _cpu_norm, _cpu_strided, _cpujit


def F(t):
    return t.nn.functional


@pytest.fixture(params=["cpp", "cpp-2-threads", "numpy"])
def mode(request, monkeypatch):
    """Each test with the C++ kernels on one thread, split over two, and turned off."""
    if request.param == "numpy":
        for m in (_cpu_bmm, _cpu_strided, _cpu_norm):
            monkeypatch.setattr(m, "_lib", False)
        return request.param
    nt = 2 if request.param == "cpp-2-threads" else 1
    monkeypatch.setenv("EMBER_CPU_STRIDED", "1")   # opt-in: on for these tests
    monkeypatch.setattr(_cpu_strided, "_lib", None)
    monkeypatch.setattr(_cpu_conv, "_FLOPS_PER_THREAD", 1)
    monkeypatch.setattr(_cpu_norm, "_ELEMS_PER_THREAD", 1)
    monkeypatch.setattr(_cpu_strided, "MIN_ELEMS", 1)
    monkeypatch.setattr(_flags, "_threads", nt)
    monkeypatch.setattr(_blas, "free_cores", lambda: 2)
    if _cpujit.available():
        assert _cpu_strided._ready() and _cpu_norm._fn("emrow_xent_bwd", np.float32)
        _cpu_bmm._load()
        assert _cpu_bmm._lib or not _cpu_conv._find_gemm()
    return request.param


# ---- batched matmul split over the batch ------------------------------------------------------
BMM = [
    ((4, 3, 5), (4, 5, 6)),
    ((2, 3, 4, 5), (2, 3, 5, 2)),
    ((3, 1, 4, 5), (2, 5, 3)),        # broadcast batch dims
    ((4, 5), (3, 5, 2)),              # a 2-d left operand against a stack
    ((0, 3, 4), (0, 4, 2)),           # empty batch
    ((2, 3, 0), (2, 0, 4)),           # empty contraction: zeros
    ((2, 1, 5), (2, 5, 1)),
]


@pytest.mark.parametrize("sa,sb", BMM)
def test_matmul_batched(mode, sa, sb):
    check(lambda t, a, b: a @ b, shapes=[sa, sb], grad=True, dtypes=("float32", "float64"))


def test_matmul_batched_views(mode):
    # transposed operands (read in place with BLAS's transpose flag), strided slices (copied)
    check(lambda t, a, b: a.transpose(-2, -1) @ b, shapes=[(3, 5, 4), (3, 5, 6)], grad=True)
    check(lambda t, a, b: a @ b.transpose(-2, -1), shapes=[(2, 4, 3, 7), (2, 4, 5, 7)],
          grad=True)
    check(lambda t, a, b: a[:, ::2] @ b[..., ::3], shapes=[(3, 8, 5), (3, 5, 9)], grad=True)
    check(lambda t, a, b: a.expand(4, 3, 5) @ b, shapes=[(1, 3, 5), (4, 5, 2)], grad=True)
    check(lambda t, a, b: a.transpose(0, 1) @ b, shapes=[(6, 4, 5), (4, 5, 3)], grad=True)


def test_matmul_batched_lowp_and_ints(mode):
    check(lambda t, a, b: a @ b, shapes=[(2, 3, 4), (2, 4, 5)], dtypes=("bfloat16", "float16"))
    a, b = np.arange(24).reshape(2, 3, 4), np.arange(40).reshape(2, 4, 5)
    assert (ember.tensor(a) @ ember.tensor(b)).tolist() == (a @ b).tolist()


def test_bmm_kernel_matches_numpy(mode):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 2, 9, 7)).astype(np.float32)
    b = rng.standard_normal((2, 7, 5)).astype(np.float32)
    got = _cpu_bmm.bmm(a, b)
    if mode != "cpp-2-threads":   # (one thread: numpy's matmul)
        assert got is None
    elif _cpu_bmm._lib:
        np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
        assert got.flags.c_contiguous and got.shape == (6, 2, 9, 5)


# ---- copies, sums over leading dims -----------------------------------------------------------
@pytest.mark.parametrize("dt", ["float32", "float64", "int64", "bool", "bfloat16", "int8"])
def test_contiguous_copies(mode, dt):
    check(lambda t, x: x.transpose(1, 2).contiguous(), shapes=[(3, 4, 5, 6)], dtypes=(dt,),
          check_stride=True)
    check(lambda t, x: x.permute(2, 0, 1).contiguous(), shapes=[(7, 5, 3)], dtypes=(dt,),
          check_stride=True)
    check(lambda t, x: x.permute(2, 0, 1).clone(), shapes=[(7, 5, 3)], dtypes=(dt,))
    check(lambda t, x: x[:, ::2].contiguous(), shapes=[(4, 6)], dtypes=(dt,))
    check(lambda t, x: x.expand(3, 4, 5).contiguous(), shapes=[(1, 4, 5)], dtypes=(dt,))
    check(lambda t, x: x.t().contiguous(), shapes=[(0, 5)], dtypes=(dt,))


def test_copy_kernel(mode):
    rng = np.random.default_rng(1)
    src = rng.standard_normal((4, 6, 5)).astype(np.float32)
    for s in (src, src.transpose(2, 0, 1), src[:, ::2, ::-1], np.float32(3.5)):
        d = np.zeros(np.shape(s) or (4, 2), np.float32)
        done = _cpu_strided.copy(d, s)
        # (one thread: numpy's copy runs, as fast there)
        assert done == (mode == "cpp-2-threads" and bool(_cpu_strided._lib))
        if done:
            np.testing.assert_array_equal(d, np.broadcast_to(s, d.shape))
    d = np.zeros((4, 5), np.float32)
    assert not _cpu_strided.copy(d[:, 1:], d[:, :-1])   # overlapping: numpy's copy


def test_split_backward(mode):
    def fn(t, x):
        q, k, v = x.split(4, dim=2)
        return q * 2 + k.transpose(1, 2).transpose(1, 2) * 3 + v
    check(fn, shapes=[(2, 5, 12)], grad=True)
    check(lambda t, x: x[:, 1:3].sum() + x[..., ::2].sum(), shapes=[(3, 4, 5)], grad=True)


@pytest.mark.parametrize("dt", ["float32", "float64", "int32", "float16"])
def test_sum_leading_dims(mode, dt):
    check(lambda t, x: x.sum((0, 1)), shapes=[(4, 6, 7)], dtypes=(dt,), rtol=1e-5, atol=1e-5)
    check(lambda t, x: x.sum(0), shapes=[(33, 9)], dtypes=(dt,), rtol=1e-5, atol=1e-5)
    check(lambda t, x: x.sum((0, 1), keepdim=True), shapes=[(4, 6, 7)], dtypes=(dt,))
    check(lambda t, x: x.transpose(0, 1).sum(0), shapes=[(5, 6)], dtypes=(dt,))
    check(lambda t, x: x.sum(0), shapes=[(0, 6)], dtypes=(dt,))


def test_bias_gradients(mode):
    check(lambda t, x, w, b: F(t).linear(x, w, b), shapes=[(4, 9, 6), (5, 6), (5,)], grad=True,
          rtol=1e-5, atol=1e-5)
    check(lambda t, x, b: x + b, shapes=[(7, 3, 8), (8,)], grad=True)


# ---- cross_entropy: one op on eager CPU, its decomposition elsewhere --------------------------
CE = [{}, dict(reduction="sum"), dict(reduction="none"), dict(ignore_index=2),
      dict(ignore_index=2, reduction="none"), dict(label_smoothing=0.1)]


@pytest.mark.parametrize("kw", CE)
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy(mode, kw, weighted):
    tgt = np.array([0, 2, 1, 4, 2, 3, 2], np.int64)
    w = np.linspace(0.5, 2, 5)

    def fn(t, x):
        y = t.tensor(tgt) if t is ember else torch.from_numpy(tgt)
        wt = t.tensor(w, dtype=x.dtype) if weighted else None
        return F(t).cross_entropy(x, y, weight=wt, **kw)
    check(fn, shapes=[(7, 5)], grad=True)
    check(lambda t, x: fn(t, x.t()), shapes=[(5, 7)], grad=True)   # strided logits


def test_cross_entropy_edge_rows(mode):
    tgt = np.array([1, 0, 2, 1], np.int64)
    x = np.array([[1, np.nan, 2], [-np.inf, 0, 1], [-100, 0, 50], [0, 0, 0]], np.float32)

    def fn(t, a):
        return F(t).cross_entropy(a, t.tensor(tgt) if t is ember else torch.from_numpy(tgt))
    check(fn, args=[x], grad=True)
    every = np.full(4, -100, np.int64)   # every row ignored: mean is 0/0 = nan, as torch
    check(lambda t, a: F(t).cross_entropy(
        a, t.tensor(every) if t is ember else torch.from_numpy(every)), args=[x[:, :]],
        grad=True)
    empty = np.zeros(0, np.int64)
    check(lambda t, a: F(t).cross_entropy(
        a, t.tensor(empty) if t is ember else torch.from_numpy(empty), reduction="sum"),
        shapes=[(0, 4)], grad=True)


def test_cross_entropy_double_backward(mode):
    tgt = np.array([0, 2, 1], np.int64)
    res = []
    for t in (ember, torch):
        x = t.tensor(np.random.default_rng(2).standard_normal((3, 4)), requires_grad=True)
        y = t.tensor(tgt) if t is ember else torch.from_numpy(tgt)
        (g,) = t.autograd.grad(F(t).cross_entropy(x, y), x, create_graph=True)
        (gg,) = t.autograd.grad((g * g).sum(), x)
        res.append((g.detach().numpy(), gg.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)


class _Names(_dispatch.DispatchMode):
    def __init__(self):
        self.names = []

    def __ember_dispatch__(self, op, args, out):
        self.names.append(op.name)
        if op.name == "cross_entropy_loss":   # a composite: what a tracer sees inside it
            with self:
                return op.decomp(*args)
        return _dispatch.call_below_modes(op, args, out)


def test_cross_entropy_under_a_mode_decomposes():
    """A mode (tracing, fake tensors) sees log_softmax + nll_loss_forward, as before."""
    x = ember.randn(4, 3)
    y = ember.tensor([0, 2, 1, 1])
    with _Names() as m:
        F(ember).cross_entropy(x, y)
    assert "_log_softmax_nll" not in m.names and "nll_loss_forward" in m.names
    assert "log_softmax" in m.names


def test_cross_entropy_eager_cpu_is_one_op(monkeypatch):
    seen = []
    from ember._ops.registry import lookup
    op = lookup("_log_softmax_nll_backward")
    k = op.kernels["cpu"]
    monkeypatch.setitem(op.kernels, "cpu", lambda *a: seen.append(1) or k(*a))
    x = ember.randn(5, 3, requires_grad=True)
    F(ember).cross_entropy(x, ember.tensor([0, 2, 1, 1, 0])).backward()
    assert seen == [1]
    assert x.grad.shape == (5, 3)
