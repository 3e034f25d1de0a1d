"""Batched matmuls of small matrices split across two threads (`_bmm.split_matmul`): the values
are the serial loop's bit for bit, broadcast batches and strided views included, gradients as
torch's; no split with one thread allowed or free, little work or one batch entry."""
import numpy as np
import pytest
import torch

import ember
from ember import _blas, _bmm


@pytest.fixture(autouse=True)
def _two_free_cores(monkeypatch):
    monkeypatch.setattr(_blas, "free_cores", lambda: 2)
    monkeypatch.setattr(_bmm, "_ON", True)
    before = ember.get_num_threads()
    yield
    ember.set_num_threads(before)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _serial(monkeypatch, fn):
    monkeypatch.setattr(_bmm, "_ON", False)
    try:
        return fn()
    finally:
        monkeypatch.setattr(_bmm, "_ON", True)


@pytest.mark.parametrize("shapes", [((16, 4, 128, 32), (16, 4, 32, 128)),
                                    ((9, 128, 64), (9, 64, 128)),
                                    ((5, 1, 128, 64), (1, 3, 64, 96))])
def test_split_equals_serial(monkeypatch, shapes):
    a, b = ember.tensor(_rand(*shapes[0])), ember.tensor(_rand(*shapes[1], seed=1))
    calls = []
    real = _bmm.split_matmul
    monkeypatch.setattr("ember._ops.linalg.split_matmul",
                        lambda *x: calls.append(1) or real(*x))
    ember.set_num_threads(2)
    got = (a @ b).numpy()
    each = 2 * a.shape[-2] * a.shape[-1] * b.shape[-1]
    assert calls and _bmm.split_matmul(a.numpy(), b.numpy(), each) is not None
    want = _serial(monkeypatch, lambda: (a @ b).numpy())
    np.testing.assert_array_equal(got, want)
    ref = torch.tensor(a.numpy()) @ torch.tensor(b.numpy())
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-4, atol=1e-4)


def test_strided_views_split(monkeypatch):
    """Attention's q @ k^T on head views of one (B, T, 3C) buffer (non-contiguous operands)."""
    qkv = ember.tensor(_rand(16, 128, 384))
    q = qkv[..., :128].view(16, 128, 4, 32).transpose(1, 2)
    k = qkv[..., 128:256].view(16, 128, 4, 32).transpose(1, 2)
    ember.set_num_threads(2)
    got = (q @ k.transpose(-2, -1)).numpy()
    want = _serial(monkeypatch, lambda: (q @ k.transpose(-2, -1)).numpy())
    np.testing.assert_array_equal(got, want)


def test_grads_through_bmm():
    a, b = _rand(8, 64, 32), _rand(8, 32, 64, seed=1)
    ember.set_num_threads(2)
    ae, be = ember.tensor(a, requires_grad=True), ember.tensor(b, requires_grad=True)
    ember.bmm(ae, be).tanh().sum().backward()
    at, bt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    torch.bmm(at, bt).tanh().sum().backward()
    np.testing.assert_allclose(ae.grad.numpy(), at.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(be.grad.numpy(), bt.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_no_split_where_it_does_not_pay(monkeypatch):
    a, b = _rand(16, 128, 32), _rand(16, 32, 128)
    ember.set_num_threads(2)
    assert _bmm.split_matmul(a, b, 2 * 128 * 32 * 128) is not None
    assert _bmm.split_matmul(a[:4, :8], b[:4, :, :8], 2 * 8 * 32 * 8) is None   # little work
    assert _bmm.split_matmul(a[:1], b[:1], 10 ** 8) is None                    # one entry
    assert _bmm.split_matmul(a.astype(np.int32), b.astype(np.int32), 10 ** 6) is None
    assert _bmm.split_matmul(a, b, 2 * _blas.FLOPS_PER_THREAD) is None   # BLAS threads each
    ember.set_num_threads(1)
    assert _bmm.split_matmul(a, b, 10 ** 6) is None
    ember.set_num_threads(2)
    monkeypatch.setattr(_blas, "free_cores", lambda: 1)   # a loaded machine
    assert _bmm.split_matmul(a, b, 10 ** 6) is None
