"""autograd's queue_callback (torch's Variable._execution_engine.queue_callback): a callback queued
during backward runs once, after the whole pass (after every leaf's .grad is set)."""
import pytest

import ember
from ember.autograd._engine import queue_callback


def test_callback_runs_after_the_pass():
    a = ember.ones(3, requires_grad=True)
    b = ember.ones(3, requires_grad=True)
    seen = []

    def hook(g):
        queue_callback(lambda: seen.append((a.grad is not None, b.grad is not None)))
        return g
    a.register_hook(hook)  # runs while b's gradient may still be pending
    ((a * 2).sum() + (b * 3).sum()).backward()
    assert seen == [(True, True)]
    (a * 2).sum().backward()  # a finished pass leaves nothing queued
    assert len(seen) == 2


def test_queue_outside_backward_raises():
    with pytest.raises(RuntimeError, match="no backward pass"):
        queue_callback(lambda: None)


def test_failed_backward_drops_callbacks():
    a = ember.ones(2, requires_grad=True)
    seen = []

    def hook(g):
        queue_callback(lambda: seen.append(1))
        raise ValueError("boom")
    a.register_hook(hook)
    with pytest.raises(ValueError):
        a.sum().backward()
    assert seen == []
    b = ember.ones(2, requires_grad=True)
    b.sum().backward()
    assert seen == []
