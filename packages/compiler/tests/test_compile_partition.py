"""The min-cut partitioner of aot_eager: which tensors the forward saves for the backward (the
cheapest set; cheap pointwise chains recomputed, matmuls and random draws never), activation
checkpointing inside compiled code (recomputed, never saved), and values and gradients equal
to PyTorch eager's."""
import numpy as np
import pytest
from compile_helpers import _reset  # noqa: F401  (_reset: autouse)

import ember
import ember.nn.functional as F
from ember._dynamo.aot import aot_module, default_partition
from ember.utils.checkpoint import checkpoint

torch = pytest.importorskip("torch")


def _compiled_run(f, *args):
    cf = ember.compile(f, backend="aot_eager")
    out = cf(*args)
    out.backward()
    return cf._entries[0].compiled, out


def _saved_names(run):
    phs = [n.name for n in run.backward_graph.graph.nodes if n.op == "placeholder"]
    return [p for p in phs if not p.startswith("tangent")]


def _ops(gm, name):
    return sum(1 for n in gm.graph.nodes if n.op == "call_function"
               and getattr(n.target, "name", None) == name)


def _xw(requires=True):
    ember.manual_seed(0)
    return (ember.randn(4, 5, requires_grad=requires), ember.randn(5, 6, requires_grad=requires))


def test_gelu_of_matmul_saves_inputs_and_matmul_output():
    x, w = _xw()
    run, _ = _compiled_run(lambda x, w: F.gelu(x @ w).sum(), x, w)
    assert run.n_saved == 3
    assert _saved_names(run) == ["primal0", "primal1", "matmul"]


def test_pointwise_chain_after_matmul_is_recomputed():
    x, w = _xw()
    run, _ = _compiled_run(lambda x, w: F.gelu(x @ w).tanh().exp().mul(3).sum(), x, w)
    # only x, w and the matmul output: gelu/tanh/exp results are recomputed in the backward
    assert _saved_names(run) == ["primal0", "primal1", "matmul"]
    assert _ops(run.backward_graph, "gelu") == 1 and _ops(run.backward_graph, "tanh") == 1


def test_pure_pointwise_graph_saves_only_its_input():
    x = ember.randn(8, requires_grad=True)
    run, _ = _compiled_run(lambda x: (x.sin() * x.cos()).exp().sum(), x)
    assert _saved_names(run) == ["primal0"]


def test_min_cut_saves_fewer_than_default_partition():
    x, w = _xw()

    def f(x, w):
        h = x @ w
        return (h.sigmoid() * h.tanh() + h.exp()).sum()
    run, _ = _compiled_run(f, x, w)
    gm = _captured_graph(f, x, w)
    old = aot_module(gm, [x, w], partition_fn=default_partition)
    assert run.n_saved == 3 < old.n_saved


def _captured_graph(f, *args):
    graphs = []

    def keep(gm, ex):
        graphs.append(gm)
        return gm
    ember.compile(f, backend=keep)(*args)
    return graphs[0]


def test_random_draws_are_saved_not_recomputed():
    x = ember.randn(16, 8, requires_grad=True)
    run, _ = _compiled_run(lambda x: F.dropout(x.exp(), 0.5, training=True).sum(), x)
    assert _ops(run.backward_graph, "dropout") == 0
    assert _ops(run.backward_graph, "bernoulli") == 0 and _ops(run.backward_graph, "rand") == 0


def _torch(a):
    return torch.tensor(a.detach().numpy(), requires_grad=True)


def test_checkpoint_region_recomputed_and_equal_to_torch():
    x, w = _xw()

    def region(a, w):
        return (a @ w).tanh().exp()

    def f(x, w):
        h = checkpoint(region, x, w, use_reentrant=False)
        return (h * 2).sum()
    run, out = _compiled_run(f, x, w)
    # nothing of the region is saved: the matmul runs again in the backward (plus its 2 grads)
    assert _saved_names(run) == ["primal0", "primal1"]
    assert _ops(run.backward_graph, "matmul") == 3
    tx, tw = _torch(x), _torch(w)

    def tregion(a, w):
        return (a @ w).tanh().exp()
    tout = (torch.utils.checkpoint.checkpoint(tregion, tx, tw, use_reentrant=False) * 2).sum()
    tout.backward()
    np.testing.assert_allclose(out.item(), tout.item(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_checkpointed_mlp_blocks_train_like_eager():
    ember.manual_seed(0)
    ws = [ember.randn(8, 8, requires_grad=True) for _ in range(3)]

    def block(h, w):
        return F.gelu(h @ w) + h

    def f(x):
        h = x
        for w in ws:
            h = checkpoint(block, h, w, use_reentrant=False)
        return h.pow(2).mean()
    x = ember.randn(4, 8)
    cf = ember.compile(f, backend="aot_eager")
    cf(x).backward()
    got = [w.grad.clone() for w in ws]
    for w in ws:
        w.grad = None
    f(x).backward()
    for a, w in zip(got, ws):
        np.testing.assert_allclose(a.numpy(), w.grad.numpy(), rtol=1e-5, atol=1e-6)
    run = cf._entries[0].compiled
    assert _saved_names(run) == ["primal0", "primal1", "primal2", "primal3"]


@pytest.mark.parametrize("fake_joint", [True, False])
def test_joint_traced_on_fake_or_real_tensors_gives_eager_grads(fake_joint, monkeypatch):
    import ember._dynamo.config as config
    monkeypatch.setattr(config, "aot_fake_joint", fake_joint)
    x, w = _xw()
    b = ember.randn(6, requires_grad=True)

    def f(x, w, b):
        h = F.layer_norm(x @ w + b, (6,))
        with ember.no_grad():
            s = h.abs().max()           # a constant for autograd
        return (F.gelu(h) / s).sum()
    run, out = _compiled_run(f, x, w, b)
    got = [t.grad.clone() for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    ref = f(x, w, b)
    ref.backward()
    np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-5)
    for a, t in zip(got, (x, w, b)):
        np.testing.assert_allclose(a.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
