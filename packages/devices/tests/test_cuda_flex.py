"""FlexAttention's fused Triton forward on cuda (a GPU in this process, else the fake device in
a subprocess): outputs and logsumexp equal core's eager reference on CPU for score_mods, masks,
GQA, fully masked rows and captured tensors; mods the tracer cannot express (a captured tensor
needing gradients) run the eager reference on the device instead."""
from cuda_script import run_script

FLEX = r"""
import ember
import numpy as np
from ember.cuda import _flex
from ember.nn.attention.flex_attention import create_block_mask, flex_attention

rng = np.random.default_rng(0)


def check(shapes, score=None, mask=None, gqa=False, fused=True, grad=False, sparse=None, bs=16,
          B=None, H=None):
    arrs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    L, S = shapes[0][2], shapes[1][2]
    n0, s0 = _flex.calls["fused"], _flex.calls["sparse"]
    bmg = create_block_mask(mask, B, H, L, S, device="cuda", BLOCK_SIZE=bs) if mask else None
    bmc = create_block_mask(mask, B, H, L, S, device="cpu", BLOCK_SIZE=bs) if mask else None
    xs = [ember.tensor(a, device="cuda", requires_grad=grad) for a in arrs]
    o, lse = flex_attention(*xs, score_mod=score, block_mask=bmg, enable_gqa=gqa, return_lse=True)
    oc, lc = flex_attention(*[ember.tensor(a) for a in arrs], score_mod=score, block_mask=bmc,
                            enable_gqa=gqa, return_lse=True)
    np.testing.assert_allclose(o.detach().cpu().numpy(), oc.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lse.detach().cpu().numpy(), lc.detach().numpy(), rtol=1e-4,
                               atol=1e-5)
    assert (_flex.calls["fused"] == n0 + 1) == fused, (_flex.calls, n0, fused)
    if sparse is None:
        sparse = fused and mask is not None
    assert (_flex.calls["sparse"] == s0 + 1) == sparse, (_flex.calls, s0, sparse)


causal = lambda b, h, q, k: q >= k
check([(2, 2, 20, 8)] * 3)
check([(1, 2, 40, 8), (1, 2, 24, 8), (1, 2, 24, 4)], score=lambda s, b, h, q, k: s + (q - k) * 0.1,
      mask=causal)
check([(2, 4, 8, 8), (2, 2, 8, 8), (2, 2, 8, 8)], gqa=True,
      score=lambda s, b, h, q, k: 2.0 * (s / 2.0).tanh())
check([(1, 1, 8, 4)] * 3, mask=lambda b, h, q, k: q < 5)                # rows with no key
# block-sparse walks: partly kept and full blocks, per-head masks, q/kv block sizes apart
check([(2, 2, 40, 8)] * 3, mask=causal, bs=16, B=2, H=2)
check([(1, 2, 64, 8), (1, 2, 96, 8), (1, 2, 96, 8)], mask=lambda b, h, q, k: (q - k).abs() <= 20,
      score=lambda s, b, h, q, k: s - (h + 1) * 0.25 * (q - k), bs=(16, 32), H=2)
check([(1, 1, 40, 8)] * 3, mask=causal, bs=8, sparse=False)            # blocks under 16
check([(1, 2, 8, 4)] * 3, mask=lambda b, h, q, k: (h % 2 == 0) | ((q - k).abs() <= 2))
biases = {d: ember.tensor([0.5, -1.0], device=d) for d in ("cpu", "cuda")}


learned = {d: ember.tensor([0.5, -1.0], device=d, requires_grad=True) for d in ("cpu", "cuda")}


def head_bias(s, b, h, q, k):  # indexes a captured tensor: the fused kernel reads it
    return s + biases["cuda" if h.device is None else h.device.type][h]


def learned_bias(s, b, h, q, k):  # a captured tensor needing gradients: the reference runs
    return s + learned["cuda" if h.device is None else h.device.type][h]


check([(1, 2, 8, 4)] * 3, score=head_bias)
check([(1, 2, 8, 4)] * 3, score=learned_bias, fused=False)
check([(1, 2, 8, 4)] * 3, mask=causal, grad=True)   # (the fused backward: test_cuda_flex_bwd)
"""


def test_fused_flex_attention_forward_equals_the_reference():
    run_script(FLEX, "cuda_flex")
