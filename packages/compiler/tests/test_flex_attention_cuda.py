"""flex_attention inside ember.compile on cuda (a GPU in this process, else the fake device in a
subprocess): the compiled forward and backward graphs hold one flex_attention and one
flex_attention_backward node, ember._inductor runs them through the fused Triton kernels
(counted), and values and gradients equal eager on CPU."""
from cuda_helpers import run_script

SCRIPT = r'''
import numpy as np
import ember
from ember._dynamo.aot import aot_module
from ember._higher_order_ops.flex_attention import flex_attention_backward_hop, flex_attention_hop
from ember._inductor.compile_fx import compile_graph
from ember.cuda import _flex
from ember.nn.attention.flex_attention import create_block_mask, flex_attention

seen = []


def rec(gm, ex):
    seen.append(gm)
    return compile_graph(gm, ex)


def backend(gm, ex):
    return aot_module(gm, ex, fw_compiler=rec, bw_compiler=rec)


def causal(b, h, q, k):
    return q >= k


def alibi(s, b, h, q, k):
    return s - (h + 1) * 0.25 * (q - k)


rng = np.random.default_rng(0)
arrs = [rng.standard_normal((1, 2, 32, 8)).astype(np.float32) for _ in range(3)]
go = np.sin(np.arange(512, dtype=np.float32)).reshape(1, 2, 32, 8)
res = []
for dev in ("cuda", "cpu"):
    bm = create_block_mask(causal, None, None, 32, 32, device=dev, BLOCK_SIZE=16)

    def f(q, k, v):
        return flex_attention(q, k, v, score_mod=alibi, block_mask=bm) * 2.0
    fn = ember.compile(f, backend=backend, fullgraph=True) if dev == "cuda" else f
    n0 = dict(_flex.calls)
    xs = [ember.tensor(a, device=dev, requires_grad=True) for a in arrs]
    out = fn(*xs)
    (out * ember.tensor(go, device=dev)).sum().backward()
    res.append([out.detach().cpu().numpy()] + [x.grad.cpu().numpy() for x in xs])
    if dev == "cuda":
        assert _flex.calls["fused"] >= n0["fused"] + 2, _flex.calls     # joint trace, compiled
        assert _flex.calls["backward"] >= n0["backward"] + 2, _flex.calls
        fwd, bwd = seen
        assert [n.target for n in fwd.graph.nodes].count(flex_attention_hop) == 1
        assert [n.target for n in bwd.graph.nodes].count(flex_attention_backward_hop) == 1
for a, b in zip(*res):
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4)
'''


def test_compiled_flex_attention_on_cuda():
    run_script(SCRIPT, "flex_attention_cuda")
