"""backward() from several threads at once into shared leaves loses no update, as in torch."""
import sys
import threading

import numpy as np
import pytest
from harness import torch

import ember

THREADS, ROUNDS = 8, 15


def _hammer(t, x, w):
    """THREADS threads each run ROUNDS backward passes into the shared leaves x and w."""
    start = threading.Barrier(THREADS)
    errors = []

    def work(k):
        try:
            start.wait()
            for _ in range(ROUNDS):
                ((x * (k + 1)).sum() + (w * x).sum()).backward()
        except BaseException as e:  # surfaced by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


@pytest.fixture
def many_switches():
    """Make the interpreter switch threads as often as it can, so races show up."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


@pytest.mark.parametrize("trial", range(4))
def test_concurrent_backward_into_shared_leaf(trial, many_switches):
    a = (np.arange(1, 7) / 2).astype("float32")  # sums stay exact in any order
    got = []
    for t in (ember, torch):
        x = t.tensor(a, requires_grad=True)
        w = t.tensor(a[::-1].copy(), requires_grad=True)
        _hammer(t, x, w)
        got.append((x.grad.numpy(), w.grad.numpy()))
    (ex, ew), (tx, tw) = got
    np.testing.assert_allclose(ex, tx, rtol=0)
    np.testing.assert_allclose(ew, tw, rtol=0)
    # and the exact count: every thread's every round arrived
    per_round = sum(k + 1 for k in range(THREADS)) + THREADS * a[::-1]
    np.testing.assert_allclose(ex, ROUNDS * per_round, rtol=0)


def test_concurrent_backward_with_create_graph(many_switches):
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    start = threading.Barrier(THREADS)

    def work():
        start.wait()
        for _ in range(ROUNDS):
            (x * x).sum().backward(create_graph=True)

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    np.testing.assert_allclose(x.grad.detach().numpy(), THREADS * ROUNDS * 2 * np.array([1, 2.0]))
