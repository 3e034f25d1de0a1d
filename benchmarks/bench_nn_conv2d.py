"""Informal benchmark: conv2d forward+backward (N=16, C=16, 32x32, 3x3, 32 out), ember vs torch.

    PYTHONPATH=packages/core/src:packages/autograd/src python benchmarks/bench_nn_conv2d.py
"""
import time

import numpy as np

import ember


def bench(mod, x, w, b, reps=20):
    X = mod.tensor(x, requires_grad=True)
    W = mod.tensor(w, requires_grad=True)
    B = mod.tensor(b, requires_grad=True)

    def step():
        y = mod.nn.functional.conv2d(X, W, B, padding=1)
        y.backward(mod.ones(tuple(y.shape)))
    step()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        ts.append(time.perf_counter() - t0)
    return np.median(ts) * 1e3


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 16, 32, 32)).astype("float32")
    w = rng.standard_normal((32, 16, 3, 3)).astype("float32")
    b = np.zeros(32, "float32")
    print(f"ember  fwd+bwd: {bench(ember, x, w, b):7.2f} ms")
    try:
        import torch
    except ImportError:
        return
    for n in (1, torch.get_num_threads()):
        torch.set_num_threads(n)
        print(f"torch  fwd+bwd: {bench(torch, x, w, b):7.2f} ms ({n} threads)")


if __name__ == "__main__":
    main()
