"""gradcheck, anomaly mode, autograd.functional and checkpointing (against torch)."""
import warnings

import numpy as np
import pytest
from harness import compare, torch

import ember
from ember.autograd import functional as F

X = np.array([0.3, -0.7, 1.2], "float64")
M = np.array([[0.5, 1.0], [-0.3, 0.8]], "float64")


def test_gradcheck_passes_and_fails():
    x = ember.tensor(X, requires_grad=True)
    y = ember.tensor(X[::-1].copy(), requires_grad=True)
    assert ember.autograd.gradcheck(lambda a, b: (a * b).exp() + a.sin() / (b * b + 1), (x, y))
    assert ember.autograd.gradgradcheck(lambda a, b: (a * b).exp() * a, (x, y))

    class Wrong(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * a

        @staticmethod
        def backward(ctx, g):
            return g * 3
    with pytest.raises(RuntimeError, match="Jacobian mismatch for output 0 with respect to "
                                           "input 0"):
        ember.autograd.gradcheck(Wrong.apply, (x,))
    assert not ember.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False)


def test_gradgradcheck_through_inplace_on_views():
    def f(x):
        b = x * x
        b.narrow(1, 0, 2).mul_(x.narrow(1, 1, 2))
        c = b.sin()
        c.add_(b)
        c.mul_(x)
        c.transpose(0, 1).select(0, 2).copy_(x.select(1, 0) * 3)
        return c
    x = ember.tensor(M @ np.ones((2, 3)) * X, requires_grad=True)
    assert ember.autograd.gradcheck(f, (x,))
    assert ember.autograd.gradgradcheck(f, (x,))


def test_detect_anomaly_nan():
    def f(t):
        x = t.tensor([0.0, 1.0], requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with t.autograd.detect_anomaly():
                (x.sqrt() * 0).sum().backward()
    for m in (ember, torch):
        with pytest.raises(RuntimeError, match="returned nan values in its 0th output"):
            f(m)
    assert not ember.autograd.anomaly_mode.is_anomaly_enabled()


def test_anomaly_names_forward_op():
    x = ember.ones(3, requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ember.autograd.set_detect_anomaly(True)
        try:
            y = x * 2
            z = y.exp()
            z.add_(1)
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                z.sum().backward()
        finally:
            ember.autograd.set_detect_anomaly(False)
    assert any("Error detected in ExpBackward0" in str(i.message) for i in w)


def _funcs(t):
    def f(x, y):
        return (x * y).exp(), x.sin() * y.sum()
    return f


def test_functional_jacobian_hessian():
    for inputs in ((X,), (X, X[::-1].copy())):
        def f(*xs):
            return (xs[0] * xs[-1]).exp().sin()
        e = F.jacobian(f, tuple(ember.tensor(a) for a in inputs))
        t = torch.autograd.functional.jacobian(f, tuple(torch.tensor(a) for a in inputs))
        compare(e, t, "float64")
    e = F.jacobian(_funcs(ember), (ember.tensor(X), ember.tensor(X)))
    t = torch.autograd.functional.jacobian(_funcs(torch), (torch.tensor(X), torch.tensor(X)))
    compare(e, t, "float64")

    def s(x):
        return (x.exp() * x).sum()
    compare(F.hessian(s, ember.tensor(X)),
            torch.autograd.functional.hessian(s, torch.tensor(X)), "float64")


def test_functional_vjp_jvp_hvp():
    def f(x):
        return (x * x).exp() * 0.1
    v = np.array([1.0, -2.0, 0.5])
    for name in ("vjp", "jvp", "hvp", "vhp"):
        fn = (lambda x: f(x).sum()) if name in ("hvp", "vhp") else f
        e = getattr(F, name)(fn, ember.tensor(X), ember.tensor(v))
        t = getattr(torch.autograd.functional, name)(fn, torch.tensor(X), torch.tensor(v))
        compare(e, t, "float64")


def test_checkpoint_matches_plain():
    from ember.utils.checkpoint import checkpoint

    def run(t, ckpt):
        w = t.tensor(M, requires_grad=True)
        x = t.tensor(X[:2], requires_grad=True)

        def block(h):
            return ((h * w).sum(-1) * h).tanh().exp()
        h = ckpt(block, x, use_reentrant=True) if ckpt else block(x)
        h = ckpt(block, h, use_reentrant=False) if ckpt else block(h)
        (h * h).sum().backward()
        return h, x.grad, w.grad
    e = run(ember, checkpoint)
    compare(e, run(torch, torch.utils.checkpoint.checkpoint), "float64")
    for a, b in zip(e, run(ember, None)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)
