"""An op that saves its own output for backward (relu, exp, tanh, sigmoid, softmax) keeps an
alias of the output, not the output itself: output -> node -> saved -> output would be a cycle
that only the garbage collector frees, so every such activation outlived its step. Checked with
the collector off, on the Python path and on ember._C's native path; the saved output still
catches in-place changes and still carries double backward."""
import gc
import weakref

import pytest

import ember

OPS = {"relu": lambda x: x.relu(), "exp": ember.exp, "tanh": ember.tanh,
       "sigmoid": ember.sigmoid, "softmax": lambda x: ember.softmax(x, 0)}


@pytest.fixture(params=[True, False], ids=["native", "python"])
def native(request):
    prev = ember._native.enabled()
    ember._native.set_enabled(request.param)
    yield request.param
    ember._native.set_enabled(prev)


@pytest.fixture
def no_gc():
    gc.collect()
    gc.disable()
    yield
    gc.enable()


@pytest.mark.parametrize("name", OPS)
def test_output_freed_without_the_collector(native, no_gc, name):
    x = ember.randn(64, requires_grad=True)
    y = OPS[name](x)
    assert y.grad_fn is not None
    r = weakref.ref(y)
    node = weakref.ref(y.grad_fn)
    del y
    assert r() is None and node() is None


@pytest.mark.parametrize("name", OPS)
def test_backward_through_saved_output_unchanged(native, name):
    import torch
    xv = [0.3, -1.2, 2.0, 0.7]
    x = ember.tensor(xv, requires_grad=True)
    tx = torch.tensor(xv, requires_grad=True)
    top = {"relu": torch.relu, "exp": torch.exp, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
           "softmax": lambda t: torch.softmax(t, 0)}[name]
    w = [1.0, 2.0, -1.0, 0.5]
    (OPS[name](x) * ember.tensor(w)).sum().backward()
    (top(tx) * torch.tensor(w)).sum().backward()
    assert x.grad.tolist() == pytest.approx(tx.grad.tolist(), rel=1e-6, abs=1e-7)


def test_inplace_change_of_saved_output_is_caught(native):
    x = ember.randn(8, requires_grad=True)
    y = x.sigmoid()
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_double_backward_through_saved_output(native):
    x = ember.tensor([0.5, -0.25, 1.5], requires_grad=True)
    y = x.exp()
    (g,) = ember.autograd.grad(y.sum(), x, create_graph=True)
    g.sum().backward()
    assert x.grad.tolist() == pytest.approx(ember.exp(x.detach()).tolist(), rel=1e-6)
