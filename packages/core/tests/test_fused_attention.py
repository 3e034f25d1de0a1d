"""core's `_fused_attention` pair on CPU (the decompositions: the reference the cuda flash kernels
are held to): output and logsumexp against PyTorch, gradients through the fused backward op,
double backward (the backward's decomposition recomputes P, so second derivatives are exact),
and scaled_dot_product_attention on CPU keeping its own decomposition."""
import numpy as np
import pytest
import torch

import ember
from ember._ops import OPS

FUSED = OPS["_fused_attention"]


def _arrs(seed, shapes, dt="float64"):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dt) for s in shapes]


def _torch_math(q, k, v, mask, causal, scale):
    s = q @ k.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:]).tril().logical_not(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(mask.logical_not(), float("-inf")) if mask.dtype == torch.bool \
            else s + mask
    return torch.softmax(s, -1) @ v, s.logsumexp(-1)


@pytest.mark.parametrize("causal,mask", [(False, None), (True, None), (False, "bool"),
                                         (False, "add")])
def test_values_and_grads(causal, mask):
    q, k, v, g = _arrs(0, [(2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 4), (2, 3, 5, 4)])
    em = tm = None
    if mask == "bool":
        mm = np.random.default_rng(1).random((5, 7)) > 0.4
        mm[:, 0] = True
        em, tm = ember.tensor(mm), torch.tensor(mm)
    elif mask == "add":
        mm = _arrs(2, [(3, 1, 7)])[0]
        em, tm = ember.tensor(mm), torch.tensor(mm)
    eq, ek, ev = (ember.tensor(a, requires_grad=True) for a in (q, k, v))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    out, lse = FUSED(eq, ek, ev, em, causal, 0.6)
    tout, tlse = _torch_math(tq, tk, tv, tm, causal, 0.6)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(lse.detach().numpy(), tlse.detach().numpy(), rtol=1e-10)
    out.backward(ember.tensor(g))
    tout.backward(torch.tensor(g))
    for a, b in ((eq, tq), (ek, tk), (ev, tv)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_double_backward():
    q, k, v = _arrs(3, [(1, 2, 4, 3), (1, 2, 6, 3), (1, 2, 6, 3)])
    eq, ek, ev = (ember.tensor(a, requires_grad=True) for a in (q, k, v))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    o = FUSED(eq, ek, ev, None, True, 0.7)[0]
    to = _torch_math(tq, tk, tv, None, True, 0.7)[0]
    g = ember.autograd.grad((o ** 2).sum(), [eq, ek, ev], create_graph=True)
    tg = torch.autograd.grad((to ** 2).sum(), [tq, tk, tv], create_graph=True)
    gg = ember.autograd.grad(sum((x ** 3).sum() for x in g), [eq, ek, ev])
    tgg = torch.autograd.grad(sum((x ** 3).sum() for x in tg), [tq, tk, tv])
    for a, b in zip(g + gg, tg + tgg):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-8,
                                   atol=1e-10)


def test_fully_masked_row_is_zero():
    q, k, v = _arrs(4, [(1, 1, 3, 4), (1, 1, 5, 4), (1, 1, 5, 4)], "float32")
    mm = np.ones((3, 5), bool)
    mm[1] = False
    out, lse = FUSED(ember.tensor(q), ember.tensor(k), ember.tensor(v), ember.tensor(mm), False,
                     0.5)
    assert (out.numpy()[0, 0, 1] == 0).all() and lse.numpy()[0, 0, 1] == -np.inf
    assert out.dtype == ember.float32 and lse.dtype == ember.float32


def test_cpu_sdpa_keeps_its_decomposition():
    calls = []
    saved = FUSED.decomp
    FUSED.decomp = lambda *a: calls.append(1) or saved(*a)
    try:
        q = ember.randn(1, 2, 4, 8)
        ember.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    finally:
        FUSED.decomp = saved
    assert not calls
