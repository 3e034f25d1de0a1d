"""Saved-tensor hooks (ember.autograd.graph), grad_fn._saved_* / _raw_saved_*, and the
non-reentrant checkpoint built on them, against torch."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from autograd_helpers import Square
from harness import compare, torch

import ember
import ember.utils.checkpoint  # noqa: F401

X = np.array([[0.3, -0.7, 1.1, 0.2], [0.5, 0.9, -1.3, 0.4]])
W = np.random.default_rng(0).standard_normal((4, 4))


def _both(fn):
    """fn(module) on ember and torch; results compared."""
    e, t = fn(ember), fn(torch)
    compare(e, t, "float64")
    return e


def _ckpt(mod):
    return ember.utils.checkpoint if mod is ember else torch.utils.checkpoint


# ---- saved_tensors_hooks ------------------------------------------------------------------------
def test_pack_unpack_called_and_grads_unchanged():
    def run(t):
        log = []
        a = t.tensor(X, requires_grad=True)
        b = t.tensor(W[:2], requires_grad=True)

        def pack(x):
            log.append("pack")
            return x.detach().clone()

        def unpack(x):
            log.append("unpack")
            return x
        with t.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = (a.exp() * b).sum()   # exp saves its result; mul saves both operands
        n_pack = log.count("pack")
        y.backward()
        return a.grad, b.grad, n_pack, log.count("unpack")
    e = _both(run)
    assert e[2] == 3 and e[3] == 3


def test_innermost_hooks_win_and_custom_functions_use_them():
    log = []
    a = ember.tensor(X, requires_grad=True)
    with ember.autograd.graph.saved_tensors_hooks(lambda x: log.append("outer") or x,
                                                  lambda x: x):
        with ember.autograd.graph.saved_tensors_hooks(lambda x: log.append("inner") or x,
                                                      lambda x: log.append("unpack") or x):
            y = Square.apply(a)
    y.sum().backward()
    assert log == ["inner", "unpack"]
    np.testing.assert_allclose(a.grad.numpy(), 2 * X)


def test_double_backward_through_packed_copies():
    def run(t):
        a = t.tensor(X, requires_grad=True)
        with t.autograd.graph.saved_tensors_hooks(lambda x: x.detach().clone(), lambda x: x):
            y = (a * a * a.sin()).sum()
        g, = t.autograd.grad(y, a, create_graph=True)
        h, = t.autograd.grad(g.sum(), a)
        return g, h
    _both(run)


def test_save_on_cpu():
    def run(t):
        a = t.tensor(X, requires_grad=True)
        with t.autograd.graph.save_on_cpu():
            y = (a.sin() * a).sum()
        y.backward()
        return a.grad
    _both(run)


def test_no_version_check_with_hooks():
    # PyTorch keeps no version to check once a pack hook holds the value
    def run(t):
        a = t.tensor(X, requires_grad=True)
        with t.autograd.graph.saved_tensors_hooks(lambda x: x.detach().clone(), lambda x: x):
            b = a * 1
            c = b * b
        b.add_(1)
        c.sum().backward()
        return a.grad
    _both(run)


def test_hook_errors():
    def bad_unpack(t):
        a = t.tensor(X, requires_grad=True)
        with t.autograd.graph.saved_tensors_hooks(lambda x: 1, lambda x: 1):
            y = a.exp()
        y.sum().backward()
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
        bad_unpack(ember)
    with pytest.raises(TypeError):
        bad_unpack(torch)
    for t in (ember, torch):
        with t.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
            with pytest.raises(RuntimeError, match="no hooks here"):
                with t.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
                    pass
        with t.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
            pass  # allowed again after the block


def test_increment_version():
    for t in (ember, torch):
        a = t.tensor(X, requires_grad=True)
        b = a * 1
        c = b.sin()  # saves b
        v = b._version
        t.autograd.graph.increment_version(b)
        assert b._version == v + 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            c.sum().backward()


# ---- grad_fn._saved_* ---------------------------------------------------------------------------
def test_saved_attributes_and_raw_hooks():
    def run(t):
        a = t.tensor([0.5, 1.0], dtype=t.float64, requires_grad=True)
        b = t.tensor([2.0, 3.0], dtype=t.float64, requires_grad=True)
        y, z, p = a.exp(), a * b, a.pow(2)
        res = [y.grad_fn._saved_result, z.grad_fn._saved_self, z.grad_fn._saved_other,
               p.grad_fn._saved_exponent, p.grad_fn._saved_self]
        z.grad_fn._raw_saved_self.register_hooks(lambda x: x * 10, lambda x: x / 5)
        res.append(z.grad_fn._saved_self)
        z.sum().backward()
        res.append(b.grad)
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            _ = z.grad_fn._saved_self
        with pytest.raises(AttributeError):
            _ = y.grad_fn._saved_nothing
        return res
    _both(run)


# ---- checkpoint(use_reentrant=False) ------------------------------------------------------------
def test_checkpoint_non_reentrant_grad_closure_and_double_backward():
    def run(t):
        w = t.tensor(W, requires_grad=True)
        x = t.tensor(X, requires_grad=True)

        def block(h):
            return (h @ w).tanh() * h.sin()
        y = _ckpt(t).checkpoint(block, x, use_reentrant=False)
        gx, gw = t.autograd.grad(y.sum(), (x, w), create_graph=True)
        hx, = t.autograd.grad((gx * gx).sum() + gw.sum(), x)
        return y, gx, gw, hx
    _both(run)


def test_checkpoint_non_reentrant_recomputes_once_per_backward():
    def run(t):
        calls = [0]

        def f(h):
            calls[0] += 1
            return h.exp().sin()
        x = t.tensor(X, requires_grad=True)
        y = _ckpt(t).checkpoint(f, x, use_reentrant=False)
        y.sum().backward(retain_graph=True)
        y.sum().backward()
        return x.grad, calls[0]
    assert _both(run)[1] == 3


def test_checkpoint_non_reentrant_keeps_dropout_mask():
    def grads(ckpt):
        ember.manual_seed(0)
        w = ember.tensor(W, requires_grad=True)
        x = ember.tensor(X, requires_grad=True)

        def f(h):
            return ember.nn.functional.dropout(h @ w, 0.5).exp()
        y = ember.utils.checkpoint.checkpoint(f, x, use_reentrant=False) if ckpt else f(x)
        y.sum().backward()
        return y, x.grad, w.grad
    for a, b in zip(grads(True), grads(False)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)


def test_checkpoint_non_reentrant_detects_a_different_recomputation():
    calls = [0]

    def f(h):
        calls[0] += 1
        return h.exp() if calls[0] == 1 else h.exp().exp()
    x = ember.tensor(X, requires_grad=True)
    y = ember.utils.checkpoint.checkpoint(f, x, use_reentrant=False)
    with pytest.raises(ember.utils.checkpoint.CheckpointError):
        y.sum().backward()


def test_checkpoint_use_reentrant_default_warns_and_kwargs():
    for t in (ember, torch):
        x = t.tensor(X, requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            _ckpt(t).checkpoint(lambda h: h.sin(), x)
        assert any("use_reentrant parameter should be passed" in str(m.message) for m in w)
        with pytest.raises(ValueError, match="Unexpected keyword arguments"):
            _ckpt(t).checkpoint(lambda h, s: h * s, x, use_reentrant=True, s=2.0)
        y = _ckpt(t).checkpoint(lambda h, s: h * s, x, use_reentrant=False, s=2.0)
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), 2.0)
