"""ember.set_default_device / get_default_device and the deprecated ember.cuda.amp aliases,
against torch on a CPU-only build."""
import threading
import warnings

import numpy as np
import pytest
from harness import torch

import ember


@pytest.fixture(autouse=True)
def _reset():
    yield
    ember.set_default_device(None)
    torch.set_default_device(None)


FACTORIES = [lambda t: t.zeros(2), lambda t: t.tensor([1.0]), lambda t: t.arange(3),
             lambda t: t.randn(2), lambda t: t.full((2,), 1.0), lambda t: t.eye(2),
             lambda t: t.as_tensor(np.ones(2)), lambda t: t.empty(1, device="cpu"),
             lambda t: t.zeros_like(t.ones(2, device="cpu"))]


def test_set_default_device_matches_torch():
    for t in (ember, torch):
        t.set_default_device("meta")
    for f in FACTORIES:
        assert f(ember).device.type == f(torch).device.type
    assert str(ember.get_default_device()) == str(torch.get_default_device()) == "meta"
    for t in (ember, torch):
        t.set_default_device(None)
    assert str(ember.get_default_device()) == str(torch.get_default_device()) == "cpu"
    assert ember.zeros(1).device.type == "cpu"


def test_device_context_wins_and_default_is_thread_local():
    ember.set_default_device("meta")
    with ember.device("cpu"):
        assert ember.zeros(1).device.type == "cpu"
        assert ember.get_default_device().type == "cpu"
    seen = []
    th = threading.Thread(target=lambda: seen.append(ember.zeros(1).device.type))
    th.start()
    th.join()
    assert seen == ["cpu"]            # torch's default device is thread-local too
    with ember.device("meta"):
        assert ember.tensor([2.0]).device.type == "meta"


def _construct(t, what):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        obj = getattr(t.cuda.amp, what)()
    return obj, sorted((x.category.__name__, str(x.message)) for x in w)


@pytest.mark.parametrize("what", ["autocast", "GradScaler"])
def test_cuda_amp_aliases_match_torch(what):
    e, ew = _construct(ember, what)
    t, tw = _construct(torch, what)
    assert ew == tw                   # the deprecation and the "CUDA is not available" warnings
    assert isinstance(e, getattr(ember.amp, what))
    if what == "autocast":
        assert e.device_type == "cuda" and str(e.fast_dtype) == "ember.float16"
        with e:
            assert ember.ones(2).dtype == ember.float32
    else:
        assert e.is_enabled() == t.is_enabled() is False
        w = ember.zeros(2, requires_grad=True)
        opt = ember.optim.SGD([w], lr=0.1)
        e.scale((w - 1).square().sum()).backward()
        e.step(opt)
        e.update()
        np.testing.assert_allclose(w.detach().numpy(), [0.2, 0.2])
