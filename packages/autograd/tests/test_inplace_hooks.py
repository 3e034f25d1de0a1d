"""In-place ops, views (CopySlices), saved-tensor version checks and hooks, against torch."""
import numpy as np
from harness import check, check_error, compare, torch

import ember


def test_inplace_on_nonleaf_rebases_history():
    check(lambda t, x, y: (x * 2).mul_(y).add_(1).sub_(x), shapes=[(3,), (3,)], grad=True)


def test_inplace_grad_fn_name():
    x = ember.ones(3, requires_grad=True)
    y = x * 2
    y.add_(1)
    assert y.grad_fn.name() == "AddBackward0"
    assert y.grad_fn.next_functions[0][0].name() == "MulBackward0"


def test_inplace_on_view_of_nonleaf():
    def f(t, x, y):
        b = x * 1
        v = b.narrow(0, 1, 2)
        v.mul_(y)
        return b * b
    check(f, shapes=[(4, 3), (2, 3)], grad=True)

    def g(t, x, y):
        b = x.sin() * 2
        b.select(1, 0).copy_(y)
        b.transpose(0, 1).narrow(0, 2, 1).zero_()
        return b.sin()
    check(g, shapes=[(4, 3), (4,)], grad=True)


def test_inplace_view_grad_fn_names():
    x = ember.ones(4, 3, requires_grad=True)
    b = x * 1
    v = b.narrow(0, 1, 2)
    v.mul_(2)
    assert b.grad_fn.name() == "CopySlices"
    assert v.grad_fn is not None and v.requires_grad


def test_copy_into_view_of_nograd_base():
    def f(t, y):
        b = t.zeros(4, 3)
        b.narrow(0, 1, 2).copy_(y)
        return b * 2
    check(f, shapes=[(2, 3)], grad=True)


def test_version_check_error():
    def f(t):
        x = t.ones(3, requires_grad=True)
        y = x * 2
        z = y * y
        y.add_(1)
        z.sum().backward()
    check_error(f, match="one of the variables needed for gradient computation has been "
                         "modified by an inplace operation")
    x = ember.ones(3, requires_grad=True)
    y = x * 2
    z = y.exp()
    z.add_(1)
    try:
        z.sum().backward()
        raise AssertionError("no error")
    except RuntimeError as e:
        assert "[ember.FloatTensor [3]], which is output 0 of Exp, is at version 1; " \
               "expected version 0 instead." in str(e), str(e)

    def f2(t):  # a saved input names its current grad_fn (here the in-place op's)
        x = t.ones(3, requires_grad=True)
        y = x * 2
        z = y * y
        y.sub_(1)
        z.sum().backward()
    check_error(f2, match=r"\[\w+.FloatTensor \[3\]\], which is output 0 of Sub, is at version 1")


def test_no_version_error_when_not_saved():
    def f(t):
        x = t.ones(3, requires_grad=True)
        y = x * 2
        z = y + 1   # add saves nothing
        y.add_(5)
        z.sum().backward()
        return x.grad
    compare(f(ember), f(torch))


def test_view_of_leaf_inplace_error():
    check_error(lambda t: t.ones(3, 2, requires_grad=True).narrow(0, 0, 1).mul_(2),
                match="a view of a leaf Variable that requires grad is being used in an "
                      "in-place operation.")


def test_inplace_under_no_grad_on_leaf_ok():
    x = ember.ones(3, requires_grad=True)
    with ember.no_grad():
        x.mul_(2)
    assert x.is_leaf and x.grad_fn is None and x._version == 1


def test_tensor_hooks():
    def f(t, x):
        calls = []
        y = x * 2
        h1 = y.register_hook(lambda g: g * 10)
        y.register_hook(lambda g: calls.append(g.sum().item()))
        h2 = x.register_hook(lambda g: g + 1)
        x.register_hook(lambda g: calls.append(g.sum().item()))
        h1.remove()
        (y * y).sum().backward()
        h2.remove()
        return x.grad, calls
    e, t_ = f(ember, ember.ones(3, requires_grad=True)), f(torch, torch.ones(3, requires_grad=True))
    compare(e[0], t_[0])
    assert e[1] == t_[1]


def test_post_accumulate_hook_and_errors():
    seen = []
    x = ember.ones(2, requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()))
    (x * 3).sum().backward()
    assert seen == [[3.0, 3.0]]
    check_error(lambda t: (t.ones(2, requires_grad=True) * 2).register_post_accumulate_grad_hook(
        lambda p: None), match="post accumulate grad hooks cannot be registered on non-leaf")
    check_error(lambda t: t.ones(2).register_hook(lambda g: g),
                match="cannot register a hook on a tensor that doesn't require gradient")


def test_retain_grad():
    def f(t, x):
        y = x * x
        y.retain_grad()
        z = y.exp()
        z.retain_grad()
        x.retain_grad()  # no-op on a leaf
        z.sum().backward()
        return y.grad, z.grad, y.retains_grad, x.retains_grad
    a = np.array([0.5, 1.0, 1.5], "float32")
    e = f(ember, ember.tensor(a, requires_grad=True))
    t_ = f(torch, torch.tensor(a, requires_grad=True))
    compare(e, t_)


def test_node_hooks():
    x = ember.ones(2, requires_grad=True)
    y = x * 2
    seen = []
    y.grad_fn.register_prehook(lambda go: seen.append("pre"))
    y.grad_fn.register_hook(lambda gi, go: seen.append("post"))
    y.sum().backward()
    assert seen == ["pre", "post"]


def test_requires_grad_flags():
    check_error(lambda t: setattr(t.ones(2, requires_grad=True) * 2, "requires_grad", False),
                match="you can only change requires_grad flags of leaf variables")
    check_error(lambda t: t.ones(2, dtype=t.int64).requires_grad_(),
                match="only Tensors of floating point")
    x = ember.ones(2).requires_grad_()
    assert x.requires_grad and x.is_leaf


def test_view_sees_later_inplace_on_base():
    def f(t, x):
        b = x * 1
        v = b.narrow(0, 1, 2)
        w = b.select(1, 0)
        b.mul_(x)          # v and w now read the new values
        w.add_(1)          # and this one goes back into b through CopySlices
        return v * 2 + b.sum(), w * 3
    check(f, shapes=[(4, 3)], grad=True)
