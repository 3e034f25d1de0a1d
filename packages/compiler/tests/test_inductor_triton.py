"""Triton code generation for CUDA tensors, on the fake device (EMBER_CUDA_FAKE=1: host memory,
kernels in Triton's interpreter), in a subprocess so the environment takes effect before triton
loads: fused kernels are generated (not the captured-graph fallback) and values and gradients
equal eager's."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")

SCRIPT = r"""
import numpy as np, ember
from inductor_helpers import Recorder

backend = Recorder()
graphs = backend.graphs

def close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().cpu().numpy(), rtol=tol,
                               atol=tol)

rng = np.random.default_rng(0)
x = ember.tensor(rng.standard_normal((6, 10)).astype("float32")).cuda()
y = ember.tensor(rng.standard_normal((10,)).astype("float32")).cuda()
cases = [
    (lambda a, b: (a + 1).relu() * b, 1),
    (lambda a, b: ember.softmax(a * b, -1), 1),
    (lambda a, b: (a * b).sum(), 1),
    (lambda a, b: a.t().exp() + b[:6], 1),
    (lambda a, b: a.amax(0) - a.mean(0) + b, 1),
    (lambda a, b: ember.nn.functional.layer_norm(a, (10,), b, b), 1),
]
for fn, k in cases:
    graphs.clear()
    ember._dynamo.reset()
    r = ember.compile(fn, backend=backend)(x, y)
    assert r.device.type == "cuda"
    close(r, fn(x, y))
    assert graphs[0].last is not None and graphs[0].last.n_kernels == k, graphs[0].last
    assert "@triton.jit" in graphs[0].last.code()

# rows longer than the smallest RBLOCK: one chunk each (rblock_for); float32 terms of sums
# accumulate without a float64 round trip
from ember._inductor.graph import rblock_for
assert (rblock_for(10, 64), rblock_for(300, 64), rblock_for(10**6, 64)) == (64, 512, 2048)
w = ember.tensor(rng.standard_normal((3, 300)).astype("float32")).cuda()
graphs.clear()
ember._dynamo.reset()
sm = lambda a: ember.softmax(a, -1) * a.sum(-1, keepdim=True)
close(ember.compile(sm, backend=backend)(w), sm(w), 1e-4)
assert "float64" not in graphs[0].last.code(), graphs[0].last.code()

# a large full reduction in two stages: 1024 programs of partials, then one over them
big = ember.tensor(rng.standard_normal((512, 1024)).astype("float32")).cuda()
for red in (lambda a: ((a * 2 + 1).relu() * a).sum(), lambda a: a.t().amax(), lambda a: a.mean()):
    graphs.clear()
    ember._dynamo.reset()
    close(ember.compile(red, backend=backend)(big), red(big), 1e-3)
    assert graphs[0].last.n_kernels == 2 and "(1024,)" in graphs[0].last.wrapper_src, \
        graphs[0].last.wrapper_src

# the same block twice (two layers' kernels around an extern matmul): one kernel, two launches
# with each layer's buffers
wsq = ember.tensor(rng.standard_normal((10, 10)).astype("float32")).cuda()
graphs.clear()
ember._dynamo.reset()
blocks = lambda a, w: ((((a * 2).relu() @ w) * 2).relu() @ w)
close(ember.compile(blocks, backend=backend)(x, wsq), blocks(x, wsq), 1e-4)
assert graphs[0].last.n_kernels == 2 and graphs[0].last.code().count("@triton.jit") == 1

# training: forward and backward graphs as Triton kernels around the extern matmuls
ember.manual_seed(0)
m = ember.nn.Sequential(ember.nn.Linear(10, 8), ember.nn.ReLU(), ember.nn.LayerNorm(8),
                        ember.nn.Linear(8, 3)).cuda()
graphs.clear()
cm = ember.compile(m, backend=backend)
l1 = ember.log_softmax(cm(x), -1).sum(); l1.backward()
g1 = [p.grad.clone() for p in m.parameters()]
for p in m.parameters():
    p.grad = None
l2 = ember.log_softmax(m(x), -1).sum(); l2.backward()
close(l1, l2)
for a, p in zip(g1, m.parameters()):
    close(a, p.grad, 1e-4)
assert len(graphs) == 2 and all(g.last is not None and g.last.n_kernels >= 1 for g in graphs)
print("OK")
"""


def test_triton_kernels_on_the_fake_device():
    here = os.path.dirname(__file__)
    paths = [p for p in sys.path if p] + [os.path.join(here, "..", "..", "devices", "tests")]
    env = dict(os.environ, EMBER_CUDA_FAKE="1", TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join(paths))
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.strip().endswith("OK")
