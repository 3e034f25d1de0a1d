"""Host cost of ember's eager CUDA calls, measured on a CPU machine: the fake device with no
launches (EMBER_CUDA_FAKE=nolaunch: memory is host memory, kernels and GEMMs are skipped), so
what is timed is the host path alone (dispatch, plans, allocation, autograd nodes).

    EMBER_CUDA_FAKE=nolaunch python benchmarks/cuda_host_path.py

Each figure is the calling thread's CPU time (`time.thread_time`), the median of 7 runs of a
loop: per call in microseconds, the train steps (workloads.py's small shapes) in milliseconds.
The native path is switched off (EMBER_NATIVE's run-time switch) and on, alternated, and the
minimum over two rounds is printed; also the share of a step's slot calls left to Python.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def loops(torch):
    """name -> (fn, scale): scale turns seconds of fn() into us per call or ms per step."""
    import workloads
    nn, F = torch.nn, torch.nn.functional
    n = 300
    dev = "cuda"
    x, w = torch.randn(64, 128, device=dev), torch.randn(256, 128, device=dev)
    xg = torch.randn(64, 128, device=dev, requires_grad=True)
    lab = torch.randint(0, 128, (64,), device=dev)

    def rep(f):
        def run():
            for _ in range(n):
                f()
        return run, 1e6 / n
    out = {
        "matmul_us": rep(lambda: x @ w.t()),
        "sum_dim_us": rep(lambda: x.sum(0)),
        "softmax_us": rep(lambda: F.softmax(x, -1)),
        "cross_entropy_us": rep(lambda: F.cross_entropy(x, lab)),
        "mul_grad_us": rep(lambda: xg * 2.0),
        "matmul_grad_us": rep(lambda: xg @ w.t()),
    }

    def train(model, opt, batch):
        def step():
            opt.zero_grad()
            loss = F.cross_entropy(model(batch[0]), batch[1])
            loss.backward()
            opt.step()
        return step, 1e3
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                        nn.Linear(512, 10)).to(dev)
    out["mlp_train_ms"] = train(mlp, torch.optim.AdamW(mlp.parameters(), lr=1e-3),
                                (torch.randn(256, 784, device=dev),
                                 torch.randint(0, 10, (256,), device=dev)))
    cnn = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(),
                        nn.Linear(128, 10)).to(dev)
    out["cnn_train_ms"] = train(cnn, torch.optim.SGD(cnn.parameters(), lr=0.01, momentum=0.9),
                                (torch.randn(64, 1, 28, 28, device=dev),
                                 torch.randint(0, 10, (64,), device=dev)))
    cfg = dict(vocab=65, block=128, n_layer=4, n_head=4, n_embd=128)
    gpt = workloads.gpt(torch, **cfg).to(dev)
    gopt = torch.optim.AdamW(gpt.parameters(), lr=3e-4)
    idx = torch.randint(0, cfg["vocab"], (16, cfg["block"]), device=dev)

    def gstep():
        gopt.zero_grad()
        gpt(idx, idx).backward()
        gopt.step()
    out["gpt_train_ms"] = (gstep, 1e3)
    return out


def measure(fn, scale, reps=7):
    fn()
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.thread_time()
        fn()
        ts.append(time.thread_time() - t0)
    return statistics.median(ts) * scale


def main():
    if os.environ.get("EMBER_CUDA_FAKE") != "nolaunch":
        sys.exit("run with EMBER_CUDA_FAKE=nolaunch (host cost only)")
    import ember as torch
    from ember import _native
    sys.modules["torch"] = torch
    fns = loops(torch)
    best = {}
    for _ in range(2):
        for on in (False, True):
            _native.set_enabled(on)
            for name, (fn, scale) in fns.items():
                k = (name, on)
                best[k] = min(best.get(k, 1e18), measure(fn, scale))
    _native.set_enabled(True)
    print(f"load average {os.getloadavg()[0]:.1f}; device plan stats {_native.device_stats()}")
    print(f"{'figure':22s} {'python':>10s} {'native':>10s} {'ratio':>7s}")
    for name in fns:
        p, n = best[(name, False)], best[(name, True)]
        print(f"{name:22s} {p:10.1f} {n:10.1f} {n / p:7.2f}")


if __name__ == "__main__":
    main()
