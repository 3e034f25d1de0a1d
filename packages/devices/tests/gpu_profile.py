"""Where an ember GPU train step spends its time: host fallbacks per step and a Python profile of
the benchmark's MLP, CNN and GPT-2 (bf16) steps.
`python packages/devices/tests/gpu_profile.py [mlp,cnn,gpt] [rows]`"""
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks"))
import ember  # noqa: E402

sys.modules["torch"] = ember
import workloads  # noqa: E402

nn, F = ember.nn, ember.nn.functional


def mlp_step():
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10)).to("cuda")
    opt = ember.optim.AdamW(model.parameters(), lr=1e-3)
    xb = ember.randn(256, 784, device="cuda")
    yb = ember.randint(0, 10, (256,), device="cuda")

    def step():
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    return step


def cnn_step():
    model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(),
                          nn.Linear(128, 10)).to("cuda")
    opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xb = ember.randn(64, 1, 28, 28, device="cuda")
    yb = ember.randint(0, 10, (64,), device="cuda")

    def step():
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    return step


def gpt_step():
    cfg = dict(vocab=50304, block=1024, n_layer=12, n_head=12, n_embd=768)
    model = workloads.gpt(ember, **cfg).to("cuda").to(ember.bfloat16)
    opt = ember.optim.AdamW(model.parameters(), lr=3e-4)
    idx = ember.randint(0, cfg["vocab"], (8, cfg["block"]), device="cuda")

    def step():
        opt.zero_grad()
        model(idx, idx).backward()
        opt.step()
    return step


def gptc_step():
    """The GPT step with the model through ember.compile (needs ember-compiler on the path):
    `gpu_kernel_times.py gptc` lists its kernels (Triton kernels by their kernel_<hash> name;
    EMBER_LOGS=output_code prints what each fuses)."""
    cfg = dict(vocab=50304, block=1024, n_layer=12, n_head=12, n_embd=768)
    model = workloads.gpt(ember, **cfg).to("cuda").to(ember.bfloat16)
    opt = ember.optim.AdamW(model.parameters(), lr=3e-4)
    idx = ember.randint(0, cfg["vocab"], (8, cfg["block"]), device="cuda")
    cm = ember.compile(model)

    def step():
        opt.zero_grad()
        cm(idx, idx).backward()
        opt.step()
    return step


def profile(name, step, rows):
    for _ in range(3):
        step()
    ember.cuda.synchronize()
    t = time.perf_counter()
    step()
    ember.cuda.synchronize()
    plain = time.perf_counter() - t
    before = dict(ember.cuda.host_memory_fallbacks())
    pr = cProfile.Profile()
    pr.enable()
    step()
    ember.cuda.synchronize()
    pr.disable()
    after = ember.cuda.host_memory_fallbacks()
    print(f"== {name} step: {plain * 1e3:.2f} ms (unprofiled)")
    print("host fallbacks in one step:", {k: v - before.get(k, 0) for k, v in after.items()
                                          if v != before.get(k, 0)})
    st = pstats.Stats(pr)
    st.sort_stats("tottime").print_stats(rows)
    st.sort_stats("cumulative").print_stats(rows)


def op_times(name, step, rows):
    """Each top-level op synchronized and timed (host + GPU, by op name): where a step's device
    time goes, and the host-only time of the step (no sync inside)."""
    from ember import _dispatch
    from ember.autograd import _engine
    for _ in range(2):
        step()
    ember.cuda.synchronize()
    t = time.perf_counter()
    step()
    host = time.perf_counter() - t
    ember.cuda.synchronize()
    total = time.perf_counter() - t
    acc, depth = {}, [0]
    sync = ember.cuda.synchronize

    def timed(fn, tag):
        def w(op, *a, **k):
            if depth[0]:
                return fn(op, *a, **k)
            depth[0] += 1
            sync()
            t0 = time.perf_counter()
            try:
                return fn(op, *a, **k)
            finally:
                sync()
                key = op.qualname + tag
                n, s = acc.get(key, (0, 0.0))
                acc[key] = (n + 1, s + time.perf_counter() - t0)
                depth[0] -= 1
        return w
    from ember.cuda import blas as _blas
    gemm = _blas.gemm
    gacc = {}

    def timed_gemm(a, b, out, *args, **kw):  # cuBLAS alone, by problem shape and layout
        sync()
        t0 = time.perf_counter()
        r = gemm(a, b, out, *args, **kw)
        sync()
        key = (tuple(a.shape), a.stride(), tuple(b.shape), b.stride(), str(a.dtype))
        n, s = gacc.get(key, (0, 0.0))
        gacc[key] = (n + 1, s + time.perf_counter() - t0)
        return r
    _blas.gemm = timed_gemm
    ex, en = _dispatch.execute, _engine._execute
    _dispatch.execute = _engine._execute = timed(ex, "")
    try:  # (pointwise calls taking their cuda slot straight from call() are not timed here)
        step()
    finally:
        _dispatch.execute, _engine._execute = ex, en
        _blas.gemm = gemm
    tot = sum(s for _, s in acc.values())
    print(f"== {name} op times: step {total * 1e3:.2f} ms, host part {host * 1e3:.2f} ms, "
          f"sum of synced ops {tot * 1e3:.2f} ms over {sum(n for n, _ in acc.values())} ops")
    for k, (n, s) in sorted(acc.items(), key=lambda kv: -kv[1][1])[:rows]:
        print(f"  {k:40} {n:5d} {s * 1e3:9.3f} ms {s / n * 1e6:9.1f} us/call")
    gt = sum(s for _, s in gacc.values())
    print(f"== {name} gemm alone: {gt * 1e3:.2f} ms over {sum(n for n, _ in gacc.values())}")
    for k, (n, s) in sorted(gacc.items(), key=lambda kv: -kv[1][1])[:12]:
        print(f"  gemm {str(k):80} {n:4d} {s * 1e3:8.3f} ms {s / n * 1e6:8.1f} us")


def main():
    which = sys.argv[1].split(",") if len(sys.argv) > 1 else ["mlp", "cnn", "gpt"]
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    for name in which:
        step = {"mlp": mlp_step, "cnn": cnn_step, "gpt": gpt_step}[name]()
        op_times(name, step, rows)
        profile(name, step, rows)


if __name__ == "__main__":
    main()
