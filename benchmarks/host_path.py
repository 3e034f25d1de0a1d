"""Host cost of ember's eager calls on CPU, native hit path off / on, in one process.

    python benchmarks/host_path.py                # ember: off, grad-in-Python, on (alternated)
    python benchmarks/host_path.py --impl torch   # the same loops on PyTorch

Each figure is the calling thread's CPU time (`time.thread_time`: a loaded shared machine steals
wall time, not this), the median of 7 runs of a loop, per call in microseconds; the train steps
in milliseconds. ember's settings alternate (`ember._native.set_enabled` / `set_native_grad` /
`set_native_views`: "views in Python" is the hit path before session 6, with views, in-place
ops and factories through Python's `call`) so all see the same machine; the minimum over two
rounds is printed.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def loops(torch):
    """name -> (fn, figure per second of fn(): 1e6 / calls for per-call us, 1e3 for a step's ms)"""
    import workloads
    n = 1000
    x, xg = torch.ones(16), torch.ones(16, requires_grad=True)
    a, w = torch.randn(8, 16), torch.randn(16, 16)
    ag = torch.randn(8, 16, requires_grad=True)
    wp = torch.nn.Parameter(torch.randn(16, 16))
    b, o = torch.zeros(8, 16), torch.ones(8, 16)

    def rep(f):
        def run():
            for _ in range(n):
                f()
        return run, 1e6 / n

    def chain(t):
        def run():
            y = t
            for _ in range(n):
                y = y + t
        return run, 1e6 / n

    nn = torch.nn
    mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                        nn.Linear(512, 10))
    opt = torch.optim.AdamW(mlp.parameters(), lr=1e-3)
    xb, yb = torch.randn(256, 784), torch.randint(0, 10, (256,))

    def mlp_step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(mlp(xb), yb).backward()
        opt.step()

    cfg = dict(vocab=65, block=128, n_layer=4, n_head=4, n_embd=128)
    gpt = workloads.gpt(torch, **cfg)
    gopt = torch.optim.AdamW(gpt.parameters(), lr=3e-4)
    idx = torch.randint(0, 65, (16, 128))

    def gpt_step():
        gopt.zero_grad()
        gpt(idx, idx).backward()
        gopt.step()

    return {
        "y = y + x (op_overhead)": chain(x),
        "y = y + xg (op_overhead_grad)": chain(xg),
        "xg * xg": rep(lambda: xg * xg),
        "a.sum(1)": rep(lambda: a.sum(1)),
        "ag.sum(1) (grad)": rep(lambda: ag.sum(1)),
        "a @ w": rep(lambda: a @ w),
        "ag @ w (grad)": rep(lambda: ag @ w),
        "a @ Parameter": rep(lambda: a @ wp),
        "softmax(ag, -1) (grad)": rep(lambda: torch.softmax(ag, -1)),
        "a.t() (view)": rep(lambda: a.t()),
        "ag.t() (view, grad)": rep(lambda: ag.t()),
        "a.view(16, 8)": rep(lambda: a.view(16, 8)),
        "a.reshape(-1)": rep(lambda: a.reshape(-1)),
        "a.transpose(0, 1)": rep(lambda: a.transpose(0, 1)),
        "a[1:, 2]": rep(lambda: a[1:, 2]),
        "a.detach()": rep(lambda: a.detach()),
        "b.add_(1) (in-place)": rep(lambda: b.add_(1)),
        "b.mul_(o) (in-place)": rep(lambda: b.mul_(o)),
        "b.zero_()": rep(lambda: b.zero_()),
        "zeros(8, 16)": rep(lambda: torch.zeros(8, 16)),
        "MLP train step (ms)": (mlp_step, 1e3),
        "GPT train step (ms)": (gpt_step, 1e3),
    }


def median_time(fn, scale):
    fn()
    ts = []
    for _ in range(7 if scale > 1e3 else 3):  # (train steps: 3 runs)
        t0 = time.thread_time()
        fn()
        ts.append(time.thread_time() - t0)
    ts.sort()
    return ts[len(ts) // 2] * scale


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", default="ember")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    torch = importlib.import_module(args.impl)
    sys.modules["torch"] = torch
    torch.manual_seed(0)
    cases = {k: v for k, v in loops(torch).items() if not args.only or args.only in k}
    if args.impl == "torch":
        for name, (fn, per) in cases.items():
            print(f"{name:34} {median_time(fn, per):9.2f}")
        return
    from ember import _native
    settings = (("off", False, False, True), ("grad in Python", True, False, True),
                ("views in Python", True, True, False), ("on", True, True, True))
    print(f"load average {os.getloadavg()[0]:.1f}; native module: {_native.enabled()}")
    print(f"{'':34} " + " ".join(f"{s[0]:>14}" for s in settings))
    for name, (fn, per) in cases.items():
        best = {}
        for _ in range(2):
            for label, on, grad, views in settings:
                _native.set_enabled(on)
                _native.set_native_grad(grad)
                _native.set_native_views(views)
                v = median_time(fn, per)
                best[label] = min(best.get(label, v), v)
        _native.set_enabled(True)
        _native.set_native_grad(True)
        _native.set_native_views(True)
        print(f"{name:34} " + " ".join(f"{best[s[0]]:14.2f}" for s in settings))


if __name__ == "__main__":
    main()
