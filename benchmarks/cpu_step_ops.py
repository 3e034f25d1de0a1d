"""Single CPU ops of the workloads' train steps, one thread, thread CPU time (ms, median of 15):
the masked softmax forward / forward+backward, a masked select, relu and embedding forward+
backward, split's forward+backward. Run once per implementation, alternating:

    python benchmarks/cpu_step_ops.py torch
    python benchmarks/cpu_step_ops.py ember
"""
import importlib
import sys
import time


def tm(f, n=15):
    for _ in range(3):
        f()
    ts = []
    for _ in range(n):
        t0 = time.thread_time()
        f()
        ts.append(time.thread_time() - t0)
    ts.sort()
    return ts[len(ts) // 2] * 1e3


def main():
    impl = sys.argv[1] if len(sys.argv) > 1 else "ember"
    torch = importlib.import_module(impl)
    torch.set_num_threads(1)
    F = torch.nn.functional
    mask = torch.tril(torch.ones(128, 128)) == 0
    att = torch.randn(16, 4, 128, 128).masked_fill(mask, float("-inf"))
    ga = torch.randn(16, 4, 128, 128)
    attr = att.clone().requires_grad_(True)
    x, g = torch.randn(64, 64, 24, 24), torch.randn(64, 64, 24, 24)
    m, xr = x > 0, x.clone().requires_grad_(True)
    qkv, gq = torch.randn(16, 128, 384, requires_grad=True), torch.randn(16, 128, 128)
    idx, ge = torch.randint(0, 65, (16, 128)), torch.randn(16, 128, 128)
    w = torch.randn(65, 128, requires_grad=True)

    def backward(loss_fn, *leaves):
        def run():
            loss_fn()
            for t in leaves:
                t.grad = None
        return run

    def split():
        q, k, v = qkv.split(128, dim=2)
        (q * gq + k * gq + v * gq).sum().backward()

    r = {"softmax_causal_fwd": tm(lambda: F.softmax(att, -1)),
         "softmax_causal_fwd_bwd": tm(backward(lambda: F.softmax(attr, -1).backward(ga), attr)),
         "where_mask": tm(lambda: torch.where(m, g, 0.0)),
         "relu_fwd_bwd": tm(backward(lambda: xr.relu().backward(g), xr)),
         "split3_fwd_bwd": tm(backward(split, qkv)),
         "embedding_fwd_bwd": tm(backward(lambda: F.embedding(idx, w).backward(ge), w))}
    print(impl, " ".join(f"{k}={v:.2f}" for k, v in r.items()), flush=True)


if __name__ == "__main__":
    main()
