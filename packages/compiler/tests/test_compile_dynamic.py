"""ember.compile with dynamic shapes: automatic dynamic (one recompile, not one per size),
dynamic=True/False, mark_dynamic / mark_static / maybe_mark_dynamic, 0/1 specialization,
guards on size relations, SymInt graph inputs, and aot_eager training on symbolic sizes.
Graph counts are compared with torch.compile's (a counting backend) where torch is present."""
import logging

import numpy as np
import pytest
from compile_helpers import Counter, _reset, close  # noqa: F401  (_reset: autouse)

import ember
import ember._dynamo as dynamo
import ember._logging
import ember.nn as nn

torch = pytest.importorskip("torch")


def _torch_graphs(fn, inputs, dynamic=None, mark=()):
    torch._dynamo.reset()
    n = []

    def be(gm, ex):
        n.append(gm)
        return gm
    cf = torch.compile(fn, backend=be, dynamic=dynamic)
    outs = []
    for args in inputs:
        targs = [torch.tensor(a.numpy()) for a in args]
        for i in mark:
            torch._dynamo.mark_dynamic(targs[i], 0)
        outs.append(cf(*targs))
    return len(n), outs


def _ember_graphs(fn, inputs, dynamic=None, mark=()):
    be = Counter()
    cf = ember.compile(fn, backend=be, dynamic=dynamic)
    outs = []
    for args in inputs:
        for i in mark:
            dynamo.mark_dynamic(args[i], 0)
        outs.append(cf(*args))
    return len(be.graphs), outs, be


def _pairs(sizes, cols=4):
    return [(ember.randn(n, cols), ember.randn(n, cols)) for n in sizes]


def _f(x, y):
    return (x * 2 + y).sum(0) * x.shape[0]


def _same_values(eo, to):
    for a, b in zip(eo, to):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dynamic,mark,expected", [(None, (), 2), (True, (), 1), (False, (), 4),
                                                   (False, (0, 1), 1)])
def test_graph_counts_equal_torch(dynamic, mark, expected):
    inputs = _pairs((3, 4, 5, 6))
    n, eo, _ = _ember_graphs(_f, inputs, dynamic, mark)
    tn, to = _torch_graphs(_f, inputs, dynamic, mark)
    assert n == tn == expected
    _same_values(eo, to)


def test_automatic_dynamic_one_recompile_over_many_sizes():
    inputs = _pairs(range(3, 12))
    n, eo, be = _ember_graphs(_f, inputs)
    assert n == 2
    _same_values(eo, [_f(*a) for a in inputs])
    # the second graph takes the size as an input (a SymInt placeholder) before the tensors
    phs = [p for p in be.graphs[1].graph.nodes if p.op == "placeholder"]
    assert str(phs[0].meta["val"]) == "s0" and type(phs[0].meta["val"]).__name__ == "SymInt"
    assert [tuple(map(str, p.meta["val"].shape)) for p in phs[1:]] == [("s0", "4")] * 2


def test_zero_one_specialization_equals_torch():
    inputs = _pairs((3, 4, 1, 5, 1, 6))
    n, eo, _ = _ember_graphs(_f, inputs)
    tn, to = _torch_graphs(_f, inputs)
    assert n == tn == 3
    _same_values(eo, to)


def test_branch_on_a_size_guards_the_relation():
    def f(x, y):
        return x * 2 if x.shape[0] > 4 else x + y
    inputs = _pairs((3, 4, 5, 6, 7, 2))
    n, eo, _ = _ember_graphs(f, inputs)
    tn, to = _torch_graphs(f, inputs)
    assert n == tn == 3
    _same_values(eo, to)


def test_guards_log_shows_size_relations(caplog):
    ember._logging.set_logs(guards=True)
    try:
        with caplog.at_level(logging.INFO, logger="ember._dynamo"):
            cf = ember.compile(lambda x, y: x * 2 if x.shape[0] > 4 else x + y, backend="eager")
            for n in (3, 6):
                cf(ember.randn(n, 4), ember.randn(n, 4))
    finally:
        ember._logging.set_logs()
    text = caplog.text
    assert "create_symbol" not in text             # (the "dynamic" artifact is off)
    assert "A[0].size()[0] >= 2" in text          # the symbol's range (0/1 specialization)
    assert "A[1].size()[0] == A[0].size()[0]" in text   # duck shaping: equal sizes
    assert "A[0].size()[0] > 4" in text           # the branch the trace took


def test_different_sizes_get_different_symbols():
    def f(x, y):
        return x.sum() + y.sum()
    # distinct sizes: distinct symbols (equal sizes later still fit); equal sizes first: one
    # duck-shaped symbol, a recompile once they differ
    for sizes, expected in [(((3, 5), (7, 2), (4, 4)), 1), (((4, 4), (6, 8), (3, 9)), 2)]:
        dynamo.reset()
        inputs = [(ember.randn(a), ember.randn(b)) for a, b in sizes]
        n, eo, _ = _ember_graphs(f, inputs, dynamic=True)
        tn, to = _torch_graphs(f, inputs, dynamic=True)
        assert n == tn == expected
        _same_values(eo, to)


def test_mark_static_keeps_recompiling():
    be = Counter()
    cf = ember.compile(lambda x: x * 2, backend=be)
    for n in (3, 4, 5):
        x = ember.randn(n)
        dynamo.mark_static(x, 0)
        cf(x)
    assert len(be.graphs) == 3


def test_mark_dynamic_range_guards():
    be = Counter()
    cf = ember.compile(lambda x: x + 1, backend=be)
    for n in (3, 8, 9):
        x = ember.randn(n)
        dynamo.mark_dynamic(x, 0, min=2, max=8)
        close(cf(x), x + 1)
    assert len(be.graphs) == 2   # 9 is outside [2, 8]


def test_maybe_mark_dynamic():
    be = Counter()
    cf = ember.compile(lambda x: x.cos(), backend=be, dynamic=False)
    for n in (3, 4, 5):
        x = ember.randn(n, 2)
        dynamo.maybe_mark_dynamic(x, 0)
        close(cf(x), x.cos())
    assert len(be.graphs) == 1


def test_view_reshape_and_size_outputs():
    def f(x):
        b = x.shape[0]
        y = x.view(b, -1).t().reshape(-1, 2)
        return y * 2, b * 3, x.new_zeros(b, 2)
    be = Counter()
    cf = ember.compile(f, backend=be)
    for n in (2, 3, 4, 5):
        x = ember.randn(n, 2, 3)
        close(cf(x), f(x))
    assert len(be.graphs) == 2


def test_size_live_across_a_graph_break():
    def f(x):
        n = x.shape[0] * 2
        print("", end="")
        return x.sum() * n
    cf = ember.compile(f, backend="eager")
    for n in (3, 4, 5):
        x = ember.randn(n)
        close(cf(x), f(x))


def test_dynamic_module_batch_sizes():
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    be = Counter()
    cm = ember.compile(m, backend=be)
    for b in (2, 3, 5, 7):
        x = ember.randn(b, 4)
        close(cm(x), m(x))
    assert len(be.graphs) == 2


# ---- aot_eager on symbolic sizes -----------------------------------------------------------------
def _model():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3))


def _torch_model(m):
    t = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.LayerNorm(8),
                            torch.nn.Linear(8, 3))
    with torch.no_grad():
        for p, q in zip(t.parameters(), m.parameters()):
            p.copy_(torch.tensor(q.detach().numpy()))
    return t


def test_aot_eager_grads_on_symbolic_sizes_equal_torch():
    m = _model()
    tm = _torch_model(m)

    def loss(model, x, w):
        h = model(x) * w.sum()
        return (h.softmax(-1) * x.shape[0]).sum() + h.pow(2).mean()
    cf = ember.compile(loss, backend="aot_eager")
    w = ember.randn(5, requires_grad=True)
    for n in (3, 4, 5, 6):
        x = ember.randn(n, 4, requires_grad=True)
        for p in m.parameters():
            p.grad = None
        w.grad = None
        cf(m, x, w).backward()
        tx = torch.tensor(x.detach().numpy(), requires_grad=True)
        tw = torch.tensor(w.detach().numpy(), requires_grad=True)
        tm.zero_grad()
        loss(tm, tx, tw).backward()
        for a, b in [(x, tx), (w, tw)] + list(zip(m.parameters(), tm.parameters())):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)
    entries = cf._entries
    assert len(entries) == 2
    run = entries[1].compiled
    # one forward and one backward graph for every size, traced on symbolic sizes: the size
    # s0 is the first of the forward's inputs (x, w and 6 parameters follow)
    fwd_phs = [p for p in run.forward_graph.graph.nodes if p.op == "placeholder"]
    assert len(fwd_phs) == 9 and run.backward_graph is not None


def test_aot_eager_training_loop_varying_batch():
    m1, m2 = _model(), _model()
    o1 = ember.optim.SGD(m1.parameters(), lr=0.1, momentum=0.9)
    o2 = ember.optim.SGD(m2.parameters(), lr=0.1, momentum=0.9)
    cm = ember.compile(m2, backend="aot_eager")
    ember.manual_seed(3)
    for b in (4, 6, 5, 8, 3, 7):
        x, y = ember.randn(b, 4), ember.randn(b, 3)
        for m, o in ((m1, o1), (cm, o2)):
            o.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            o.step()
        close(m1(x), m2(x))
    assert len(cm._compiled._entries) == 2


def test_aot_eager_symbolic_in_place_falls_back_per_size():
    def f(x):
        y = x * 2
        y.add_(1)
        return y.sum() * x.shape[0]
    cf = ember.compile(f, backend="aot_eager")
    for n in (3, 4, 5):
        x = ember.randn(n, requires_grad=True)
        cf(x).backward()
        g = x.grad.clone()
        x.grad = None
        f(x).backward()
        close(g, x.grad)


class _Attn(nn.Module):
    """A causal self-attention block with its mask and positions made from the sequence length
    (`ones(T, T)`, `arange(T)`): what a GPT does with a symbolic T."""

    def __init__(self, c=16, heads=2, vocab=11, block=32):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, c), nn.Embedding(block, c)
        self.qkv, self.proj, self.h, self.c = nn.Linear(c, 3 * c), nn.Linear(c, vocab), heads, c

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.tok(idx) + self.pos(ember.arange(T))
        q, k, v = self.qkv(x).split(self.c, dim=2)
        q, k, v = (z.view(B, T, self.h, self.c // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (self.c // self.h) ** 0.5)
        mask = ember.tril(ember.ones(T, T)) == 0
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, self.c)
        logits = self.proj(y)
        return ember.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)),
                                                 targets.view(-1))


def test_attention_over_growing_sequence_lengths_trains_like_eager():
    ember.manual_seed(0)
    m1 = _Attn()
    ember.manual_seed(0)
    m2 = _Attn()
    o1 = ember.optim.AdamW(m1.parameters(), lr=1e-2)
    o2 = ember.optim.AdamW(m2.parameters(), lr=1e-2)
    cm = ember.compile(m2, backend="aot_eager")
    for T in (4, 6, 9, 12, 7):
        idx = ember.randint(0, 11, (2, T))
        losses = []
        for m, o in ((m1, o1), (cm, o2)):
            o.zero_grad()
            loss = m(idx, idx)
            loss.backward()
            o.step()
            losses.append(loss.item())
        np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    # T became symbolic at the first new length: no specialization on any later one
    assert len(cm._compiled._entries) == 2


def test_mark_dynamic_dim_that_specializes_raises_like_torch():
    from ember.fx.experimental.symbolic_shapes import ConstraintViolationError

    def f(x, y):
        return x + y   # y's dim 0 is static: x's marked dim must equal it
    x, y = ember.randn(5, 4), ember.randn(5, 4)
    dynamo.mark_dynamic(x, 0)
    with pytest.raises(ConstraintViolationError, match=r"A\[0\]\.size\(\)\[0\]"):
        ember.compile(f, backend="eager", dynamic=False)(x, y)
    tx, ty = torch.randn(5, 4), torch.randn(5, 4)
    torch._dynamo.reset()
    torch._dynamo.mark_dynamic(tx, 0)
    with pytest.raises(torch.fx.experimental.symbolic_shapes.ConstraintViolationError):
        torch.compile(f, backend="eager", dynamic=False)(tx, ty)
    # maybe_mark_dynamic is a hint: it specializes quietly
    x2 = ember.randn(5, 4)
    dynamo.maybe_mark_dynamic(x2, 0)
    close(ember.compile(f, backend="eager", dynamic=False)(x2, y), x2 + y)


def test_dynamic_log_names_each_symbol(caplog):
    ember._logging.set_logs(dynamic=True)
    try:
        with caplog.at_level(logging.INFO, logger="ember._dynamo"):
            ember.compile(lambda x: x * 2, backend="eager", dynamic=True)(ember.randn(5, 3))
    finally:
        ember._logging.set_logs()
    assert "create_symbol s0 = 5 for A[0].size()[0]" in caplog.text
    assert "create_symbol s1 = 3 for A[0].size()[1]" in caplog.text


def test_batchnorm_cnn_over_batch_sizes_symbolic_joint_graph():
    def mk():
        ember.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten())
    m1, m2 = mk(), mk()
    o1 = ember.optim.SGD(m1.parameters(), lr=0.1, momentum=0.9)
    o2 = ember.optim.SGD(m2.parameters(), lr=0.1, momentum=0.9)
    cm = ember.compile(m2, backend="aot_eager")
    for b in (2, 3, 5, 4):
        x = ember.randn(b, 3, 6, 6)
        losses = []
        for m, o in ((m1, o1), (cm, o2)):
            o.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            o.step()
            losses.append(loss.item())
        np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    close(m2[1].running_mean, m1[1].running_mean)
    close(m2[1].running_var, m1[1].running_var)
    assert int(m2[1].num_batches_tracked) == 4
    entries = cm._compiled._entries
    # one symbolic joint graph (not one per batch size); its buffer writes come last
    assert len(entries) == 2 and hasattr(entries[1].compiled, "forward_graph")
    fwd = entries[1].compiled.forward_graph
    calls = [n.target.name for n in fwd.graph.nodes if n.op == "call_function"
             and hasattr(n.target, "name")]
    assert calls[-3:] == ["copy_", "copy_", "copy_"]
