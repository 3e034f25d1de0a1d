"""The compiler's attention rewrite (ember._inductor.fuse_attention) on cuda graphs (a GPU in this
process, else the fake device in a subprocess): hand-written attention (causal `tril(ones) == 0`
mask, `/ s` without mask, an additive mask, another bool mask) becomes one
scaled_dot_product_attention, run by the flash pair forward and backward (launches counted),
with values and gradients equal to eager; patterns that differ (softmax over another dim,
dropout between, a mask that broadcasts the scores, weights used twice, CPU) stay as written."""
from cuda_helpers import run_script

SCRIPT = r'''
import math
import numpy as np
import ember
import ember.nn.functional as F
from ember._dynamo.aot import aot_module
from ember._inductor import fuse_attention as FA
from ember.cuda.kernels import attention as A


def be(gm, ex):   # the rewrite, then AOT autograd without code generation (fast on the fake)
    FA.fuse_attention(gm, ex)
    return aot_module(gm, ex)


def causal(q, k, v):
    T = q.size(-2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    mask = ember.tril(ember.ones(T, T, device=q.device)) == 0
    return F.softmax(att.masked_fill(mask, float("-inf")), dim=-1) @ v


def divided(q, k, v):
    return F.softmax(q @ k.transpose(2, 3) / 4.0, dim=-1) @ v


def additive(q, k, v, bias):
    return F.softmax(q @ k.transpose(-2, -1) * 0.3 + bias, dim=-1) @ v


def boolmask(q, k, v, m):
    return F.softmax((q @ k.transpose(-2, -1)).masked_fill(m, float("-inf")), -1) @ v


def other_dim(q, k, v):
    return F.softmax(q @ k.transpose(-2, -1) * 0.3, dim=-2) @ v


def dropped(q, k, v):
    return F.dropout(F.softmax(q @ k.transpose(-2, -1) * 0.3, dim=-1), 0.5) @ v


def weights_too(q, k, v):
    w = F.softmax(q @ k.transpose(-2, -1) * 0.3, dim=-1)
    return w @ v, w


rng = np.random.default_rng(0)
B, H, T, E = 2, 2, 24, 16
arr = [rng.standard_normal((B, H, T, E)).astype(np.float32) for _ in range(4)]
bias = ember.tensor(rng.standard_normal((T, T)).astype(np.float32)).cuda()
m = ember.tensor(rng.random((1, T, T)) > 0.7).cuda()
wide = ember.tensor(rng.random((3, 1, T, T)) > 0.7).cuda()   # would broadcast the scores


def check(fn, extra=(), rewrites=1, dev="cuda", backend=be, values=True):
    ins = [ember.tensor(a[...]).to(dev).requires_grad_() for a in arr[:3]]
    ref = [t.detach().clone().requires_grad_() for t in ins]
    r0, c0 = FA.stats["rewrites"], dict(A.calls)
    out = ember.compile(fn, backend=backend)(*ins, *extra)
    out = out[0] if isinstance(out, tuple) else out
    assert FA.stats["rewrites"] - r0 == rewrites, (fn.__name__, FA.stats["rewrites"] - r0)
    if not values:
        return
    want = fn(*ref, *extra)
    want = want[0] if isinstance(want, tuple) else want
    g = ember.tensor(arr[3][..., :out.shape[-1]]).to(dev)
    if tuple(out.shape) != tuple(g.shape):
        g = ember.ones(out.shape, device=dev)
    out.backward(g)
    want.backward(g)
    np.testing.assert_allclose(out.detach().cpu().numpy(), want.detach().cpu().numpy(),
                               rtol=1e-4, atol=1e-5)
    for a, b in zip(ins, ref):
        np.testing.assert_allclose(a.grad.cpu().numpy(), b.grad.cpu().numpy(), rtol=1e-4,
                                   atol=1e-5)
    n = rewrites if dev == "cuda" else 0
    assert A.calls == {"forward": c0["forward"] + n, "backward": c0["backward"] + n}, A.calls


check(causal)
assert FA.stats["causal"] == 1, FA.stats   # the tril mask: is_causal=True, no mask tensor
check(divided)
check(additive, (bias,))
check(boolmask, (m,))
assert FA.stats["causal"] == 1, FA.stats
check(other_dim, rewrites=0)
check(dropped, rewrites=0, values=False)
check(weights_too, rewrites=0)
r0 = FA.stats["rewrites"]
try:   # masked_fill does not broadcast the scores: eager's error, no rewrite
    ember.compile(boolmask, backend=be)(*[ember.tensor(a).cuda() for a in arr[:3]], wide)
except RuntimeError as e:
    assert "must match" in str(e), e
else:
    raise AssertionError("no error")
assert FA.stats["rewrites"] == r0
check(causal, rewrites=0, dev="cpu")
# the GPT block's form end to end through ember's inductor (Triton code generation)
check(causal, backend="inductor")
print("ok")
'''


def test_fuse_attention_on_cuda():
    run_script(SCRIPT, "test_fuse_attention_cuda", timeout=600)
