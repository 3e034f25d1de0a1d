"""autograd.grad with several outputs of one multi-output op as roots, each with its own
grad_output (a root node reached twice once counted its edges twice and left the inputs behind
it without a gradient): values against PyTorch."""
import numpy as np
import pytest
import torch

import ember

RNG = np.random.default_rng(7)
A = RNG.standard_normal((4, 4))
SPD = A @ A.T + 4 * np.eye(4)
RNG_G = [RNG.standard_normal(64) for _ in range(4)]  # grad_outputs, cut to each output

CASES = {
    "slogdet": lambda t, a: t.linalg.slogdet(a),
    "qr": lambda t, a: t.linalg.qr(a),
    "svd": lambda t, a: t.linalg.svd(a),
    "eigh": lambda t, a: t.linalg.eigh(a),
    "max_dim": lambda t, a: t.max(a, 1),
    "sort": lambda t, a: t.sort(a, 1),
    "split": lambda t, a: t.split(a, 2),
    "layer_norm_then_slogdet": lambda t, a: (
        t.native_layer_norm(a, [4], None, None, 1e-5)[0],) + tuple(t.linalg.slogdet(a)),
}


def _grads(t, fn, x_np, create_graph=False):
    x = t.tensor(x_np, requires_grad=True)
    h = x * 1.5  # a non-leaf between the input and the op: its node runs after the op's
    outs = [o for o in fn(t, h) if o.dtype.is_floating_point]
    gos = [t.tensor(RNG_G[i][: o.numel()].reshape(tuple(o.shape))) for i, o in enumerate(outs)]
    gx, gh = t.autograd.grad(outs, [x, h], grad_outputs=gos, create_graph=create_graph)
    return x, gx, gh



@pytest.mark.parametrize("name", sorted(CASES))
def test_grad_several_outputs_of_one_op(name):
    _, ge, he = _grads(ember, CASES[name], SPD)
    _, gt, ht = _grads(torch, CASES[name], SPD)
    np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(he.numpy(), ht.numpy(), rtol=1e-8, atol=1e-10)


def test_grad_several_outputs_create_graph_second_order():
    res = []
    for t in (ember, torch):
        x, gx, _ = _grads(t, CASES["slogdet"], SPD, create_graph=True)
        (gg,) = t.autograd.grad((gx * gx).sum(), x)
        res.append(gg.detach().numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-7, atol=1e-9)


def test_backward_several_outputs_accumulates_into_leaf():
    res = []
    for t in (ember, torch):
        x = t.tensor(SPD, requires_grad=True)
        q, r = t.linalg.qr(x)
        t.autograd.backward([q, r], [t.ones_like(q), t.full_like(r, 2.0)])
        res.append(x.grad.numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-8, atol=1e-10)
