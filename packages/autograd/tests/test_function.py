"""ember.autograd.Function against torch.autograd.Function: both styles, ctx features."""
import numpy as np
import pytest
from harness import compare, torch

import ember


def make(t):
    class MyExp(t.autograd.Function):
        @staticmethod
        def forward(x):
            return x.exp()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    class ScaleMul(t.autograd.Function):  # old style, a non-tensor argument, two outputs
        @staticmethod
        def forward(ctx, x, k, y):
            ctx.k = k
            ctx.save_for_backward(x, y)
            ctx.mark_non_differentiable()
            return x * y * k, (x > 0)

        @staticmethod
        def backward(ctx, g, _):
            x, y = ctx.saved_tensors
            assert ctx.needs_input_grad == (True, False, True)
            return g * y * ctx.k, None, g * x * ctx.k

    class AddOneInplace(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g
    return MyExp, ScaleMul, AddOneInplace


X = np.array([0.5, -1.0, 2.0], "float32")
Y = np.array([1.5, 2.0, -0.5], "float32")


def run(t):
    MyExp, ScaleMul, AddOneInplace = make(t)
    x = t.tensor(X, requires_grad=True)
    y = t.tensor(Y, requires_grad=True)
    e = MyExp.apply(x * 2)
    s, mask = ScaleMul.apply(e, 3.0, y)
    h = s * 1
    AddOneInplace.apply(h)
    (h * h).sum().backward(create_graph=False)
    names = (e.grad_fn.name(), s.grad_fn.name(), mask.requires_grad, h.grad_fn.name())
    return x.grad, y.grad, names


def test_function_matches_torch():
    e, t_ = run(ember), run(torch)
    compare(e[:2], t_[:2])
    assert e[2] == t_[2]


def test_function_double_backward():
    def f(t):
        MyExp = make(t)[0]
        x = t.tensor(X.astype("float64"), requires_grad=True)
        (g,) = t.autograd.grad(MyExp.apply(x).sum(), x, create_graph=True)
        (gg,) = t.autograd.grad(g.sum(), x)
        return g, gg
    compare(f(ember), f(torch), "float64")


def test_function_errors_and_freed():
    MyExp = make(ember)[0]
    x = ember.tensor(X, requires_grad=True)
    y = MyExp.apply(x)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        _ = y.grad_fn.saved_tensors

    class Bad(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, g):
            return g
    with pytest.raises(RuntimeError, match="returned an incorrect number of gradients"):
        Bad.apply(x, x).sum().backward()


def test_materialize_and_once_differentiable():
    class Two(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 1, x * 2

        @staticmethod
        @ember.autograd.function.once_differentiable
        def backward(ctx, g1, g2):
            assert g2 is None and not ember.is_grad_enabled()
            return g1
    x = ember.tensor(X, requires_grad=True)
    a, b = Two.apply(x)
    a.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]
