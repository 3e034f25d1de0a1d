"""make_fx traces through the dispatcher's mode stack into graphs of op-table entries; fake
tensors run each op's meta. Re-running a traced graph must equal eager, and fake results
must have the shapes, dtypes and devices PyTorch's FakeTensorMode gives."""
import copy
import pickle

import numpy as np
import pytest
import torch as _torch
from torch._subclasses.fake_tensor import FakeTensorMode as TorchFakeMode

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember._decomp import get_decompositions
from ember._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
)
from ember.fx.experimental.proxy_tensor import functionalize, make_fx


def _t(*shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _close(a, b):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def _mlp():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))


def _attention(q, k, v):
    """A small causal attention, written out (B, H, T, D)."""
    scores = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5      # (B, H, T, T)
    mask = ember.ones(q.shape[-2], k.shape[-2]).tril().bool()
    scores = scores.masked_fill(~mask, float("-inf"))
    return F.softmax(scores, dim=-1) @ v                          # (B, H, T, D)


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("mode", ["real", "fake"])
def test_mlp_forward(mode):
    mlp = _mlp()
    with ember.no_grad():
        gm = make_fx(lambda x: mlp(x).softmax(-1), tracing_mode=mode)(_t(5, 8))
    aten = ember.ops.aten
    assert _targets(gm) == [aten.linear.default, aten.gelu.default, aten.linear.default,
                            aten.softmax.int]
    gm.graph.lint()
    x = _t(5, 8, seed=1)  # fresh values
    _close(gm(x), mlp(x).softmax(-1))
    assert "ember.ops.aten.linear.default(x_1, _param_constant0, _param_constant1)" in gm.code
    # with grad on (the parameters require it), composites such as linear are traced through
    # their decomposition, as autograd differentiates them (torch's make_fx: t + addmm)
    gm = make_fx(lambda x: mlp(x).softmax(-1), tracing_mode=mode)(_t(5, 8))
    assert aten.linear.default not in _targets(gm) and aten.gelu.default in _targets(gm)
    _close(gm(x), mlp(x).softmax(-1))


@pytest.mark.parametrize("mode", ["real", "fake"])
def test_small_attention(mode):
    q, k, v = _t(2, 3, 5, 4, seed=1), _t(2, 3, 5, 4, seed=2), _t(2, 3, 5, 4, seed=3)
    gm = make_fx(_attention, tracing_mode=mode)(q, k, v)
    names = [t.name for t in _targets(gm)]
    assert names == ["transpose", "matmul", "div", "ones", "tril", "_to_copy", "bitwise_not",
                     "masked_fill", "softmax", "matmul"]
    q2, k2, v2 = _t(2, 3, 5, 4, seed=4), _t(2, 3, 5, 4, seed=5), _t(2, 3, 5, 4, seed=6)
    _close(gm(q2, k2, v2), _attention(q2, k2, v2))
    tq, tk, tv = (_torch.tensor(x.numpy()) for x in (q2, k2, v2))
    ref = _torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    np.testing.assert_allclose(gm(q2, k2, v2).numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


def test_decomposition_table_traces_through():
    sdpa = ember.ops.aten.scaled_dot_product_attention
    q = _t(1, 2, 4, 8)

    def f(q):
        return F.scaled_dot_product_attention(q, q, q, is_causal=True)
    plain = make_fx(f)(q)
    assert _targets(plain) == [sdpa.default]
    gm = make_fx(f, decomposition_table=get_decompositions([sdpa]))(q)
    assert sdpa not in _targets(gm) and len(_targets(gm)) > 3
    _close(gm(q), f(q))


def test_inplace_ops_and_overload_names():
    def f(x):
        y = x.clone()
        y.add_(1)
        return ember.max(y, dim=0)
    x = _t(3, 4)
    gm = make_fx(f)(x)
    aten = ember.ops.aten
    assert aten.add.Tensor is aten.add.default is aten.add
    assert aten.max.dim in _targets(gm) and aten.add_.default in _targets(gm)
    vals, idx = gm(x)
    ref = f(x)
    _close(vals, ref.values)
    assert idx.tolist() == ref.indices.tolist()
    with pytest.raises(AttributeError):
        _ = aten.add.not_an_overload


def test_graph_of_table_ops_copies_and_pickles():
    mlp = _mlp()
    gm = make_fx(mlp)(_t(2, 8))
    x = _t(2, 8, seed=3)
    for clone in (copy.deepcopy(gm), pickle.loads(pickle.dumps(gm))):
        _close(clone(x), mlp(x))
        assert _targets(clone) == _targets(gm)


def _run_fake(lib, mode_cls, fn, *shapes):
    mode = mode_cls()
    args = [mode.from_tensor(lib.ones(*s)) for s in shapes]
    with mode:
        out = fn(lib, *args)
    return [(tuple(o.shape), str(o.dtype).split(".")[-1], str(o.device)) for o in out]


@pytest.mark.parametrize("fn,shapes", [
    (lambda t, x, w: [t.nn.functional.linear(x, w), x.sum(-1, keepdim=True)], [(4, 8), (3, 8)]),
    (lambda t, x, w: [(x @ w.t()).relu().long(), x.view(2, 16)[:, 1:]], [(4, 8), (3, 8)]),
    (lambda t, x, w: [t.cat([x, x]), x.unsqueeze(0).expand(2, 4, 8), x > 0], [(4, 8), (3, 8)]),
    (lambda t, x, w: [t.nn.functional.layer_norm(x, (8,)), t.zeros(2, dtype=t.int32)],
     [(4, 8), (3, 8)]),
])
def test_fake_results_match_torch(fn, shapes):
    assert _run_fake(ember, FakeTensorMode, fn, *shapes) == \
        _run_fake(_torch, TorchFakeMode, fn, *shapes)


def test_fake_tensor_errors_and_inplace():
    mode = FakeTensorMode()
    x = mode.from_tensor(ember.ones(4, 8))
    real = ember.ones(8)
    assert isinstance(x, FakeTensor) and x.fake_device == ember.device("cpu")
    with mode:
        with pytest.raises(DataDependentOutputException):
            x.sum().item()
        with pytest.raises(DynamicOutputShapeException):
            x.nonzero()
        with pytest.raises(RuntimeError, match="cannot be multiplied"):
            x @ x
        y = x.add_(1)
        assert y is x and x._version == 1
        with pytest.raises(RuntimeError, match="allow_non_fake_inputs"):
            x + real
        assert isinstance(ember.ones(2), FakeTensor)  # factories make fakes
    assert mode.from_tensor(ember.ones(1)) is not None


def test_shape_prop_with_fake_mode():
    from ember.fx.passes.shape_prop import ShapeProp
    gm = ember.fx.symbolic_trace(_mlp())
    ShapeProp(gm, fake_mode=FakeTensorMode(allow_non_fake_inputs=True)).propagate(_t(7, 8))
    out = next(n for n in gm.graph.nodes if n.op == "output")
    assert tuple(out.meta["tensor_meta"].shape) == (7, 4)


def test_functionalize_removes_mutation_and_copies_inputs_back():
    def f(x, y):
        y.add_(1)
        z = x * 2
        z.relu_()
        z.mul_(y)
        y.mul_(3)
        return z + y
    x, y = _t(3, 4), _t(3, 4, seed=1)
    gm = make_fx(functionalize(f))(x.clone(), y.clone())
    names = [t.name for t in _targets(gm)]
    assert names == ["add", "mul", "relu", "mul", "mul", "add", "copy_"]
    assert all("inplace" not in t.tags for t in _targets(gm)[:-1])
    y_eager, y_graph = y.clone(), y.clone()
    _close(gm(x, y_graph), f(x, y_eager))
    _close(y_graph, y_eager)  # the input is still written, once, at the end
    gm.graph.lint()


def test_functionalize_rewrites_writes_through_views():
    def g(x):
        x[0].add_(1)
        return x
    gm = make_fx(functionalize(g))(ember.ones(2, 2))
    names = [t.name for t in _targets(gm)]
    assert names == ["select", "add", "select_scatter", "copy_"]
    x = ember.ones(2, 2)
    _close(gm(x), g(ember.ones(2, 2)))
    _close(x, g(ember.ones(2, 2)))


def test_fake_device_is_the_device_stood_for():
    mode = FakeTensorMode()
    x = mode.from_tensor(ember.ones(2, 3))
    with mode:
        y = x.to("cuda")  # no GPU needed: nothing runs but meta
        # an unindexed device gets its index, as eager and PyTorch's fake tensors (cuda:0)
        assert str(y.device) == "cuda:0" and y.is_cuda and str((y * 2).device) == "cuda:0"
        assert str(ember.zeros(3, device="cuda").device) == "cuda:0"
        assert str((y + mode.from_tensor(ember.tensor(2.0))).device) == "cuda:0"  # cpu scalar
        assert str(ember.zeros(3, device="cuda:1").device) == "cuda:1"
        with pytest.raises(RuntimeError, match="same device"):
            y + x


def test_train_step_with_autograd_grad_real_mode():
    """Forward and backward in one graph: the vjp ops run under the mode and are recorded;
    what autograd saved for backward (aliases of traced values) reads from the graph."""
    mlp = _mlp()
    params = list(mlp.parameters())

    def step(x, y):
        loss = ((mlp(x) - y) ** 2).mean()
        return [loss, *ember.autograd.grad(loss, params)]
    gm = make_fx(step)(_t(5, 8), _t(5, 4, seed=1))
    x2, y2 = _t(5, 8, seed=2), _t(5, 4, seed=3)
    for got, ref in zip(gm(x2, y2), step(x2, y2)):
        _close(got, ref)
