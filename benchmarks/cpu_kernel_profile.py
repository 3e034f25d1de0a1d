"""Where a compiled CPU training step spends its time: every generated C++ kernel and every
extern call of ember.compile's wrappers timed (thread CPU time, one thread by default).

    python benchmarks/cpu_kernel_profile.py [--steps 5] [--top 25] [--dump DIR]

Runs the small GPT of workloads.py (4 layers, n_embd 128, T 128, batch 16) compiled, then
prints per kernel / extern op: calls per step, ms per step, share; `--dump` writes the
generated kernel and wrapper sources there.
"""
import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dump", default="")
    ap.add_argument("--detail", action="store_true", help="extern calls by operand layout")
    ap.add_argument("--min", action="store_true",
                    help="wall time, each kernel's / op's fastest step (a loaded machine's "
                         "estimate of an idle one; with --threads 2: the split kernels)")
    a = ap.parse_args()
    import ember as torch
    sys.modules["torch"] = torch
    import workloads

    from ember._inductor import graph as G
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    clock = time.perf_counter if a.min else time.thread_time
    acc = collections.defaultdict(float)
    calls = collections.Counter()
    on = [False]
    srcs = {}

    def timed(name, fn):
        def w(*args, **kw):
            if not on[0]:
                return fn(*args, **kw)
            t0 = clock()
            r = fn(*args, **kw)
            dt = clock() - t0
            acc[name] += dt
            calls[name] += 1
            if a.detail and name.startswith("extern"):
                key = name + " " + " ".join(
                    f"{tuple(x.shape)}/{tuple(x.stride())}" for x in args
                    if hasattr(x, "stride") and not isinstance(x, type))
                acc[key] += dt
                calls[key] += 1
            return r
        return w

    orig_load = G.load

    def load(art, gm):
        cg = orig_load(art, gm)
        if cg is None:
            return cg
        env = cg.fn.__globals__
        for s in art.sources:
            srcs[G._kname(s)] = s
        for k in list(env):
            if k.startswith("kernel_"):
                env[k] = timed(k, env[k])
            elif k.endswith("_op") and k in art.externs:
                env[k] = timed("extern " + getattr(env[k], "qualname", str(env[k])), env[k])
        if a.dump:
            os.makedirs(a.dump, exist_ok=True)
            n = len(os.listdir(a.dump))
            with open(os.path.join(a.dump, f"graph{n}.py"), "w") as f:
                f.write(art.wrapper + "\n'''\n" + "".join(art.sources) + "\n'''\n")
        return cg
    import ember._inductor.codecache as CC
    CC._load = load
    cfg = dict(vocab=65, block=128, n_layer=4, n_head=4, n_embd=128)
    model = torch.compile(workloads.gpt(torch, **cfg))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    idx = torch.randint(0, cfg["vocab"], (16, cfg["block"]))

    def step():
        opt.zero_grad()
        loss = model(idx, idx)
        loss.backward()
        opt.step()
        return loss
    for _ in range(2):
        loss = step()
    on[0] = True
    t0 = clock()
    best: dict = {}
    for _ in range(a.steps):
        before = dict(acc)
        step()
        for k, v in acc.items():
            best[k] = min(best.get(k, float("inf")), v - before.get(k, 0.0))
    total = (clock() - t0) / a.steps * 1e3
    on[0] = False
    if a.min:   # per step: the fastest step of each name, and the sum of those
        acc = collections.defaultdict(float, {k: v * a.steps for k, v in best.items()})
        total = sum(v for k, v in acc.items() if "/" not in k) / a.steps * 1e3
    rows = sorted(acc.items(), key=lambda kv: -kv[1])
    kern = sum(v for k, v in acc.items() if k.startswith("kernel_")) / a.steps * 1e3
    ext = sum(v for k, v in acc.items() if k.startswith("extern") and "/" not in k) / a.steps * 1e3
    print(f"loss {float(loss):.4f}; step {total:.1f} ms: kernels {kern:.1f} ms, "
          f"externs {ext:.1f} ms, rest {total - kern - ext:.1f} ms")
    for k, v in rows[:a.top]:
        ms = v / a.steps * 1e3
        head = ""
        if k in srcs:
            head = srcs[k].splitlines()[0][:110]
        print(f"{ms:8.2f} ms {calls[k] / a.steps:4.0f}x {100 * ms / total:5.1f}%  {k}  {head}")


if __name__ == "__main__":
    main()
