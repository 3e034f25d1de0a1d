"""The backward loop in ember._C (csrc/engine.cpp) on cuda tensors against ember's Python loop:
the same gradients, bit for bit (same kernels, same order of sums), for a small MLP and a
transformer block (layer_norm's multi-output node, split views, softmax), with autograd.grad too.
On a GPU in-process; without one on the fake device (a subprocess, see cuda_script.py)."""
from cuda_script import run_script

SCRIPT = r"""
import numpy as np, ember
import ember.autograd
from ember import _native
from ember.autograd import _engine

nn, F = ember.nn, ember.nn.functional
loop = _engine.NATIVE_RUN[0]

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln, self.qkv, self.out = nn.LayerNorm(32), nn.Linear(32, 96), nn.Linear(32, 32)
        self.mlp = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))

    def forward(self, x):  # (B, T, 32)
        q, k, v = self.qkv(self.ln(x)).split(32, dim=2)
        att = F.softmax(q @ k.transpose(1, 2) / 32 ** 0.5, dim=-1)
        x = x + self.out(att @ v)
        return x + self.mlp(self.ln(x))

def grads(model, x, y, native):
    _engine.NATIVE_RUN[0] = loop if native else None
    try:
        model.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y)
        loss.backward(retain_graph=True)
        first = [p.grad.cpu().numpy().copy() for p in model.parameters()]
        gx, = ember.autograd.grad(loss, x)
        return first + [gx.cpu().numpy()]
    finally:
        _engine.NATIVE_RUN[0] = loop

ember.manual_seed(0)
mlp = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10)).cuda()
block = Block().cuda()
cases = [(mlp, ember.randn(16, 20, device="cuda", requires_grad=True),
          ember.randint(0, 10, (16,), device="cuda")),
         (block, ember.randn(2, 8, 32, device="cuda", requires_grad=True),
          ember.randint(0, 32, (16,), device="cuda"))]
runs = _native._C.engine_stats()[0] if loop is not None else None
for model, x, y in cases:
    ref = grads(model, x, y, False)
    got = grads(model, x, y, True)
    assert len(ref) == len(got)
    for a, b in zip(ref, got):
        assert a.shape == b.shape and np.array_equal(a, b), (a, b)
if loop is not None:
    assert _native._C.engine_stats()[0] >= runs + 4
print("ok")
"""


def test_native_engine_on_cuda_tensors():
    run_script(SCRIPT, "test_native_cuda_engine", timeout=900)
