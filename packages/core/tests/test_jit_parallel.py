"""ember.jit (programs that decorate with TorchScript run unchanged) and ember.nn.parallel on a
machine without GPUs, against torch's behaviour there."""
import warnings

import numpy as np
import pytest
from harness import torch

import ember


def _program(t):
    """A PyTorch-style program using the jit decorators."""
    class Net(t.nn.Module):
        scale: t.jit.Final[float]

        def __init__(self):
            super().__init__()
            self.lin = t.nn.Linear(3, 2)
            self.scale = 2.0

        @t.jit.ignore
        def debug(self, x):
            return x

        @t.jit.unused
        def unused_method(self, x):
            return x

        @t.jit.export
        def double(self, x):
            return 2 * x

        def forward(self, x):
            if not t.jit.is_scripting():     # the eager-only branch programs write
                x = self.debug(x)
            return self.double(self.lin(x)) * self.scale

    @t.jit.script
    def act(x):
        return t.relu(x)

    @t.jit.ignore(drop=True)
    def dropped(x):
        return x + 1
    t.manual_seed(0)
    return Net(), act, dropped


def test_decorated_program_runs_like_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        enet, eact, edrop = _program(ember)
        tnet, tact, tdrop = _program(torch)
    enet.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tnet.state_dict().items()})
    x = np.random.default_rng(0).normal(size=(4, 3)).astype("float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        es, ts = ember.jit.script(enet), torch.jit.script(tnet)
        et = ember.jit.trace(enet, ember.tensor(x))
        tt = torch.jit.trace(tnet, torch.tensor(x))
    for e, t in ((es, ts), (et, tt)):
        np.testing.assert_allclose(e(ember.tensor(x)).detach().numpy(),
                                   t(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(eact(ember.tensor(x)).numpy(), tact(torch.tensor(x)).numpy())
    np.testing.assert_allclose(edrop(ember.tensor(x)).numpy(), tdrop(torch.tensor(x)).numpy())
    assert ember.jit.is_scripting() is torch.jit.is_scripting() is False
    assert ember.jit.is_tracing() is False


def test_trace_function_runs_example_and_returns_callable():
    calls = []

    def f(x, y):
        calls.append(1)
        return x * y
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = ember.jit.trace(f, (ember.ones(2), ember.full((2,), 3.0)))
    assert calls == [1]                          # ran once on the example, as torch does
    assert g(ember.ones(2), ember.ones(2)).tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ember.jit.trace(lambda x: x.view(7), (ember.ones(2),))


def test_jit_helpers():
    assert ember.jit.annotate(list[int], [1]) == [1]
    for obj, ty in (([1, 2], list[int]), ([1, "a"], list[int]),
                    ({"a": 1}, dict[str, int]), ((1, "x"), tuple[int, str]),
                    (3, int), ("s", int)):
        assert ember.jit.isinstance(obj, ty) == torch.jit.isinstance(obj, ty), (obj, ty)
    fut = ember.jit.fork(lambda a: a + 1, 1)
    assert ember.jit.wait(fut) == 2
    assert isinstance(ember.nn.Linear(1, 1), ember.jit.ScriptModule)
    with pytest.raises(TypeError, match="expected a module"):
        ember.jit.save(lambda x: x, "x.pt")


def test_jit_save_load_round_trip(tmp_path):
    m = ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.Tanh())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = ember.jit.trace(m, ember.ones(1, 3))
    path = tmp_path / "m.pt"
    ember.jit.save(traced, str(path), _extra_files={"meta.txt": "v1"})
    extra = {"meta.txt": ""}
    loaded = ember.jit.load(str(path), _extra_files=extra)
    x = ember.randn(4, 3)
    np.testing.assert_allclose(loaded(x).detach().numpy(), m(x).detach().numpy())
    assert extra == {"meta.txt": "v1"}
    ember.save({"w": ember.ones(1)}, str(tmp_path / "w.pt"))
    with pytest.raises(RuntimeError, match="not a file written by ember.jit.save"):
        ember.jit.load(str(tmp_path / "w.pt"))


def test_data_parallel_without_gpus_matches_torch():
    tm = torch.nn.Linear(3, 2)
    em = ember.nn.Linear(3, 2)
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    edp, tdp = ember.nn.DataParallel(em), torch.nn.DataParallel(tm)
    assert edp.module is em and edp.device_ids == tdp.device_ids == []
    assert sorted(edp.state_dict()) == sorted(tdp.state_dict())
    x = np.ones((4, 3), dtype="float32")
    ey, ty = edp(ember.tensor(x)), tdp(torch.tensor(x))
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-6)
    ey.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(em.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-6)
    for t, m in ((ember, em), (torch, tm)):
        with pytest.raises(RuntimeError, match="device type could not be determined"):
            t.nn.parallel.data_parallel(m, t.tensor(x))


def test_distributed_data_parallel_name_imports_and_names_its_wheel():
    import importlib.util
    from ember.nn.parallel import DistributedDataParallel
    assert ember.nn.parallel.DistributedDataParallel is DistributedDataParallel
    try:
        installed = importlib.util.find_spec("ember.distributed") is not None
    except ImportError:
        installed = False
    if not installed:
        with pytest.raises(ember.MissingComponentError, match="ember-distributed"):
            DistributedDataParallel(ember.nn.Linear(2, 2))
    else:   # the class ember-distributed registers with core
        assert DistributedDataParallel.__module__ == "ember.distributed._ddp"
