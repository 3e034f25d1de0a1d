"""ember.compile against torch.compile (PyTorch 2.13) on CPU, both with backend="aot_eager" (capture
+ AOT autograd, no code generation), each implementation in its own subprocess:

- compile_first_step_s: the first call of a compiled train step of the workloads' small GPT
  (4 layers, n_embd 128, block 128, batch 8): capture, joint graph, partition, and one step;
- eager_step_s / compiled_step_s: steady-state train step (median), eager and compiled;
- call_overhead_<backend>_us: one call of a compiled `a + b + c` on three 4-element tensors
  (guards + dispatch + the graph; backend "eager" and "aot_eager"), and the same eagerly.

    python benchmarks/compile_bench.py
"""
from __future__ import annotations

import time

import versus

CFG = versus.GPT_CPU
BATCH = 8


def _median(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def measure(impl: str) -> dict:
    t = versus.load(impl)
    t.manual_seed(0)
    out = {"impl": impl}
    model = versus.gpt(t)
    opt = t.optim.AdamW(model.parameters(), lr=1e-3)
    idx = t.randint(0, CFG["vocab"], (BATCH, CFG["block"]))

    def step(m):
        opt.zero_grad()
        loss = m(idx, idx)
        loss.backward()
        opt.step()
        return loss
    out["eager_step_s"] = _median(lambda: step(model), 3)
    cmodel = t.compile(model, backend="aot_eager")
    t0 = time.perf_counter()
    step(cmodel)
    out["compile_first_step_s"] = time.perf_counter() - t0
    step(cmodel)
    out["compiled_step_s"] = _median(lambda: step(cmodel), 3)
    with t.no_grad():
        out["loss_matches_eager"] = abs(float(cmodel(idx, idx)) - float(model(idx, idx))) < 1e-4

    a, b, c = t.randn(4), t.randn(4), t.randn(4)

    def add3(a, b, c):
        return a + b + c
    n = 5000

    def calls(fn):
        def run():
            for _ in range(n):
                fn(a, b, c)
        return run
    for backend in ("eager", "aot_eager"):
        cadd = t.compile(add3, backend=backend)
        cadd(a, b, c)
        out[f"call_overhead_{backend}_us"] = _median(calls(cadd), 5) / n * 1e6
    out["eager_add3_us"] = _median(calls(add3), 5) / n * 1e6
    return out


if __name__ == "__main__":
    versus.main(__file__, measure)
