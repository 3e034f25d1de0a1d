"""Helpers shared by the ember.compile tests: deep value comparison, a graph-counting backend,
and a fixture that resets the compile caches and stance around each test."""
import numpy as np
import pytest

import ember
import ember._dynamo as dynamo


def close(a, b):
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            close(a[k], b[k])
    elif isinstance(a, ember.Tensor):
        assert isinstance(b, ember.Tensor)
        assert tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    else:
        assert a == b


class Counter:
    """A backend that counts the graphs it is handed (and runs them as they are)."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm


def entries(c):
    return c._compiled._entries if hasattr(c, "_compiled") else c._entries


@pytest.fixture(autouse=True)
def _reset():
    dynamo.reset()
    yield
    ember.compiler.set_stance("default")
