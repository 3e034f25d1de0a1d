"""A CUDA graph's Triton kernels compiled in worker processes before its first run
(_inductor/triton_precompile.py): the launches read from the wrapper, and the keys the workers'
compiles leave in Triton's cache are the ones the launcher's own launches look up. On the CPU:
the graph is generated on the fake device without launches (EMBER_CUDA_FAKE=nolaunch, real
JITFunctions), each kernel compiled for sm_90 in a worker process."""
import os
import subprocess
import sys

SCRIPT = r"""
import os, sys
import ember
from ember._inductor import codecache, graph as G, triton_precompile as P
from ember.cuda.runtime import precompile_worker as W

got = []
orig = G.load
def load(art, gm):
    cg = orig(art, gm)
    got.append(cg)
    return cg
G.load = codecache._load = load

base = ember.randn(8257, device="cuda", dtype=ember.bfloat16)
x = base[:8256].view(64, 129)
v = base[1:].view(64, 129)          # 2 bytes into its storage: not 16-byte aligned
f = ember.compile(lambda a, b: ((a.sin() * 2).softmax(-1) + b).sum(0), backend="inductor")
f(x, v)
cg = got[0]
jobs = P.plan(cg.wrapper_src, [x, v])
assert len(jobs) >= 2, jobs
glb = cg.fn.__globals__
kinds = {k for j in jobs for k in j[1]}
assert ("ember.bfloat16", True) in kinds and ("ember.bfloat16", False) in kinds, kinds
assert all(j[0] in glb and j[3] and "XBLOCK" in j[4] for j in jobs), jobs

def nfiles():
    return sum(len(fs) for _, _, fs in os.walk(os.environ["TRITON_CACHE_DIR"]))

pool = W.Pool.get(2)
done = pool.run([[glb[n].fn.__code__.co_filename, n, k, i, list(g), c, 90]
                 for n, k, i, g, c in jobs])
assert done == len(jobs), (done, pool.errors, jobs)
compiled = nfiles()
assert compiled > 0

# the launcher's first launch (fresh JITFunctions, ember's own pointer objects) finds them
from ember.cuda.kernels.pointwise import load_kernel
from ember.cuda.runtime.launcher import Ptr
W._target_driver(90)
for n, k, i, g, c in jobs:
    fn = load_kernel(open(glb[n].fn.__code__.co_filename).read(), n)
    ptrs = [Ptr(512 if al else 514, getattr(ember, dt.split(".")[-1])) for dt, al in k]
    fn.warmup(*ptrs, *i, grid=g, **c)
assert nfiles() == compiled, (compiled, nfiles())

# a launch with symbolic sizes is left to its launch
sym = "def call(args):\n    in0, = args\n    _launch(k1, (s0,), (in0,), (), 1, 128, {})\n"
assert P.plan(sym, [x]) == []
print("OK", len(jobs))
"""


def test_parallel_compile_keys_match_the_launcher(tmp_path):
    env = dict(os.environ, EMBER_CUDA_FAKE="nolaunch", EMBER_FX_GRAPH_CACHE="0",
               TRITON_CACHE_DIR=str(tmp_path / "triton"))
    env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]


def test_workers_setting(monkeypatch):
    from ember._inductor import triton_precompile as P
    monkeypatch.setenv("EMBER_COMPILE_WORKERS", "0")
    assert P.workers() == 0
    assert P.precompile({}, "def call(args):\n    pass\n", []) == 0
    monkeypatch.setenv("EMBER_COMPILE_WORKERS", "3")
    assert P.workers() == 3
