"""ember.nn.functional vs torch: the less common ops (channel_shuffle, pdist, lp_pool, max_unpool,
margin losses, rrelu, gumbel_softmax, ctc_loss)."""
import numpy as np
import pytest
from harness import check, check_error

import ember


def F(t):
    return t.nn.functional


def test_channel_shuffle_pdist():
    check(lambda t, x: F(t).channel_shuffle(x, 2), shapes=[(2, 6, 3)], grad=True)
    check_error(lambda t: F(t).channel_shuffle(t.zeros(1, 5, 2, 2), 2), match="divisible")
    check(lambda t, x: F(t).pdist(x), shapes=[(5, 3)], grad=True)
    check(lambda t, x: F(t).pdist(x, p=1.0), shapes=[(4, 3)], grad=True)


def test_lp_pool():
    check(lambda t, x: F(t).lp_pool2d(x, 2, 2), shapes=[(2, 3, 6, 5)], low=0.1, grad=True)
    check(lambda t, x: F(t).lp_pool1d(x, 3, 3, stride=2), shapes=[(2, 3, 9)], low=0.1,
          grad=True)


def test_max_unpool():
    def f(t, x):
        out, idx = F(t).max_pool2d(x, 2, return_indices=True)
        return F(t).max_unpool2d(out, idx, 2, output_size=x.shape)
    check(f, shapes=[(2, 3, 5, 6)], grad=True)

    def f1(t, x):
        out, idx = F(t).max_pool1d(x, 3, 2, return_indices=True)
        return F(t).max_unpool1d(out, idx, 3, 2)
    check(f1, shapes=[(2, 3, 9)], grad=True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_margin_losses(reduction):
    tgt = np.array([0, 3, 1])
    check(lambda t, x: F(t).multi_margin_loss(x, t.tensor(tgt), reduction=reduction),
          shapes=[(3, 4)], grad=True)
    check(lambda t, x: F(t).multi_margin_loss(x, t.tensor(tgt), p=2, margin=0.5,
                                              weight=t.tensor([1.0, 2.0, 0.5, 1.5],
                                                              dtype=x.dtype),
                                              reduction=reduction), shapes=[(3, 4)], grad=True)
    mtgt = np.array([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 2, 3]])
    check(lambda t, x: F(t).multilabel_margin_loss(x, t.tensor(mtgt), reduction=reduction),
          shapes=[(3, 4)], grad=True)
    check(lambda t, a, p, n: F(t).triplet_margin_with_distance_loss(
        a, p, n, distance_function=lambda u, v: (u - v).abs().sum(-1), swap=True,
        reduction=reduction), shapes=[(3, 4), (3, 4), (3, 4)], grad=True)


def test_rrelu():
    check(lambda t, x: F(t).rrelu(x), grad=True)
    x = ember.randn(100, 100)
    y = F(ember).rrelu(x, training=True).numpy()
    xn = x.numpy()
    slope = y[xn < 0] / xn[xn < 0]
    assert np.all(y[xn >= 0] == xn[xn >= 0])
    assert slope.min() >= 1 / 8 - 1e-6 and slope.max() <= 1 / 3 + 1e-6 and slope.std() > 0.03


def test_gumbel_softmax():
    logits = ember.tensor([[0.0, 1.0, 2.0]]).expand(4000, 3)
    y = F(ember).gumbel_softmax(logits, tau=0.5, hard=True)
    v = y.numpy()
    assert np.all(v.sum(1) == 1) and set(np.unique(v)) <= {0.0, 1.0}
    freq = v.mean(0)
    np.testing.assert_allclose(freq, np.exp([0, 1, 2]) / np.exp([0, 1, 2]).sum(), atol=0.03)
    s = F(ember).gumbel_softmax(ember.zeros(5, 3)).numpy()
    np.testing.assert_allclose(s.sum(1), 1, rtol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_loss(reduction):
    T, N, C = 7, 3, 5
    targets = np.array([[1, 2, 2], [3, 1, 0], [4, 0, 0]])
    in_lens, tgt_lens = [7, 6, 5], [3, 2, 1]
    check(lambda t, x: F(t).ctc_loss(x.log_softmax(2), t.tensor(targets), t.tensor(in_lens),
                                     t.tensor(tgt_lens), reduction=reduction),
          shapes=[(T, N, C)], grad=True, rtol=1e-5, atol=1e-5)
    flat = np.array([1, 2, 2, 3, 1, 4])
    check(lambda t, lp: F(t).ctc_loss(lp, t.tensor(flat), in_lens, tgt_lens, blank=0,
                                      reduction=reduction),
          shapes=[(T, N, C)], high=0.0, grad=True, rtol=1e-5, atol=1e-5)


def test_ctc_loss_impossible_zero_infinity():
    targets = np.array([[1, 1, 1, 1]])
    for zi in (False, True):
        check(lambda t, x: F(t).ctc_loss(x.log_softmax(2), t.tensor(targets), [3], [4],
                                         reduction="sum", zero_infinity=zi),  # noqa: B023
              shapes=[(3, 1, 3)], grad=True)
