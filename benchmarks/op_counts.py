"""Op calls per train step that still reach Python: dispatch's `call` / autograd's `record`.

    python benchmarks/op_counts.py                    # the workloads' small GPT and MLP steps
    python benchmarks/op_counts.py --device cuda      # (EMBER_CUDA_FAKE=nolaunch: host only)
    python benchmarks/op_counts.py --python-views     # views etc. through Python, as before

A profile hook counts the frames of `ember._dispatch.call` and `ember.autograd._engine.record`
(every op call the native hit path, ember._C, does not finish ends in one of them) by op name,
over the second step (the first builds plans); with the native module's hit counters beside.
A call autograd records in Python counts twice (its `call`, then its `record`).
"""
from __future__ import annotations

import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def steps(torch, device):
    import workloads
    nn = torch.nn
    mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                        nn.Linear(512, 10)).to(device)
    opt = torch.optim.AdamW(mlp.parameters(), lr=1e-3)
    xb, yb = torch.randn(256, 784, device=device), torch.randint(0, 10, (256,), device=device)

    def mlp_step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(mlp(xb), yb).backward()
        opt.step()

    gpt = workloads.gpt(torch, vocab=65, block=128, n_layer=4, n_head=4, n_embd=128).to(device)
    gopt = torch.optim.AdamW(gpt.parameters(), lr=3e-4)
    idx = torch.randint(0, 65, (16, 128), device=device)

    def gpt_step():
        gopt.zero_grad()
        gpt(idx, idx).backward()
        gopt.step()

    return {"GPT": gpt_step, "MLP": mlp_step}


def count(fn):
    from ember import _dispatch
    from ember.autograd import _engine
    codes = {_dispatch.call.__code__: "call", _engine.record.__code__: "record"}
    seen = collections.Counter()

    def prof(frame, event, arg):
        if event == "call":
            where = codes.get(frame.f_code)
            if where is not None:
                seen[where, frame.f_locals["op"].name] += 1

    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen


def alternate(fn, n):
    """Median thread CPU time of fn (ms), views etc. in Python vs native, alternated."""
    import time

    from ember import _native
    ts = {"views in Python": [], "views native": []}
    for _ in range(n):
        for label, on in (("views in Python", False), ("views native", True)):
            _native.set_native_views(on)
            t0 = time.thread_time()
            fn()
            ts[label].append((time.thread_time() - t0) * 1e3)
    return {k: sorted(v)[len(v) // 2] for k, v in ts.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--time", type=int, default=0,
                    help="also time N steps per setting (thread CPU time, views native vs not, "
                         "alternated, median)")
    ap.add_argument("--python-views", action="store_true",
                    help="views, in-place ops and factories through Python (before session 6)")
    args = ap.parse_args()
    import ember as torch
    sys.modules["torch"] = torch
    from ember import _native
    _native.set_native_views(not args.python_views)
    torch.manual_seed(0)
    print(f"native module: {_native.enabled()}; device {args.device}")
    for name, fn in steps(torch, args.device).items():
        fn()
        h0, g0, v0 = _native.stats(), _native.grad_stats(), _native.view_stats()
        m0 = _native.mut_stats()
        seen = count(fn)
        h1, g1, v1 = _native.stats(), _native.grad_stats(), _native.view_stats()
        m1 = _native.mut_stats()
        by_where = collections.Counter()
        by_op = collections.Counter()
        for (where, op), n in seen.items():
            by_where[where] += n
            by_op[op] += n
        hits = None if h0 is None else h1[0] - h0[0]
        nodes = None if g0 is None else g1 - g0
        views = None if v0 is None else (v1[0] - v0[0], v1[1] - v0[1])
        muts = None if m0 is None else m1 - m0
        print(f"{name} step: {sum(seen.values())} frames in Python ({dict(by_where)}); "
              f"native hits {hits}, native nodes {nodes}, native views (made, recorded) {views}, "
              f"native in-place/factory calls {muts}")
        print("   " + ", ".join(f"{op} {n}" for op, n in by_op.most_common(args.top)))
        if args.time:
            print(f"   step ms (thread CPU time, median of {args.time}, alternated): "
                  + ", ".join(f"{k} {v:.2f}" for k, v in alternate(fn, args.time).items()))
        _native.set_native_views(not args.python_views)


if __name__ == "__main__":
    main()
