"""GPU times (CUDA events, ms an op) of the random ops on 2**26 float32 elements, for ember or,
with `torch` as argument, PyTorch (side-by-side comparison on the lent GPU only; ember never
imports torch). Usage: python gpu_random_bench.py [torch|ember [name prefixes, comma-separated]]

Measured on the lent H100 (2026-11-22, second pass, ms; before = one Philox counter a value,
after = all four words a counter, both Box-Muller normals; PyTorch 2.11 alongside):
  rand 0.223 -> 0.299 (torch 0.110)      randn 0.369 -> 0.174 (0.156)
  randint int64 0.270 -> 0.341 (0.184)   randint int32 0.269 -> 0.174 (0.166)
  bernoulli_(0.5) 0.233 -> 0.153 (0.105) normal_ float64 2^25 0.328 -> 0.203 (0.202)
  randperm(32768) host 0.864 -> GPU rank sort 2.36 (0.087); poisson 2^20 1.95 (0.03-0.05);
  multinomial 1000x1000 n=100 ~0.9 (0.200), with replacement 0.17 (0.060).
The first pass of a process can show one ~30 ms outlier (warm-up): read the second."""
from __future__ import annotations

import os
import sys

N = int(os.environ.get("BENCH_N", 1 << 26))
lib = sys.argv[1] if len(sys.argv) > 1 else "ember"
if lib == "torch":
    import torch as T
else:
    import ember as T


def timed(f, reps=20):
    for _ in range(5):
        f()
    T.cuda.synchronize()
    a, b = T.cuda.Event(enable_timing=True), T.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        f()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / reps


x = T.empty(N, device="cuda")
p = T.full((min(N, 1 << 20),), 5.0, device="cuda")
big = T.full((min(N, 1 << 20),), 300.0, device="cuda")
w = T.rand(min(N, 1000), 1000, device="cuda")
cases = {
    "rand": lambda: T.rand(N, device="cuda"),
    "randn": lambda: T.randn(N, device="cuda"),
    "randint(0,1000) int64": lambda: T.randint(0, 1000, (N,), device="cuda"),
    "randint(0,1000) int32": lambda: T.randint(0, 1000, (N,), device="cuda", dtype=T.int32),
    "bernoulli_(0.5)": lambda: x.bernoulli_(0.5),
    "uniform_ (in place)": lambda: x.uniform_(),
    "normal_ (in place)": lambda: x.normal_(),
    "normal_ float64 2^25": lambda: T.empty(N // 2, device="cuda", dtype=T.float64).normal_(),
    "poisson(5) 2^20": lambda: T.poisson(p),
    "poisson(300) 2^20": lambda: T.poisson(big),
    "randperm(32768)": lambda: T.randperm(32768, device="cuda"),
    "multinomial 1000x1000 n=100": lambda: T.multinomial(w, 100),
    "multinomial 1000x1000 n=100 repl": lambda: T.multinomial(w, 100, True),
}
only = sys.argv[2].split(",") if len(sys.argv) > 2 else None
for pas in (1, 2):    # two passes: the first may include warm-up effects (clocks, allocator)
    for name, f in cases.items():
        if only and not any(name.startswith(o) for o in only):
            continue
        try:
            print(f"{lib:6s} pass {pas} {name:34s} {timed(f):8.3f} ms", flush=True)
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"{lib:6s} {name:34s} failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
