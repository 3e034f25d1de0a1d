"""The backward loop in ember._C (csrc/engine.cpp) against torch, and against ember's Python
engine (the reference): every test runs with both engines."""
import numpy as np
import pytest
from autograd_helpers import Square
from harness import torch

import ember
from ember import _native
from ember.autograd import _engine, _graph

RNG = np.random.default_rng(0)
A = RNG.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
B = RNG.uniform(0.5, 2.0, (4,)).astype(np.float32)


@pytest.fixture(params=["native", "python"])
def engine(request):
    """Which loop runs backward(); the native one must have run at least once by the end."""
    native = request.param == "native"
    loop = _engine.NATIVE_RUN[0]
    if native and loop is None:
        pytest.skip("ember._C is not built here (tools/build_native.py), or EMBER_NATIVE=0")
    before = _native._C.engine_stats()[0] if native else 0
    _engine.NATIVE_RUN[0] = loop if native else None
    try:
        yield request.param
    finally:
        _engine.NATIVE_RUN[0] = loop
    if native:
        assert _native._C.engine_stats()[0] > before


def leaves(t, *arrays):
    return [t.tensor(a, requires_grad=True) for a in arrays]


def close(e, r):
    np.testing.assert_allclose(np.asarray(e.detach().tolist()), r.detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_grads_accumulate_broadcast_and_casts(engine):
    def f(t):
        x, y = leaves(t, A, B)
        z = t.tensor(A.astype(np.float64))  # float64: the grads of x are cast back
        for _ in range(2):
            ((x * y + y).exp() * z).sum().backward()  # y: broadcast, summed back to (4,)
        return x, y
    for e, r in zip(f(ember), f(torch)):
        assert e.grad.dtype == ember.float32
        close(e.grad, r.grad)


def test_second_backward_raises_and_retain_graph_accumulates(engine):
    for t in (ember, torch):
        x, = leaves(t, A)
        y = (x.exp() * x).sum()
        y.backward(retain_graph=True)
        y.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward()
    e, = leaves(ember, A)
    (e.exp() * e).sum().backward()
    r, = leaves(torch, A)
    (r.exp() * r).sum().backward()
    close(e.grad, r.grad)


def hook_log(t):
    log = []
    x, = leaves(t, A)
    y = x * 2
    z = y.exp()
    y.retain_grad()
    y.register_hook(lambda g: log.append(("y", round(float(g.sum()), 3))))
    y.register_hook(lambda g: g * 3)  # replaces y's gradient for what follows
    x.register_hook(lambda g: log.append(("x", round(float(g.sum()), 3))))
    x.register_post_accumulate_grad_hook(lambda v: log.append(("post", v.grad is not None)))
    z.grad_fn.register_prehook(lambda gs: log.append(("pre", len(gs))))
    z.grad_fn.register_hook(lambda gi, go: log.append(("node", len(gi))))
    z.sum().backward()
    return log, x, y


def test_hooks_order_and_retain_grad(engine):
    le, xe, ye = hook_log(ember)
    lt, xt, yt = hook_log(torch)
    assert le == lt
    close(xe.grad, xt.grad)
    close(ye.grad, yt.grad)  # retain_grad sees the gradient the hooks gave back


def test_multi_output_custom_function_and_views(engine):
    def f(t, sq):
        x, = leaves(t, A)
        a, b = x.split(2, dim=1)  # views
        m, i = x.max(dim=1)  # two outputs, one differentiable
        s = sq(a.t()) if sq is not None else a.t() ** 2
        (s.sum() + b.sum() * 3 + m.sum()).backward()
        return x
    close(f(ember, Square.apply).grad, f(torch, None).grad)


def test_modified_saved_tensor_raises(engine):
    for t in (ember, torch):
        x, = leaves(t, A)
        y = x * 1
        z = y.exp()  # exp's vjp reads its output... mul reads y below
        w = (y * y).sum()
        y.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            w.backward()
        del z


def test_several_roots_and_autograd_backward(engine):
    def f(t):
        x, y = leaves(t, A, B)
        a = x * y
        b = (x + 1).sum(1)
        t.autograd.backward([a, b], [t.ones_like(a), t.full_like(b, 2.0)])
        return x, y
    for e, r in zip(f(ember), f(torch)):
        close(e.grad, r.grad)


def test_complex_grads(engine):
    def f(t):
        x = t.tensor(A + 1j * A, requires_grad=True)
        (x * x.conj() * x).abs().sum().backward()
        return x.grad
    e, r = f(ember), f(torch)
    np.testing.assert_allclose(np.asarray(e.detach().numpy()), r.numpy(), rtol=1e-5)


def test_error_in_vjp_propagates(engine):
    class Bad(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("bad backward")
    x, = leaves(ember, A)
    with pytest.raises(ValueError, match="bad backward"):
        (Bad.apply(x.exp()) * 2).sum().backward()
    assert x.grad is None


def test_leaf_grad_stolen_only_when_unshared(engine, monkeypatch):
    """A fresh gradient becomes .grad as is (PyTorch steals it too); one a hook kept is cloned."""
    stolen = []
    real = _graph._stealable

    def spy(g, var, refs=_graph._ENGINE_REFS):  # (this frame holds g once more)
        stolen.append(real(g, var, refs + 1))
        return stolen[-1]
    monkeypatch.setattr(_graph, "_stealable", spy)
    x, = leaves(ember, A)
    x.exp().sum().backward()
    kept = []
    w, = leaves(ember, A)
    w.register_hook(lambda g: kept.append(g))
    w.exp().sum().backward()
    assert stolen == [True, False]
    assert w.grad is not kept[0]
    w.grad.add_(1)
    assert not np.allclose(w.grad.tolist(), kept[0].tolist())


def test_create_graph_and_autograd_grad(engine):
    """backward(create_graph=True) and autograd.grad with create_graph, on either loop."""
    def f(t):
        x, y = leaves(t, A, B)
        ((x ** 3) * y.sin()).sum().backward(create_graph=True)
        gx = x.grad
        gx.sum().backward()  # second order, accumulated into the first-order grads
        z = (x * y).exp().sum()
        gy, = t.autograd.grad(z, y, create_graph=True)
        hy, = t.autograd.grad(gy.sum(), x)
        return gx, x.grad, y.grad, gy, hy
    for e, r in zip(f(ember), f(torch)):
        close(e, r)


def test_read_grads_of_multi_output_vjps():
    """Output gradients a vjp never reads get no zeros made for them (layer_norm's mean/rstd)."""
    def first(grads, out, x):
        return grads[0] * 2, grads[0]

    def unpacked(grads, out, x):
        g, _ = grads
        return g

    def closure(grads, out, x):
        return (lambda: grads[1])()
    assert _graph.read_grads(first) == frozenset({0})
    assert _graph.read_grads(unpacked) is None
    assert _graph.read_grads(closure) is None
    assert _graph.op_info(ember.ops.aten.native_layer_norm.default).grad_idx == frozenset({0})


def test_layer_norm_backward(engine):
    def f(t):  # only the result gets a gradient (mean and rstd: none)
        x, w = leaves(t, A, B)
        t.nn.functional.layer_norm(x * 2, (4,), w).pow(2).sum().backward()
        return x, w
    for e, r in zip(f(ember), f(torch)):
        close(e.grad, r.grad)


def test_inputs_grad_allow_unused_and_backward_inputs(engine):
    def f(t):
        x, y, u = leaves(t, A, B, B)
        h = x * y  # a non-leaf input: its gradient is captured, its node still runs below
        z = (h.exp() + y).sum()
        gh, gy, gu = t.autograd.grad(z, (h, y, u), retain_graph=True, allow_unused=True)
        assert gu is None and x.grad is None and y.grad is None
        with pytest.raises(RuntimeError, match="appears to not have been used"):
            t.autograd.grad(z, (x, u), retain_graph=True)
        z.backward(inputs=[y])  # accumulates into y only
        assert x.grad is None
        return gh, gy, y.grad
    for e, r in zip(f(ember), f(torch)):
        close(e, r)
