"""ember.compile over `with ember.device(d):` blocks and the default device: factories made in
the block land on d (the trace records their device, inductor runs a graph spanning two devices
as captured), a graph break inside the block runs the frame as it is, and a changed default
device (set_default_device) recompiles. Compared with PyTorch's torch.compile on CPU."""
import numpy as np
import pytest
import torch

import ember
import ember._dynamo as dynamo


@pytest.fixture(autouse=True)
def _reset():
    dynamo.reset()
    yield
    dynamo.reset()
    ember.set_default_device(None)


def _block(T):
    def f(x):
        with T.device("meta"):
            y = T.zeros(3)
            w = T.full((2, 2), 7.0)
        z = T.ones(3)
        return x * 2 + 1, y, w, z
    return f


def _devices(out):
    return [str(t.device) for t in out]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("fullgraph", [False, True])
def test_factories_in_a_device_block(backend, fullgraph):
    want = torch.compile(_block(torch), backend="eager")(torch.arange(3.0))
    f = ember.compile(_block(ember), backend=backend, fullgraph=fullgraph)
    for _ in range(2):
        got = f(ember.arange(3.0))
        assert _devices(got) == _devices(want) == ["cpu", "meta", "meta", "cpu"]
        assert [tuple(t.shape) for t in got] == [tuple(t.shape) for t in want]
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy())
        np.testing.assert_allclose(got[3].numpy(), want[3].numpy())


def _breaks(T):
    def f(x):
        with T.device("meta"):
            y = T.zeros(3)
            print("inside the block")   # a graph break inside the block
            w = T.ones(2)
        return x + 1, y, w, T.zeros(1)
    return f


def test_graph_break_inside_a_device_block(capsys):
    want = _breaks(torch)(torch.arange(3.0))
    capsys.readouterr()
    f = ember.compile(_breaks(ember))
    for _ in range(2):
        got = f(ember.arange(3.0))
        assert _devices(got) == _devices(want) == ["cpu", "meta", "meta", "cpu"]
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy())
    assert capsys.readouterr().out.count("inside the block") == 2
    assert ember.get_default_device() == ember.device("cpu")   # the block's exit ran


def test_default_device_change_recompiles():
    def f(x):
        return x + 1, ember.zeros(2)
    cf = ember.compile(f, backend="inductor")
    assert _devices(cf(ember.ones(2))) == ["cpu", "cpu"]
    ember.set_default_device("meta")
    assert _devices(cf(ember.ones(2, device="cpu"))) == ["cpu", "meta"]
    ember.set_default_device(None)
    assert _devices(cf(ember.ones(2))) == ["cpu", "cpu"]


def test_explicit_device_factory_in_a_cpu_graph_under_inductor():
    def f(x):
        return x.sum() + 1, ember.empty(4, device="meta")
    got = ember.compile(f, backend="inductor")(ember.ones(3))
    assert _devices(got) == ["cpu", "meta"]
    assert got[0].item() == 4.0
