"""backend="inductor" on cuda tensors with a dynamic batch dim: the Triton kernels take their
sizes as arguments, so one wrapper and one set of kernels serve every batch size (inference and
AOT autograd's forward and backward graphs), values and gradients equal eager. On a GPU each
kernel is also compiled by Triton once. Runs on the fake device (Triton's interpreter) where
there is no GPU (cuda_helpers.run_script)."""
from cuda_helpers import run_script

SCRIPT = r"""
import numpy as np, ember
from inductor_helpers import Recorder, close

backend = Recorder()
graphs = backend.graphs

F = ember.nn.functional
fn = lambda x, y: (F.softmax(x * 2, -1) + x.mean()) * y.sum() + x.amax(1, keepdim=True)
f = ember.compile(fn, backend=backend, dynamic=True)
sources = None
for b in (3, 5, 8):
    x, y = ember.randn(b, 16).cuda(), ember.randn(b).cuda()
    with ember.no_grad():
        close(f(x, y), fn(x, y))
    g = graphs[-1]
    assert g.last is not None and "_launch(" in g.last.wrapper_src
    src = g.last.kernel_src
    assert sources is None or src == sources, "the kernels changed with the batch size"
    sources = src
assert len(graphs) == 1, len(graphs)
g = graphs[0]
assert g.n_compiles == 1 and len(g.sym_variants) == 1 and not g.variants, \
    (g.n_compiles, g.sym_variants, g.variants)
assert "s0 = " in g.last.wrapper_src and "_launch(" in g.last.wrapper_src
if ON_GPU:  # Triton compiled each kernel once for all three sizes (the launcher's cache)
    from ember._device import get_backend
    compiled = get_backend("cuda").pw.launch.compiled
    ks = [v for k, v in g.last.fn.__globals__.items() if k.startswith("kernel_")]
    assert ks
    for k in ks:
        n = sum(1 for key in compiled if key[0] == id(k))
        assert n == 1, (k, n)

# a training step: the forward and backward graphs compile once for every batch size
ember.manual_seed(0)
m = ember.nn.Sequential(ember.nn.Linear(16, 8), ember.nn.ReLU(), ember.nn.LayerNorm(8)).cuda()
graphs.clear()
ember._dynamo.reset()
cm = ember.compile(m, backend=backend, dynamic=True)
for b in (4, 6, 9):
    x = ember.randn(b, 16).cuda()
    for p in m.parameters():
        p.grad = None
    l1 = (cm(x) * x[:, :8]).sum(); l1.backward()
    g1 = [p.grad.clone() for p in m.parameters()]
    for p in m.parameters():
        p.grad = None
    l2 = (m(x) * x[:, :8]).sum(); l2.backward()
    close(l1, l2, 1e-3)
    for a, p in zip(g1, m.parameters()):
        close(a, p.grad, 1e-3)
assert len(graphs) == 2, len(graphs)
for g in graphs:
    assert g.n_compiles == 1 and len(g.sym_variants) == 1 and not g.variants, \
        (g.n_compiles, len(g.sym_variants), len(g.variants))
print("ok")
"""


def test_dynamic_batch_compiles_once_on_cuda():
    run_script(SCRIPT, "test_cuda_inductor_dynamic")
