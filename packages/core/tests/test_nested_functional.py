"""Jagged nested tensors through ember.nn.functional against torch's jagged layout: linear,
activations, softmax, layer_norm, a multi-head attention block with
scaled_dot_product_attention (values and gradients), to_padded_tensor and unbind."""
import re

import numpy as np
import pytest
import torch

import ember

RNG = np.random.default_rng(3)
LENS = (3, 5, 2)
XS = [RNG.standard_normal((n, 8)) for n in LENS]
W = RNG.standard_normal((8, 8)) * 0.3


def _nt(m, requires_grad=False):
    ts = [m.tensor(x, dtype=m.float64, requires_grad=requires_grad) for x in XS]
    return m.nested.as_nested_tensor(ts, layout=m.jagged), ts


def _same(e, t, rtol=1e-10):
    eu, tu = e.unbind(), t.unbind()
    assert len(eu) == len(tu)
    for a, b in zip(eu, tu):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=1e-12)


F_CASES = {
    "linear": lambda m, x: m.nn.functional.linear(x, m.tensor(W), m.ones(8, dtype=m.float64)),
    "relu": lambda m, x: m.nn.functional.relu(x),
    "gelu": lambda m, x: m.nn.functional.gelu(x),
    "silu": lambda m, x: m.nn.functional.silu(x),
    "softmax": lambda m, x: m.nn.functional.softmax(x, dim=-1),
    "log_softmax": lambda m, x: m.nn.functional.log_softmax(x, -1),
    "layer_norm": lambda m, x: m.nn.functional.layer_norm(x, (8,)),
    "module": lambda m, x: m.nn.Sequential(m.nn.LayerNorm(8), m.nn.ReLU()).double()(x),
    "add_mul": lambda m, x: (x + x) * 2 - x,
    "method_pointwise": lambda m, x: x.sin().exp(),
}


@pytest.mark.parametrize("name", sorted(F_CASES))
def test_functional_on_jagged(name):
    e, _ = _nt(ember)
    t, _ = _nt(torch)
    _same(F_CASES[name](ember, e), F_CASES[name](torch, t))


def _attention(m, x, w_qkv, heads=2):
    """(B, j, 8) -> qkv -> (B, heads, j, 4) -> sdpa -> (B, j, 8)."""
    F = m.nn.functional
    qkv = F.linear(x, w_qkv)                                   # (B, j, 24)
    q, k, v = (F.linear(x, w) for w in w_qkv.chunk(3, 0))      # (B, j, 8) each
    q, k, v = (y.unflatten(-1, (heads, 4)).transpose(1, 2) for y in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v)                # (B, heads, j, 4)
    return o.transpose(1, 2), qkv


def test_sdpa_block_values_and_grads():
    wq = RNG.standard_normal((24, 8)) * 0.3
    res = []
    for m in (ember, torch):
        x, comps = _nt(m, requires_grad=True)
        w = m.tensor(wq, requires_grad=True)
        o, _ = _attention(m, x, w)
        padded = m.nested.to_padded_tensor(o, 0.0)             # (B, max_j, heads, 4)
        (padded * m.arange(padded.numel(), dtype=m.float64).reshape(padded.shape)
         ).sum().backward()
        res.append((padded.detach().numpy(), [c.grad.numpy() for c in comps], w.grad.numpy()))
    (pe, ge, we), (pt, gt, wt) = res
    np.testing.assert_allclose(pe, pt, rtol=1e-10, atol=1e-12)
    for a, b in zip(ge, gt):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(we, wt, rtol=1e-9, atol=1e-12)


def test_padded_unbind_and_shape():
    e, _ = _nt(ember)
    t, _ = _nt(torch)
    for pad, size in ((0.0, None), (-1.5, (3, 6, 8))):
        a = ember.nested.to_padded_tensor(e, pad, size)
        b = torch.nested.to_padded_tensor(t, pad, size)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(e.to_padded_tensor(0.0).numpy(), t.to_padded_tensor(0.0).numpy())
    assert [tuple(u.shape) for u in e.unbind()] == [tuple(u.shape) for u in t.unbind()]
    # PyTorch numbers its ragged dims j1, j2, ... process-wide: compare the rest
    assert re.sub(r"j\d+", "j", str(e.shape)) == re.sub(r"j\d+", "j", str(t.shape)).replace(
        "torch.", "ember.")
    assert (e.dim(), e.size(0), e.size(-1), e.is_nested) == (t.dim(), t.size(0), t.size(-1),
                                                              t.is_nested)
    with pytest.raises(RuntimeError):
        ember.nn.functional.softmax(e, 0)
