"""Matmuls in compiled CUDA graphs (ember._inductor.gemm / autotune): by default an extern
GEMM with its bias, activation and residual fused into one kernel after it; under max-autotune
Triton GEMM templates with that epilogue inside the template (one kernel, no extern call),
benchmarked against the extern call (choices cached on disk), for linear / mm / addmm / bmm,
forward and backward, static and dynamic batch sizes: values and gradients equal eager.
On a GPU in-process, else on the fake device (Triton's interpreter) in a subprocess."""
from cuda_helpers import run_script

SCRIPT = r"""
import os, tempfile
import numpy as np, ember
from ember._inductor import autotune, codecache
from inductor_helpers import Recorder, close

os.environ["EMBER_FX_GRAPH_CACHE"] = "0"       # compile here, not from an earlier run
F = ember.nn.functional
graphs = []
def backend_with(options):   # inductor with these options, its graphs kept in `graphs`
    backend = Recorder(options)
    backend.graphs = graphs
    return backend

ember.manual_seed(0)
x, w, b, r = (ember.randn(*s, device="cuda") for s in ((40, 24), (48, 24), (48,), (40, 48)))
block = lambda x, w, b, r: F.relu(F.linear(x, w, b)) + r

# default mode: the extern GEMM, then bias + relu + residual in one kernel
graphs.clear()
f = ember.compile(block, backend=backend_with(None))
with ember.no_grad():
    close(f(x, w, b, r), block(x, w, b, r))
c = graphs[-1].last
assert c.n_extern == 1 and c.n_kernels == 1, c.code()

# max-autotune, template forced (the interpreter's timings mean nothing): one kernel
autotune.FORCE, autotune.configs = "triton", [(32, 32, 16, 4, 2)]
graphs.clear()
ember._dynamo.reset()
f = ember.compile(block, backend=backend_with({"max_autotune": True}))
with ember.no_grad():
    close(f(x, w, b, r), block(x, w, b, r))
c = graphs[-1].last
assert c.n_extern == 0 and c.n_kernels == 1 and "tl.dot(" in c.kernel_src, c.code()

# addmm and bmm with an epilogue
a3, b3 = ember.randn(3, 20, 17, device="cuda"), ember.randn(3, 17, 18, device="cuda")
for fn, args in ((lambda p, q, s: ember.addmm(s, p, q.t()).relu(), (x, w, b)),
                 (lambda p, q: (ember.bmm(p, q) * 2).sigmoid(), (a3, b3))):
    graphs.clear()
    ember._dynamo.reset()
    with ember.no_grad():
        close(ember.compile(fn, backend=backend_with({"max_autotune": True}))(*args),
              fn(*args))
    c = graphs[-1].last
    assert c.n_extern == 0 and c.n_kernels == 1, c.code()

# a training step through ember.compile's mode: forward and backward GEMMs (transposed
# operands) as templates
m = ember.nn.Sequential(ember.nn.Linear(24, 32), ember.nn.GELU(), ember.nn.Linear(32, 16)).cuda()
ember._dynamo.reset()
n0 = autotune.stats["selected"]
cm = ember.compile(m, mode="max-autotune-no-cudagraphs")
l1 = (cm(x) ** 2).sum(); l1.backward()
g1 = [p.grad.clone() for p in m.parameters()]
for p in m.parameters():
    p.grad = None
l2 = (m(x) ** 2).sum(); l2.backward()
close(l1, l2, 1e-3)
for a, p in zip(g1, m.parameters()):
    close(a, p.grad, 1e-3)
assert autotune.stats["selected"] >= n0 + 5, autotune.stats   # 2 forward, 3 backward GEMMs

# a dynamic batch: one template kernel for every size
graphs.clear()
ember._dynamo.reset()
f = ember.compile(block, backend=backend_with({"max_autotune": True}), dynamic=True)
for n in (20, 33):
    xs, rs = ember.randn(n, 24, device="cuda"), ember.randn(n, 48, device="cuda")
    with ember.no_grad():
        close(f(xs, w, b, rs), block(xs, w, b, rs))
g = graphs[-1]
assert g.n_compiles == 1 and len(g.sym_variants) == 1 and "tl.dot(" in g.last.kernel_src

# the benchmark itself: the extern call and a template timed, the choice kept on disk
autotune.FORCE = None
cache = tempfile.mkdtemp()
os.environ["EMBER_CPU_KERNEL_CACHE"] = cache   # (the autotune cache's directory too)
before = dict(autotune.stats)
for i in range(2):
    graphs.clear()
    ember._dynamo.reset()
    f = ember.compile(block, backend=backend_with({"max_autotune": True}))
    with ember.no_grad():
        close(f(x, w, b, r), block(x, w, b, r))
    if i == 0:   # the second compile (a new process, as it were) reads the choice from disk
        autotune._memory.clear()
        codecache._memory.clear()
assert autotune.stats["benchmarked"] == before["benchmarked"] + 1, autotune.stats
assert autotune.stats["hit_disk"] == before["hit_disk"] + 1, autotune.stats
# dynamic sizes: the symbolic lowering runs twice (other size values); one benchmark decides
graphs.clear()
ember._dynamo.reset()
f = ember.compile(block, backend=backend_with({"max_autotune": True}))
n0 = autotune.stats["benchmarked"]
for n in (20, 33):
    xs, rs = ember.randn(n, 24, device="cuda"), ember.randn(n, 48, device="cuda")
    ember._dynamo.mark_dynamic(xs, 0)     # only the batch: small benchmarks in the interpreter
    ember._dynamo.mark_dynamic(rs, 0)
    with ember.no_grad():
        close(f(xs, w, b, rs), block(xs, w, b, rs))
assert autotune.stats["benchmarked"] == n0 + 1, autotune.stats
assert graphs[-1].n_compiles == 1 and len(graphs[-1].sym_variants) == 1
print("ok")
"""


def test_gemm_templates_and_epilogues():
    run_script(SCRIPT, "test_cuda_inductor_gemm")
