"""The single-pass backward ops of the CPU train steps against torch: threshold_backward (relu's),
_softmax_backward_data / _log_softmax_backward_data, slice_backward (split's), the dense
embedding backward, and the scalar operand of mul / div getting no gradient. Values, gradients,
double backward and the errors torch raises."""
import numpy as np
import pytest
from harness import check, check_error, torch

import ember

NAN = np.float32(np.nan)


def F(t):
    return t.nn.functional


def _grads(fn, x0, create_graph=False):
    """(first grad, second grad) of fn on ember and on torch."""
    out = []
    for t in (ember, torch):
        x = t.tensor(x0, requires_grad=True)
        g, = t.autograd.grad(fn(t, x), x, create_graph=create_graph)
        gg = t.autograd.grad((g * g).sum(), x)[0].detach().numpy() if create_graph else None
        out.append((g.detach().numpy(), gg))
    return out


def test_relu_threshold_backward_nan_and_double_backward():
    x0 = np.array([[1.0, -1.0, 0.0, NAN, 2.0, 0.5]], np.float32)
    for fn in (lambda t, x: (t.relu(x) * 3).sum(),
               lambda t, x: F(t).threshold(x, 0.5, 7.0).sum()):
        (e, _), (w, _) = _grads(fn, x0)
        np.testing.assert_array_equal(e, w)   # NaN passes the gradient through, as in torch
    (e, ee), (w, ww) = _grads(lambda t, x: (t.relu(x) ** 2).sum(), x0[:, [0, 1, 4]],
                              create_graph=True)
    np.testing.assert_allclose(e, w)
    np.testing.assert_allclose(ee, ww)


@pytest.mark.parametrize("shape", [(64, 64, 24, 24), (3, 5)])
def test_relu_grad(shape):
    check(lambda t, x: t.relu(x), shapes=[shape], grad=True)
    check(lambda t, x: ember.ops.aten.threshold_backward(x, x * 2, 0.1) if t is ember
          else t.ops.aten.threshold_backward(x, x * 2, 0.1), shapes=[shape])


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", [((16, 4, 33, 33), -1), ((5, 7), 0), ((6,), 0)])
def test_softmax_backward(name, shape, dim):
    check(lambda t, x: getattr(F(t), name)(x, dim), shapes=[shape], grad=True)
    (e, ee), (w, ww) = _grads(lambda t, x: (getattr(F(t), name)(x, dim) * x.flip(0)).sum(),
                              np.random.default_rng(1).standard_normal(shape), create_graph=True)
    np.testing.assert_allclose(e, w, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ee, ww, rtol=1e-6, atol=1e-9)


def test_softmax_backward_errors():
    def op(t, name):
        return getattr(t.ops.aten, name)
    # (torch checks the sizes in softmax's backward only; ember in both)
    check_error(lambda t: op(t, "_softmax_backward_data")(t.zeros(3, 4), t.zeros(2, 4), 1,
                                                          t.float32), match="same size")
    for name in ("_softmax_backward_data", "_log_softmax_backward_data"):
        check_error(lambda t, n=name: op(t, n)(t.zeros(3, 4), t.zeros(3, 4), 2, t.float32),
                    match="Dimension out of range")
        check_error(lambda t, n=name: op(t, n)(t.zeros(3, 4, dtype=t.float64), t.zeros(3, 4), 1,
                                               t.float32), match="expected scalar type Double")


def test_split_backward():
    def fn(t, x):
        q, k, v = x.split(3, dim=1)
        return (q * 2 + k * 3 + v ** 2).sum() + x[:, 1:100:2].sum() + x.narrow(2, -3, 2).sum()
    x0 = np.random.default_rng(0).standard_normal((4, 9, 6))
    (e, ee), (w, ww) = _grads(fn, x0, create_graph=True)
    np.testing.assert_allclose(e, w)
    np.testing.assert_allclose(ee, ww)
    check(lambda t, x: x.chunk(3, dim=-1)[1] * 2, shapes=[(5, 12)], grad=True)
    check(lambda t, g: t.ops.aten.slice_backward(g, [2, 7], 1, 4, 7, 1), shapes=[(2, 3)])
    check_error(lambda t: t.ops.aten.slice_backward(t.zeros(2, 3), [2, 7], 1, 2, 6, 1))


@pytest.mark.parametrize("padding_idx", [None, 3])
def test_embedding_backward_duplicates(padding_idx):
    idx = np.random.default_rng(0).integers(0, 10, (16, 9))

    def fn(t, w):
        return F(t).embedding(t.tensor(idx), w, padding_idx=padding_idx)
    check(fn, shapes=[(12, 5)], grad=True)
    check(lambda t, g: t.ops.aten.embedding_dense_backward(
        g, t.zeros(0, dtype=t.int64), 4, -1, False), shapes=[(0, 5)])


def test_scalar_operand_gets_no_gradient():
    x0 = np.random.default_rng(0).standard_normal((3, 4))
    (e, ee), (w, ww) = _grads(lambda t, x: (x * 0.5 + 2 * x + x / 3.0 + 4.0 / (x + 9)).sum(), x0,
                              create_graph=True)
    np.testing.assert_allclose(e, w)
    np.testing.assert_allclose(ee, ww)
