"""ember.compile(mode="reduce-overhead"): mode/options validation and fallback reasons on CPU;
CUDA-graph replays equal to eager (training and inference), stale outputs, fallbacks for unsafe
graphs as scripts run in this process on a GPU, else on the fake device in a subprocess
(EMBER_CUDA_FAKE=1, Triton's interpreter): the same assertions on both."""
import logging

import pytest
from cuda_helpers import run_script

import ember
import ember._dynamo as dynamo
import ember._dynamo.cudagraphs as cg
from ember._dynamo.modes import mode_options


@pytest.fixture(autouse=True)
def _reset():
    dynamo.reset()
    cg.skips.clear()
    yield
    dynamo.reset()


def test_mode_and_options_are_validated_as_torch_compile():
    with pytest.raises(RuntimeError, match="Either mode or options"):
        ember.compile(lambda x: x, mode="reduce-overhead", options={"max_autotune": True})
    with pytest.raises(RuntimeError, match="Unrecognized mode=fast"):
        ember.compile(lambda x: x, mode="fast")
    with pytest.raises(RuntimeError, match="Unexpected optimization option nope"):
        ember.compile(lambda x: x, options={"nope": True})
    with pytest.raises(RuntimeError, match="Unexpected type of attr max_autotune"):
        ember.compile(lambda x: x, options={"max_autotune": 3})
    assert mode_options("reduce-overhead")["triton.cudagraphs"] is True
    assert mode_options("max-autotune") == {"max_autotune": True, "triton.cudagraphs": True}
    assert "triton.cudagraphs" not in mode_options("max-autotune-no-cudagraphs")
    assert mode_options(None, {"triton.cudagraphs": True}) == {"triton.cudagraphs": True}


@pytest.mark.parametrize("kw", [dict(mode="reduce-overhead"), dict(mode="max-autotune"),
                                dict(options={"triton.cudagraphs": True})])
def test_cpu_tensors_fall_back_with_a_logged_reason(kw, caplog):
    f = ember.compile(lambda x, y: (x * y).relu() + 1, backend="aot_eager", **kw)
    x, y = ember.randn(4, 3), ember.randn(4, 3)
    with caplog.at_level(logging.DEBUG, logger="ember._dynamo.cudagraphs"):
        out = f(x, y)
    assert out.tolist() == ((x * y).relu() + 1).tolist()
    assert cg.skips == ["cpu device (a_0)"]
    assert any("skipping cudagraphs due to cpu device" in r.getMessage() for r in caplog.records)


def test_default_modes_do_not_wrap():
    for kw in (dict(mode="default"), dict(mode="max-autotune-no-cudagraphs"), {}):
        f = ember.compile(lambda x: x * 2, backend="eager", **kw)
        f(ember.ones(2))
    assert cg.skips == []


def _gm(fn, *args):
    from ember.fx.experimental.proxy_tensor import make_fx
    return make_fx(fn)(*args)


def test_unsafe_graphs_are_named():
    x = ember.randn(3)
    gm = _gm(lambda x: x.add_(1) * 2, x)
    assert cg._graph_reason(gm, frozenset()) == "mutated inputs (1 instances)"
    assert cg._graph_reason(gm, frozenset({0})) is None      # a buffer: used in place
    gm = _gm(lambda x: x.view(3, 1).mul_(2), x)
    assert cg._graph_reason(gm, frozenset()) == "mutated inputs (1 instances)"
    gm = _gm(lambda x: ember.nn.functional.dropout(x, 0.5, True), x)
    assert cg._graph_reason(gm, frozenset()).startswith("random ops")
    gm = _gm(lambda x: (x * 2).sum(), x)
    assert cg._graph_reason(gm, frozenset()) is None


def test_cudagraph_mark_step_begin_is_public():
    g = cg._state["generation"]
    ember.compiler.cudagraph_mark_step_begin()
    assert cg._state["generation"] == g + 1


TRAIN = r"""
import ember
import ember._dynamo.cudagraphs as cg
import numpy as np

# (on a GPU this runs in the test process: start from clean counters)
cg.counters.update(recorded=0, replayed=0)
cg.skips.clear()
cg._state["pending_backward"] = 0

ember.manual_seed(0)
def make():
    return ember.nn.Sequential(ember.nn.Linear(16, 32), ember.nn.ReLU(),
                               ember.nn.Linear(32, 4)).cuda()
m, ref = make(), make()
ref.load_state_dict(m.state_dict())
opt = ember.optim.SGD(m.parameters(), lr=0.1)
opt_r = ember.optim.SGD(ref.parameters(), lr=0.1)
cm = ember.compile(m, mode="reduce-overhead", backend="aot_eager")
F = ember.nn.functional
prev = None
for step in range(4):
    x, y = ember.randn(8, 16, device="cuda"), ember.randn(8, 4, device="cuda")
    loss = F.mse_loss(cm(x), y)
    if prev is not None:   # the last step's output was written again by this replay
        try:
            prev.cpu()
        except RuntimeError as e:
            assert "overwritten by a subsequent run" in str(e), e
        else:
            raise AssertionError("a stale output was readable")
    loss.backward()
    want = F.mse_loss(ref(x), y)
    want.backward()
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-4, atol=1e-5)
    if step % 2 == 1:   # gradients accumulate over two steps: the backward's outputs stay right
        opt.step(); opt.zero_grad(); opt_r.step(); opt_r.zero_grad()
    for p, q in zip(m.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().cpu().numpy(),
                                   rtol=1e-4, atol=1e-5)
    prev = cm(x) if step == 1 else None     # a graph output kept into the next step
    if prev is not None:
        F.mse_loss(prev, y).backward()       # (its gradients are dropped)
        opt.zero_grad()
assert cg.skips == [], cg.skips
assert cg.counters["recorded"] == 2, cg.counters      # the forward and the backward
assert cg.counters["replayed"] >= 6, cg.counters
"""


def test_reduce_overhead_training_step_equals_eager():
    run_script(TRAIN, "cudagraphs_train")


CNN = r"""
import ember
import ember._dynamo.cudagraphs as cg
import numpy as np

cg.counters.update(recorded=0, replayed=0)
cg.skips.clear()
cg._state["pending_backward"] = 0

nn = ember.nn
ember.manual_seed(0)
def make():
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(4 * 3 * 3, 3)).cuda()
m, ref = make(), make()
ref.load_state_dict(m.state_dict())
cm = ember.compile(m, mode="reduce-overhead")
x, y = ember.randn(2, 1, 8, 8, device="cuda"), ember.randint(0, 3, (2,), device="cuda")
for step in range(3):
    loss = nn.functional.cross_entropy(cm(x), y)
    loss.backward()
    want = nn.functional.cross_entropy(ref(x), y)
    want.backward()
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-4, atol=1e-5)
    for p, q in zip(m.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.cpu().numpy(), q.grad.cpu().numpy(), rtol=1e-4,
                                   atol=1e-5)
# max-pool's backward reads no index bounds back while capturing: both graphs are captured
assert cg.skips == [], cg.skips
assert cg.counters["recorded"] == 2, cg.counters
"""


def test_reduce_overhead_conv_pool_backward_is_captured():
    run_script(CNN, "cudagraphs_cnn")


INFER = r"""
import ember
import ember._dynamo.cudagraphs as cg
import numpy as np

# (on a GPU this runs in the test process: start from clean counters)
cg.counters.update(recorded=0, replayed=0)
cg.skips.clear()
cg._state["pending_backward"] = 0

w = ember.randn(32, 16, device="cuda")
def f(x):
    return (ember.relu(x @ w) * 2 + 1).sum(dim=1)
cf = ember.compile(f, mode="reduce-overhead", backend="aot_eager")
with ember.no_grad():
    outs = []
    for i in range(4):
        x = ember.randn(8, 32, device="cuda")
        ember.compiler.cudagraph_mark_step_begin()
        y = cf(x)
        np.testing.assert_allclose(y.cpu().numpy(), f(x).cpu().numpy(), rtol=1e-4, atol=1e-4)
        outs.append(y)
    try:
        outs[-2].cpu()
    except RuntimeError as e:
        assert "overwritten by a subsequent run" in str(e)
    else:
        raise AssertionError("a stale output was readable")
    kept = outs[-1].clone()
    cf(ember.randn(8, 32, device="cuda"))
    assert kept.cpu().shape == (8,)
assert cg.counters["recorded"] == 1 and cg.counters["replayed"] >= 3, cg.counters
assert cg.skips == [], cg.skips

# unsafe graphs run the plain compiled callable, with the reason
def mutate(x):
    x.add_(1)
    return x * 2
a = ember.ones(4, device="cuda")
cm = ember.compile(mutate, mode="reduce-overhead", backend="aot_eager")
for _ in range(3):
    out = cm(a)
assert a.cpu().tolist() == [4.0] * 4 and out.cpu().tolist() == [8.0] * 4
assert cg.skips[-1] == "mutated inputs (1 instances)", cg.skips

def syncs(x):
    return ember.fft.rfft(x).abs() + 1
cs = ember.compile(syncs, mode="reduce-overhead", backend="aot_eager")
x = ember.randn(8, device="cuda")
for _ in range(3):
    np.testing.assert_allclose(cs(x).cpu().numpy(), syncs(x).cpu().numpy(), rtol=1e-4,
                               atol=1e-4)
assert any("not permitted while capturing" in s for s in cg.skips), cg.skips

# more input layouts than the limit: the runner stops capturing
r = cg.Runner(lambda t: t * 3, frozenset(), "inference")
for n in range(1, cg.LIMIT + 3):
    t = ember.ones(n, device="cuda")
    for _ in range(3):
        assert r(t).cpu().tolist() == [3.0] * n
assert r.disabled is not None and r.disabled.startswith("dynamic sizes"), r.disabled
"""


def test_reduce_overhead_inference_stale_outputs_and_fallbacks():
    run_script(INFER, "cudagraphs_infer")
