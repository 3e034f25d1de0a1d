"""flex_attention inside ember.compile and make_fx: one `flex_attention` node (its mods traced
into subgraphs, the BlockMask's lists its tensor arguments) and, for training, one
`flex_attention_backward` node; no (L, S) matrix op in any graph; ember._inductor runs them
through the fused C++ kernels; values and gradients equal eager."""
import numpy as np
import pytest
from compile_helpers import _reset  # noqa: F401 (autouse fixture)

import ember
from ember._dynamo.aot import aot_module
from ember._higher_order_ops.flex_attention import (
    flex_attention_backward_hop,
    flex_attention_hop,
)
from ember._inductor.compile_fx import compile_graph
from ember.fx.experimental.proxy_tensor import make_fx
from ember.nn.attention import _flex_cpu as FC
from ember.nn.attention.flex_attention import create_block_mask, flex_attention

_DENSE = ("matmul", "bmm", "mm", "softmax", "_softmax", "logsumexp", "baddbmm", "expand")


def _causal(b, h, q, k):
    return q >= k


def _rel(s, b, h, q, k):
    return s + (q - k) * 0.1


def _targets(gm):
    return [getattr(n.target, "qualname", None) or getattr(n.target, "__name__", str(n.target))
            for n in gm.graph.nodes if n.op == "call_function"]


def _recording():
    seen = []

    def rec(gm, example_inputs):
        seen.append(gm)
        return compile_graph(gm, example_inputs)

    def backend(gm, example_inputs):
        return aot_module(gm, example_inputs, fw_compiler=rec, bw_compiler=rec)
    return backend, seen


def _grads(fn, xs):
    xs = [x.detach().clone().requires_grad_(True) for x in xs]
    out = fn(*xs)
    (out * ember.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    return out, [x.grad for x in xs]


def test_make_fx_records_one_node_with_subgraphs():
    q = ember.randn(1, 2, 16, 8)
    bm = create_block_mask(_causal, None, None, 16, 16, device="cpu", BLOCK_SIZE=8)
    gm = make_fx(lambda q, k, v: flex_attention(q, k, v, score_mod=_rel, block_mask=bm))(
        q, q + 1, q - 1)
    nodes = [n for n in gm.graph.nodes if n.target is flex_attention_hop]
    assert len(nodes) == 1 and not set(_targets(gm)) & set(_DENSE)
    assert "sub" in _targets(gm.sdpa_score0) and "ge" in _targets(gm.sdpa_mask0)
    ref = flex_attention(q, q + 1, q - 1, score_mod=_rel, block_mask=bm)
    np.testing.assert_allclose(gm(q, q + 1, q - 1).numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    # a captured tensor indexed by q_idx/kv_idx stays an index by them (not a constant index)
    dm = create_block_mask(_document, None, None, 16, 16, device="cpu", BLOCK_SIZE=8)
    n0 = FC.calls["forward"]
    gm = make_fx(lambda q: flex_attention(q, q, q, block_mask=dm))(q)
    assert "index.Tensor" in _targets(gm.sdpa_mask0)
    ref = flex_attention(q, q, q, block_mask=dm)
    np.testing.assert_allclose(gm(q).numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    assert FC.calls["forward"] == n0 + 2    # the trace and the run: the fused kernel


def test_compiled_training_runs_the_fused_kernels():
    rng = np.random.default_rng(0)
    xs = [ember.tensor(rng.standard_normal((1, 2, 32, 8)).astype(np.float32)) for _ in "qkv"]
    bm = create_block_mask(_causal, None, None, 32, 32, device="cpu", BLOCK_SIZE=16)

    def f(q, k, v):
        return flex_attention(q, k, v, score_mod=_rel, block_mask=bm).sin()
    backend, seen = _recording()
    cf = ember.compile(f, backend=backend, fullgraph=True)
    n0 = dict(FC.calls)
    out, grads = _grads(cf, xs)
    ref, rgrads = _grads(f, xs)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    for g, r in zip(grads, rgrads):
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-4, atol=1e-5)
    fwd, bwd = seen
    assert [n.target for n in fwd.graph.nodes].count(flex_attention_hop) == 1
    assert [n.target for n in bwd.graph.nodes].count(flex_attention_backward_hop) == 1
    for gm in seen:
        assert not set(_targets(gm)) & set(_DENSE), _targets(gm)
    # the compiled forward and backward ran the C++ kernels (as did the joint trace)
    assert FC.calls["forward"] >= n0["forward"] + 2
    assert FC.calls["backward"] >= n0["backward"] + 2
    assert FC.calls["sparse"] > n0["sparse"]


def test_inference_default_backend_and_a_lambda_made_in_the_function():
    q, k, v = (ember.randn(2, 4, 12, 8) for _ in range(3))
    k, v = k[:, :2], v[:, :2]

    def f(q, k, v, cap):
        soft = lambda s, b, h, qi, ki: cap * (s / cap).tanh()  # noqa: E731
        return flex_attention(q, k, v, score_mod=soft, enable_gqa=True) * 2
    n0 = FC.calls["forward"]
    out = ember.compile(f)(q, k, v, 2.0)
    np.testing.assert_allclose(out.numpy(), f(q, k, v, 2.0).numpy(), rtol=1e-5, atol=1e-6)
    assert FC.calls["forward"] == n0 + 1


def _window(b, h, q, k):
    return (q - k).abs() <= 2


def test_block_mask_argument_is_read_each_call():
    """The BlockMask's lists are graph inputs and its mask_mod is guarded: another mask gives
    its own result, not the first capture's."""
    q = ember.randn(1, 1, 16, 8)
    masks = [create_block_mask(m, None, None, 16, 16, device="cpu", BLOCK_SIZE=8)
             for m in (_causal, _window)]
    causal2 = create_block_mask(_causal, None, None, 16, 16, device="cpu", BLOCK_SIZE=4)

    def f(q, bm):
        return flex_attention(q, q, q, block_mask=bm)
    cf = ember.compile(f)
    for bm in (masks[0], masks[1], masks[0], causal2):
        np.testing.assert_allclose(cf(q, bm).numpy(), f(q, bm).numpy(), rtol=1e-5, atol=1e-6)


_BIAS = ember.tensor([0.5, -1.0])
_DOC = ember.tensor([0] * 5 + [1] * 7 + [2] * 4, dtype=ember.int32)   # three documents
_LEARNED = ember.tensor([0.5, -1.0], requires_grad=True)


def _head_bias(s, b, h, q, k):  # reads a captured tensor: a graph input of the subgraph
    return s + _BIAS[h]


def _document(b, h, q, k):
    return (_DOC[q] == _DOC[k]) & (q >= k)


def _learned_bias(s, b, h, q, k):
    return s * (1 + _LEARNED[h])


def test_captured_tensors_compiled_training_fused():
    xs = [ember.randn(1, 2, 16, 8) for _ in range(3)]
    bm = create_block_mask(_document, None, None, 16, 16, device="cpu", BLOCK_SIZE=8)

    def f(q, k, v):
        return flex_attention(q, k, v, score_mod=_head_bias, block_mask=bm) * 2
    backend, seen = _recording()
    n0 = dict(FC.calls)
    out, grads = _grads(ember.compile(f, backend=backend, fullgraph=True), xs)
    ref, rgrads = _grads(f, xs)
    for a, b in zip([out, *grads], [ref, *rgrads]):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-4, atol=1e-5)
    assert FC.calls["forward"] >= n0["forward"] + 2 and FC.calls["backward"] >= n0["backward"] + 2
    assert [n.target for n in seen[0].graph.nodes].count(flex_attention_hop) == 1


def test_captured_tensor_needing_grad_runs_eagerly():
    q = ember.randn(1, 2, 8, 4)

    def f(q):
        return flex_attention(q, q, q, score_mod=_learned_bias) + 1
    out, _ = _grads(ember.compile(f), [q])
    g = _LEARNED.grad.clone()
    _LEARNED.grad = None
    ref, _ = _grads(f, [q])
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.numpy(), _LEARNED.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert float(g.abs().sum()) > 0


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
