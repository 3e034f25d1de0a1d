"""matmul's vjp for a transposed 2-D weight (linear's w.t()): values match PyTorch, real and
complex, and the weight's grad comes out contiguous (accumulated without a strided copy)."""
import numpy as np
import pytest
import torch

import ember


@pytest.mark.parametrize("dt", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("xshape", [(6, 5), (2, 3, 5)])
def test_transposed_weight_grad(dt, xshape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xshape).astype(dt)
    w = rng.standard_normal((4, 5)).astype(dt)
    g = rng.standard_normal(xshape[:-1] + (4,)).astype(dt)
    if dt.startswith("complex"):
        x = x + 1j * rng.standard_normal(xshape).astype(dt)
        w = w + 1j * rng.standard_normal((4, 5)).astype(dt)
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    (ex @ ew.t()).backward(ember.tensor(g))
    (tx @ tw.t()).backward(torch.tensor(g))
    tol = 1e-5 if dt != "float64" else 1e-12
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol)
    assert ew.grad.is_contiguous()


def test_linear_module_grads_match_torch():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 7)).astype(np.float32)
    em, tm = ember.nn.Linear(7, 3), torch.nn.Linear(7, 3)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(em.weight.detach().numpy()))
        tm.bias.copy_(torch.tensor(em.bias.detach().numpy()))
    em(ember.tensor(x)).square().sum().backward()
    tm(torch.tensor(x)).square().sum().backward()
    np.testing.assert_allclose(em.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(em.bias.grad.numpy(), tm.bias.grad.numpy(), rtol=1e-5, atol=1e-5)
