"""backend="inductor": ops lowered into fused kernels rather than extern calls (logsumexp as a
max and a sum-exp reduction; where, masked_fill and clamp as pointwise formulas), equal to
PyTorch eager, values and gradients, with kernel counts."""
import numpy as np
import pytest
import torch
from inductor_helpers import Recorder

import ember
import ember._dynamo as dynamo


@pytest.fixture(autouse=True)
def _reset():
    dynamo.reset()
    yield
    dynamo.reset()


@pytest.mark.parametrize("dim, keepdim", [(1, False), (0, True), ((0, 1), False), (-1, True)])
def test_logsumexp_one_kernel_with_infinite_rows(dim, keepdim):
    x = np.random.default_rng(0).standard_normal((6, 7)).astype(np.float32)
    x[2, :] = -np.inf   # all -inf: shifted by 0, result -inf
    x[3, 1] = np.inf
    rec = Recorder()
    out = ember.compile(lambda a: ember.logsumexp(a * 1.0, dim, keepdim) * 2,
                        backend=rec)(ember.tensor(x))
    ref = torch.logsumexp(torch.tensor(x), dim, keepdim) * 2
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    assert rec.counts() == [(1, 0)]


def test_logsumexp_gradient():
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    a = ember.tensor(x, requires_grad=True)
    rec = Recorder()
    ember.compile(lambda a: ember.logsumexp(a, 1).sum(), backend=rec)(a).backward()
    t = torch.tensor(x, requires_grad=True)
    torch.logsumexp(t, 1).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert all(e == 0 for _, e in rec.counts())


@pytest.mark.parametrize("name, fn", [
    ("where", lambda t, a: t.where(a > 0, a, a * 2) + 1),
    ("masked_fill", lambda t, a: a.masked_fill(a > 0.5, 0.0) * 2),
    ("clamp", lambda t, a: a.clamp(-0.5, 0.5) * 2),
])
def test_where_masked_fill_clamp_fuse_into_one_kernel(name, fn):
    x = np.random.default_rng(2).standard_normal((8, 8)).astype(np.float32)
    rec = Recorder()
    out = ember.compile(lambda a: fn(ember, a), backend=rec)(ember.tensor(x))
    np.testing.assert_allclose(out.numpy(), fn(torch, torch.tensor(x)).numpy(), rtol=1e-6)
    assert rec.counts() == [(1, 0)]
