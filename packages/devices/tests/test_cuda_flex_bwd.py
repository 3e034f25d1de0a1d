"""FlexAttention's fused Triton backward on cuda (a GPU in this process, else the fake device in
a subprocess): `out.backward()` runs the fused dq and dk/dv kernels (counted), and the outputs,
logsumexp and gradients of q, k and v (through out and lse) equal core's eager reference on CPU;
the forward also equals torch's flex_attention where torch is installed. Score mods: relative
bias, alibi, tanh soft-cap, a quadratic one; masks: causal, document (ids in a captured tensor),
fully masked rows; GQA and a broadcast kv batch; block-sparse walks of partial and full
blocks."""
from cuda_script import run_script

FLEX_BWD = r"""
import importlib.util
import warnings
import ember
import numpy as np
from ember.cuda import _flex
from ember.nn.attention.flex_attention import create_block_mask, flex_attention

torch = importlib.import_module("torch") if importlib.util.find_spec("torch") else None
rng = np.random.default_rng(0)


def check(shapes, score=None, mask=None, gqa=False, bs=16, sparse=None, B=None, tmask=None):
    arrs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    L, S = shapes[0][2], shapes[1][2]
    n0, s0 = _flex.calls["backward"], _flex.calls["sparse"]
    res = []
    for dev in ("cuda", "cpu"):
        bm = create_block_mask(mask, B, None, L, S, device=dev, BLOCK_SIZE=bs) if mask else None
        xs = [ember.tensor(a, device=dev, requires_grad=True) for a in arrs]
        o, lse = flex_attention(*xs, score_mod=score, block_mask=bm, enable_gqa=gqa,
                                return_lse=True)
        go = np.sin(np.arange(o.numel(), dtype=np.float32)).reshape(o.shape)
        gl = np.cos(np.arange(lse.numel(), dtype=np.float32)).reshape(lse.shape)
        live = lse != -float("inf")
        loss = (o * ember.tensor(go, device=dev)).sum() + \
            ember.where(live, lse * ember.tensor(gl, device=dev), 0.0).sum()
        loss.backward()
        res.append([o.detach().cpu().numpy(), lse.detach().cpu().numpy()] +
                   [x.grad.cpu().numpy() for x in xs])
    assert _flex.calls["backward"] == n0 + 1, _flex.calls
    assert _flex.calls["sparse"] == s0 + (mask is not None if sparse is None else sparse)
    for a, b, name in zip(*res, ("out", "lse", "dq", "dk", "dv")):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4, err_msg=name)
    if torch is not None:  # the forward against torch's own flex_attention (CPU, eager)
        from torch.nn.attention import flex_attention as TF
        tbm = TF.create_block_mask(tmask or mask, B, None, L, S, device="cpu",
                                   BLOCK_SIZE=bs) if mask else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            to, tl = TF.flex_attention(*[torch.tensor(a) for a in arrs], score_mod=score,
                                       block_mask=tbm, enable_gqa=gqa, return_lse=True)
        np.testing.assert_allclose(res[0][0], to.numpy(), rtol=2e-4, atol=2e-4)
        np.testing.assert_allclose(res[0][1], tl.numpy(), rtol=2e-4, atol=2e-4)


causal = lambda b, h, q, k: q >= k
ids = np.repeat([0, 1, 2], [10, 9, 5]).astype(np.int32)             # three documents
docs = {d: ember.tensor(ids, device=d) for d in ("cpu", "cuda")}


def document(b, h, q, k):  # a captured tensor of document ids, read by the kernels
    doc = docs["cuda" if q.device is None else q.device.type]
    return (doc[q] == doc[k]) & (q >= k)


def tdocument(b, h, q, k):
    doc = torch.tensor(ids)
    return (doc[q] == doc[k]) & (q >= k)


check([(1, 2, 32, 8), (1, 2, 32, 8), (1, 2, 32, 4)], score=lambda s, b, h, q, k: s + (q - k) * 0.1,
      mask=causal)
check([(1, 4, 8, 8), (1, 2, 8, 8), (1, 2, 8, 8)], gqa=True,
      score=lambda s, b, h, q, k: 2.0 * (s / 2.0).tanh())
check([(1, 2, 24, 8)] * 3, score=lambda s, b, h, q, k: s - (h + 1) * 0.25 * (q - k).abs(),
      mask=document, bs=(16, 16), tmask=tdocument)
check([(2, 1, 8, 4), (1, 1, 8, 4), (1, 1, 8, 4)], mask=lambda b, h, q, k: q < 5,
      score=lambda s, b, h, q, k: s * s * 0.1 + s, B=2)                    # rows with no key
"""


def test_fused_flex_attention_backward_equals_the_reference():
    run_script(FLEX_BWD, "cuda_flex_bwd")
