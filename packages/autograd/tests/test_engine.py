"""The autograd engine against torch: grads, graph structure, errors, retain/create graph."""
import numpy as np
import pytest
from harness import check, check_error, compare, torch

import ember


def both(fn, *arrays, dtype="float32"):
    """Run fn(module, *leaves) with fresh requires-grad leaves on ember and torch."""
    el = [ember.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    tl = [torch.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    return fn(ember, *el), fn(torch, *tl), el, tl


RNG = np.random.default_rng(0)
A = RNG.uniform(0.5, 2.0, (3, 4))
B = RNG.uniform(0.5, 2.0, (4,))


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "minimum", "atan2",
                                  "pow", "remainder", "fmod"])
def test_binary_grads(name):
    check(lambda t, x, y: getattr(t, name)(x, y), shapes=[(3, 4), (4,)], grad=True, low=0.5,
          high=2.0)


@pytest.mark.parametrize("name", ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
                                  "sqrt", "rsqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh",
                                  "erf", "erfc", "sigmoid", "abs", "neg", "reciprocal", "square",
                                  "atan", "asinh", "relu", "lgamma"])
def test_unary_grads(name):
    check(lambda t, x: getattr(t, name)(x), shapes=[(3, 4)], grad=True, low=0.2, high=0.9)


def test_unary_domain_grads():
    check(lambda t, x: t.asin(x) + t.acos(x) * 2 + t.atanh(x), grad=True, low=-0.9, high=0.9)
    check(lambda t, x: t.acosh(x), grad=True, low=1.1, high=3.0)
    check(lambda t, x: t.erfinv(x), grad=True, low=-0.9, high=0.9)


def test_activation_grads():
    check(lambda t, x: t.nn.functional.gelu(x), grad=True)
    check(lambda t, x: t.nn.functional.gelu(x, approximate="tanh"), grad=True)
    check(lambda t, x: t.nn.functional.silu(x), grad=True)
    check(lambda t, x, y: t.where(x > 0, x, y), shapes=[(3, 4), (3, 4)], grad=True)


def test_scalar_args_and_promotion():
    check(lambda t, x: 2 - x * 3 + 1.5 / x - x ** 2 + 2 ** x, grad=True, low=0.5)
    check(lambda t, x, y: x.double() * y, shapes=[(3,), (3,)], grad=True)


def test_broadcast_grads_sum_to_input_shape():
    check(lambda t, x, y, z: x * y + z, shapes=[(2, 3, 4), (3, 1), (1,)], grad=True)


def test_views_and_copies_grads():
    check(lambda t, x: x.t().reshape(-1) * 2, shapes=[(3, 4)], grad=True)
    check(lambda t, x: x.unsqueeze(1).expand(3, 5, 4).exp(), shapes=[(3, 4)], grad=True)
    check(lambda t, x: x.permute(2, 0, 1).contiguous().clone(), shapes=[(2, 3, 4)], grad=True)
    check(lambda t, x: x.select(0, 1) * x.narrow(1, 2, 1).sum(), shapes=[(3, 4)], grad=True)


def test_grad_fn_structure():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2).exp()
    assert y.grad_fn.name() == "ExpBackward0"
    (mul, nr), = y.grad_fn.next_functions
    assert mul.name() == "MulBackward0" and nr == 0
    acc, _ = mul.next_functions[0]
    assert acc.name() == "ember::autograd::AccumulateGrad" and acc.variable is x
    assert mul.next_functions[1] == (None, 0)
    assert x.is_leaf and not y.is_leaf and y.requires_grad
    assert x.add(1).grad_fn.name() == "AddBackward0"
    with ember.no_grad():
        assert (x * 2).grad_fn is None
    assert (x > 1).grad_fn is None and not (x > 1).requires_grad
    assert x.detach().grad_fn is None and x.detach()._base is None


def test_accumulates_into_leaves():
    eo, to, el, tl = both(lambda t, x, y: (x * y).sum(), A, B)
    eo.backward()
    to.backward()
    eo2, to2 = (el[0] * el[0]).sum(), (tl[0] * tl[0]).sum()
    eo2.backward()
    to2.backward()
    compare(el[0].grad, tl[0].grad)
    compare(el[1].grad, tl[1].grad)


def test_shared_grad_not_aliased():
    x = ember.ones(3, requires_grad=True)
    y = ember.ones(3, requires_grad=True)
    (x + y).sum().backward()
    x.grad.zero_()
    assert y.grad.tolist() == [1.0, 1.0, 1.0]


def test_errors():
    def second(t):
        x = t.ones(3, requires_grad=True)
        z = (x * x).sum()
        z.backward()
        z.backward()
    check_error(second, match="Trying to backward through the graph a second time")
    check_error(lambda t: t.ones(3).sum().backward(),
                match="element 0 of tensors does not require grad and does not have a grad_fn")
    check_error(lambda t: (t.ones(3, requires_grad=True) * 2).backward(),
                match="grad can be implicitly created only for scalar outputs")
    check_error(lambda t: t.ones(3, requires_grad=True).add_(1),
                match="a leaf Variable that requires grad is being used in an in-place")
    check_error(lambda t: t.add(t.ones(3, requires_grad=True), 1, out=t.empty(3)),
                match=r"add\(\): functions with out=... arguments don't support")

    def unused(t):
        x, y = t.ones(3, requires_grad=True), t.ones(2, requires_grad=True)
        t.autograd.grad((x * 2).sum(), [x, y])
    check_error(unused, match="The differentiated Tensor at index 1 appears to not have been")


def test_no_saved_tensors_backward_twice_ok():
    x = ember.ones(3, requires_grad=True)
    y = (x + 1).sum()
    y.backward()
    y.backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_view_nodes_save_no_values_backward_twice_ok():
    """q/k/v views of one split, reused by two graphs: the view nodes (a vjp taking *rest
    included) save sizes only, so the second backward runs, as in PyTorch."""
    def run(t):
        x = t.arange(12.0).reshape(2, 6).requires_grad_()
        q, k, _ = (x + 1).split(2, dim=1)
        q = q.view(2, 2, 1).transpose(1, 2)
        k = k.squeeze(-1).view(2, 1, 2)
        for _ in range(2):
            (q * k).sum().backward()
            (q @ k.transpose(-1, -2)).exp().sum().backward()
        return x.grad
    compare(run(ember), run(torch))


def test_retain_graph_and_grad_outputs():
    eo, to, el, tl = both(lambda t, x, y: (x * y).exp(), A, B)
    g = RNG.uniform(-1, 1, (3, 4)).astype("float32")
    for _ in range(2):
        eo.backward(ember.tensor(g), retain_graph=True)
        to.backward(torch.tensor(g), retain_graph=True)
    compare(el[0].grad, tl[0].grad)
    compare(el[1].grad, tl[1].grad)


def test_autograd_grad_inputs_and_allow_unused():
    eo, to, el, tl = both(lambda t, x, y: (x.exp() * 2).sum(), A, B)
    eg = ember.autograd.grad(eo, el, allow_unused=True)
    tg = torch.autograd.grad(to, tl, allow_unused=True)
    compare(eg[0], tg[0])
    assert eg[1] is None and tg[1] is None
    assert el[0].grad is None  # grad() does not accumulate
    eo, to, el, tl = both(lambda t, x, y: (x.exp() * y).sum(), A, B)
    e = ember.autograd.grad(eo, [el[1]], materialize_grads=True)
    compare(e[0], torch.autograd.grad(to, [tl[1]])[0])


def test_grad_wrt_intermediate():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    y = (h * h).sum()
    (gh,) = ember.autograd.grad(y, h)
    assert gh.tolist() == [6.0, 12.0]


def test_backward_inputs():
    eo, to, el, tl = both(lambda t, x, y: (x * y).sum(), A, B)
    eo.backward(inputs=[el[1]])
    to.backward(inputs=[tl[1]])
    assert el[0].grad is None and tl[0].grad is None
    compare(el[1].grad, tl[1].grad)


def test_create_graph_higher_order():
    def f(t, x):
        y = (x ** 3).sum()
        (g,) = t.autograd.grad(y, x, create_graph=True)
        (gg,) = t.autograd.grad(g.sum(), x, create_graph=True)
        (ggg,) = t.autograd.grad((gg * x.sin()).sum(), x)
        return g, gg, ggg
    e, t_, _, _ = both(lambda m, x: f(m, x), A, dtype="float64")
    compare(e, t_, "float64")


def test_create_graph_backward_accumulates_graph():
    x = ember.tensor([2.0], requires_grad=True)
    (x.exp() * x).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    g = x.grad
    x.grad = None
    g.sum().backward()
    tx = torch.tensor([2.0], requires_grad=True)
    (tx.exp() * tx).sum().backward(create_graph=True)
    tg = tx.grad
    tx.grad = None
    tg.sum().backward()
    compare(x.grad, tx.grad)


def test_multiple_roots_and_diamond():
    def f(t, x, y):
        h = x * y
        a, b = h.exp(), h.sin()
        t.autograd.backward([a.sum(), b.sum()])
        return x.grad, y.grad
    e, t_, _, _ = both(f, A, B)
    compare(e, t_)


def test_grad_wrt_intermediate_does_not_run_below_it():
    def f(t):
        x = t.ones(2, requires_grad=True)
        h = x * x          # saves x
        y = (h * 3).sum()
        with t.no_grad():
            x.add_(1)      # would fail h's backward, which grad(y, h) must not run
        return t.autograd.grad(y, h)
    compare(f(ember), f(torch))


def test_deep_graph():
    x = ember.ones(2, requires_grad=True)
    z = x
    for _ in range(3000):
        z = z * 1.0
    z.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_data_has_its_own_version_counter_detach_shares_it():
    # `.data` writes are invisible to saved-tensor checks; `detach()` writes are caught
    a = ember.ones(3, requires_grad=True)
    b = a * 2
    y = (b * b).sum()
    b.data.mul_(2)
    y.backward()
    assert a.grad.tolist() == [16.0, 16.0, 16.0]
    a = ember.ones(3, requires_grad=True)
    b = a * 2
    y = (b * b).sum()
    b.detach().mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
