"""scaled_dot_product_attention on cuda runs the flash-attention pair (`_fused_attention` and its
backward: kernels/attention.py): outputs and q/k/v gradients equal PyTorch's CPU SDPA for causal,
bool and additive masks (broadcast, with a fully masked row), ragged lengths, padded head dims,
float32/float16/bfloat16 and q/k/v read as strided views of one projection; dropout and GQA keep
the decomposition. On a GPU in-process, else on the fake device (a subprocess)."""
from cuda_script import run_script

SCRIPT = r"""
import numpy as np, ember, torch
from ember.cuda.kernels import attention as A
F, TF = ember.nn.functional, torch.nn.functional


def run(B, H, L, S, E, dt, causal=False, mask=None, scale=None, seed=0, packed=False):
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(s).astype("float32")
            for s in ((B, H, L, E), (B, H, S, E), (B, H, S, E), (B, H, L, E))]
    ed, td = getattr(ember, dt), getattr(torch, dt)
    if packed:   # q, k, v: (B, T, 3 * H * E) split and transposed, as in a GPT block
        x = np.concatenate([a.transpose(0, 2, 1, 3).reshape(B, L, H * E) for a in arrs[:3]], 2)
        ex = ember.tensor(x).to(ed).cuda().requires_grad_()
        tx = torch.tensor(x).to(td).requires_grad_()
        eq, ek, ev = (t.view(B, L, H, E).transpose(1, 2) for t in ex.split(H * E, 2))
        tq, tk, tv = (t.view(B, L, H, E).transpose(1, 2) for t in tx.split(H * E, 2))
        eleaves, tleaves = [ex], [tx]
    else:
        eq, ek, ev = [ember.tensor(a).to(ed).cuda().requires_grad_() for a in arrs[:3]]
        tq, tk, tv = [torch.tensor(a).to(td).requires_grad_() for a in arrs[:3]]
        eleaves, tleaves = [eq, ek, ev], [tq, tk, tv]
    em = tm = None
    if mask == "bool":
        m = rng.random((L, S)) > 0.3
        m[min(2, L - 1)] = False   # a fully masked row: zeros, no gradient
        em, tm = ember.tensor(m).cuda(), torch.tensor(m)
    elif mask == "add":
        m = rng.standard_normal((1, H, L, S)).astype("float32")
        em, tm = ember.tensor(m).to(ed).cuda(), torch.tensor(m).to(td)
    c0 = dict(A.calls)
    eo = F.scaled_dot_product_attention(eq, ek, ev, attn_mask=em, is_causal=causal, scale=scale)
    to = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, is_causal=causal, scale=scale)
    tol = 1e-4 if dt == "float32" else 2e-2
    assert eo.dtype == ed and eo.shape == to.shape
    np.testing.assert_allclose(eo.float().cpu().detach().numpy(), to.float().detach().numpy(),
                               rtol=tol, atol=tol)
    g = arrs[3]
    eo.backward(ember.tensor(g).to(ed).cuda())
    to.backward(torch.tensor(g).to(td))
    for a, b in zip(eleaves, tleaves):
        np.testing.assert_allclose(a.grad.float().cpu().numpy(), b.grad.float().numpy(),
                                   rtol=3 * tol, atol=3 * tol)
    assert A.calls == {"forward": c0["forward"] + 1, "backward": c0["backward"] + 1}, A.calls


run(1, 2, 16, 16, 16, "float32")
run(1, 2, 40, 40, 32, "float32", causal=True, scale=0.2)
run(2, 2, 37, 45, 24, "float32", mask="bool")
run(1, 2, 33, 20, 16, "bfloat16", mask="add")
run(1, 1, 64, 64, 64, "float16", causal=True)
run(1, 2, 45, 20, 16, "float32", causal=True)    # L > S: top-left causal, as PyTorch
run(1, 1, 33, 33, 80, "float16", causal=True)    # head dim 80: padded to 128
run(2, 2, 48, 48, 16, "bfloat16", causal=True, packed=True)

# not the fused pair: dropout, GQA, a 3-d input (the decomposition, as before)
q = ember.randn(1, 4, 8, 16, device="cuda")
k = ember.randn(1, 2, 8, 16, device="cuda")
c0 = dict(A.calls)
F.scaled_dot_product_attention(q, k, k, enable_gqa=True)
F.scaled_dot_product_attention(q[0], q[0], q[0])
F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
assert A.calls == c0, A.calls
# both fused roles turned off (torch.backends.cuda's switches): the decomposition
ember.backends.cuda.enable_flash_sdp(False)
ember.backends.cuda.enable_mem_efficient_sdp(False)
try:
    F.scaled_dot_product_attention(q, q, q, is_causal=True)
finally:
    ember.backends.cuda.enable_flash_sdp(True)
    ember.backends.cuda.enable_mem_efficient_sdp(True)
assert A.calls == c0, A.calls
F.scaled_dot_product_attention(q, q, q, is_causal=True)
assert A.calls["forward"] == c0["forward"] + 1, A.calls
# a mask together with is_causal: PyTorch's error
try:
    F.scaled_dot_product_attention(q, q, q, attn_mask=ember.ones(8, 8, device="cuda").bool(),
                                   is_causal=True)
except RuntimeError as e:
    assert "attn_mask" in str(e), e
else:
    raise AssertionError("no error")
print("ok")
"""


def test_sdpa_flash_on_cuda():
    run_script(SCRIPT, "test_cuda_sdpa", timeout=600)
