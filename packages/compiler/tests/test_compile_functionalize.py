"""Functionalization in aot_eager: in-place updates of graph inputs (`x.add_(1)`, BatchNorm's
running stats and num_batches_tracked in train mode) become functional ops plus one write-back
per mutated input at the end of the forward graph; the mutation happens exactly once per call
and values, gradients and buffers equal PyTorch eager's."""
import numpy as np
import pytest
from compile_helpers import _reset, close  # noqa: F401  (_reset: autouse)

import ember
import ember.nn as nn

torch = pytest.importorskip("torch")


def _inplace_nodes(gm):
    return [n.target.name for n in gm.graph.nodes if n.op == "call_function"
            and getattr(n.target, "name", "").endswith("_")]


def _graph_of(entry):
    c = entry.compiled
    return getattr(c, "forward_graph", None) or getattr(c, "graph_module", None)


def test_input_add_inplace_applied_once_no_grad():
    def f(x, y):
        x.add_(1)
        return (x * y).sum()
    cf = ember.compile(f, backend="aot_eager")
    x, y = ember.ones(3), ember.arange(3.0)
    for k in range(1, 4):
        close(cf(x, y), ember.tensor(float((k + 1) * 3)))
        close(x, ember.full((3,), float(k + 1)))     # +1 per call, not twice
    gm = _graph_of(cf._entries[0])
    assert _inplace_nodes(gm) == ["copy_"]          # one write-back, at the end
    last = [n for n in gm.graph.nodes if n.op == "call_function"][-1]
    assert last.target.name == "copy_"


def test_input_mutation_with_grad_elsewhere():
    def f(x, w):
        x.mul_(2)
        return (x * w).sum()
    cf = ember.compile(f, backend="aot_eager")
    x, w = ember.arange(1.0, 4.0), ember.ones(3, requires_grad=True)
    out = cf(x, w)
    out.backward()
    tx, tw = torch.arange(1.0, 4.0), torch.ones(3, requires_grad=True)
    tout = (tx.mul_(2) * tw).sum()
    tout.backward()
    np.testing.assert_allclose(out.item(), tout.item())
    np.testing.assert_allclose(x.numpy(), tx.numpy())
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy())
    assert _inplace_nodes(cf._entries[0].compiled.forward_graph) == ["copy_"]


def test_returned_mutated_input_is_the_input():
    def f(x):
        x.mul_(3)
        return x
    cf = ember.compile(f, backend="aot_eager")
    x = ember.ones(2)
    assert cf(x) is x and x.tolist() == [3.0, 3.0]


def _bn_pair():
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU())
    t = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.ReLU())
    with torch.no_grad():
        for p, q in zip(t.parameters(), m.parameters()):
            p.copy_(torch.tensor(q.detach().numpy()))
    return m, t


def test_batchnorm_train_buffers_equal_torch():
    m, t = _bn_pair()
    cm = ember.compile(m, backend="aot_eager")
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.standard_normal((6, 4)).astype(np.float32)
        out = cm(ember.tensor(x))
        out.pow(2).sum().backward()
        tout = t(torch.tensor(x))
        tout.pow(2).sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5,
                                   atol=1e-5)
    bn, tbn = m[1], t[1]
    np.testing.assert_allclose(bn.running_mean.numpy(), tbn.running_mean.numpy(), rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.numpy(), tbn.running_var.numpy(), rtol=1e-5)
    assert int(bn.num_batches_tracked) == int(tbn.num_batches_tracked) == 3
    for p, q in zip(m.parameters(), t.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5)
    fwd = cm._compiled._entries[0].compiled.forward_graph
    # running_mean, running_var and num_batches_tracked: written back once each, at the end
    assert _inplace_nodes(fwd) == ["copy_", "copy_", "copy_"]


def test_batchnorm_train_under_no_grad_equals_eager():
    m1, _ = _bn_pair()
    m2, _ = _bn_pair()
    cm = ember.compile(m2, backend="aot_eager")
    x = ember.randn(6, 4)
    with ember.no_grad():
        for _ in range(2):
            close(cm(x), m1(x))
    close(m2[1].running_mean, m1[1].running_mean)
    assert int(m2[1].num_batches_tracked) == 2


def test_mutation_through_a_view_still_equals_eager():
    def f(x, y):
        x[1:].mul_(2)
        return (x + y).sum()
    cf = ember.compile(f, backend="aot_eager")
    x1, x2, y = ember.ones(3), ember.ones(3), ember.ones(3, requires_grad=True)
    close(cf(x1, y), f(x2, y))
    close(x1, x2)
