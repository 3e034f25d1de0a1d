"""ember.compile resuming after a graph break (print, .item(), an unsupported call) in frames with
closures: lambdas and nested functions over the frame's cells, the compiled function's own free
variables (a lambda the breaking call runs reads them: it raised NameError, its cells rebuilt
empty), and a zero-argument super() (its `__class__` free variable) after the break."""
import numpy as np
import pytest

import ember
import ember._dynamo as dynamo

nn = ember.nn


@pytest.fixture(autouse=True)
def _reset():
    dynamo.reset()
    yield
    dynamo.reset()


def _check(f, *args):
    want = f(*args)
    for _ in range(2):   # the capture, then the cached entry and its resume function
        np.testing.assert_allclose(ember.compile(f, backend="eager")(*args).numpy(),
                                   want.numpy(), rtol=1e-6)


def _outer():
    z = 5.0

    def f(x):
        k = 2.0
        print("break")
        return (lambda t: t + k + z)(x)
    return f


def lam_after_print(x):
    k = 2.0
    y = (lambda t: t * k)(x)
    print("break")
    return (lambda t: t + k)(y)


def lam_after_item(x):
    k = 2.0
    y = x.sum().item()
    return (lambda t: t + k + y)(x)


def nested_def_after_break(x, k=3.0):
    print("break")

    def inner(t):
        return t * k
    return inner(x)


def cell_reassigned(x):
    k = 2.0
    if x.sum().item() > 0:
        k = 3.0
    return (lambda t: t + k)(x)


class Base(nn.Module):
    def forward(self, x):
        return x * 2


class Child(Base):
    def forward(self, x):
        k = 3.0
        print("break")
        y = super().forward(x)          # zero-argument super() after the break
        return (lambda t: t * k + 1)(y)


def _free_variable_users():
    z = 5.0

    def lam_breaks(x):        # the lambda itself breaks: it is rebuilt over z's cell
        return (lambda t: print("break") or t + z)(x)

    def key_lambda(x):        # a lambda passed to the breaking call (sorted)
        k = 1.0
        return sorted([x, x * 2], key=lambda t: float((t * z * k).sum()))[0]

    def comprehension(x):     # a comprehension over z that breaks
        return [print("break") or v + z for v in [x]][0]
    return [lam_breaks, key_lambda, comprehension]


@pytest.mark.parametrize("f", _free_variable_users(), ids=lambda f: f.__name__)
def test_free_variables_of_the_compiled_function_in_a_rebuilt_lambda(f):
    _check(f, ember.tensor([1.0, -2.0, 3.0]))


@pytest.mark.parametrize("f", [_outer(), lam_after_print, lam_after_item, nested_def_after_break,
                               cell_reassigned], ids=lambda f: f.__name__)
def test_closures_after_a_break(f):
    _check(f, ember.tensor([1.0, -2.0, 3.0]))


def test_zero_argument_super_after_a_break():
    _check(Child(), ember.tensor([1.0, -2.0, 3.0]))
