"""Attention at the GPT-2 workload's shape on a GPU (B 8, H 12, T 1024, d 64, bf16, causal):
torch's SDPA (flash) and hand-written attention, ember's flash pair (`_fused_attention`) and
ember's hand-written attention (eager: the decomposed path), forward and forward+backward, ms a
call; then ember's forward/backward block configurations swept (kernels/attention.py CONFIG).
    python packages/devices/tests/gpu_sdpa_bench.py [--sweep]
"""
import math
import sys
import time

import torch

import ember
from ember.cuda.kernels import attention as A

B, H, T, E = 8, 12, 1024, 64


def timeit(fn, sync, reps=20):
    for _ in range(3):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps * 1e3


def manual(M, q, k, v):
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    mask = M.tril(M.ones(T, T, device=q.device)) == 0
    return M.nn.functional.softmax(att.masked_fill(mask, float("-inf")), dim=-1) @ v


def cases(M, packed):
    if packed:   # q, k, v as views of one (B, T, 3C) projection, made each call as in a GPT block
        x = M.randn(B, T, 3 * H * E, device="cuda", dtype=M.bfloat16).requires_grad_()

        def qkv():
            return [t.view(B, T, H, E).transpose(1, 2) for t in x.split(H * E, 2)]
        leaves = [x]
    else:
        ts = [M.randn(B, H, T, E, device="cuda", dtype=M.bfloat16).requires_grad_()
              for _ in range(3)]

        def qkv():
            return ts
        leaves = ts
    go = M.randn(B, H, T, E, device="cuda", dtype=M.bfloat16)
    sdpa = M.nn.functional.scaled_dot_product_attention
    return {
        "sdpa": (lambda: sdpa(*qkv(), is_causal=True), leaves, go),
        "manual": (lambda: manual(M, *qkv()), leaves, go),
    }


def run(M, packed, out):
    sync = M.cuda.synchronize
    for name, (f, leaves, go) in cases(M, packed).items():
        with M.no_grad():
            fwd = timeit(f, sync)

        def fb(f=f, leaves=leaves, go=go):
            for t in leaves:
                t.grad = None
            f().backward(go)
        out[(M.__name__, name, packed)] = (fwd, timeit(fb, sync))


def check():
    """ember's flash pair against torch's SDPA on this GPU (same inputs)."""
    import numpy as np
    x = [np.random.default_rng(i).standard_normal((B, H, T, E)).astype("float32")
         for i in range(4)]
    tq, tk, tv = (torch.tensor(a, device="cuda", dtype=torch.bfloat16).requires_grad_()
                  for a in x[:3])
    eq, ek, ev = (ember.tensor(a).cuda().to(ember.bfloat16).requires_grad_() for a in x[:3])
    to = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    eo = ember.nn.functional.scaled_dot_product_attention(eq, ek, ev, is_causal=True)
    to.backward(torch.tensor(x[3], device="cuda", dtype=torch.bfloat16))
    eo.backward(ember.tensor(x[3]).cuda().to(ember.bfloat16))
    for n, a, b in (("out", eo, to), ("dq", eq.grad, tq.grad), ("dk", ek.grad, tk.grad),
                    ("dv", ev.grad, tv.grad)):
        d = np.abs(a.float().cpu().detach().numpy() - b.float().cpu().detach().numpy())
        print(f"check {n}: max abs diff vs torch {d.max():.4f}, mean {d.mean():.6f}")


def main():
    check()
    out = {}
    for packed in (False, True):
        run(torch, packed, out)
        run(ember, packed, out)
    print("impl path packed_qkv fwd_ms fwd+bwd_ms")
    for (impl, name, packed), (f, fb) in out.items():
        print(f"{impl} {name} {packed} {f:.3f} {fb:.3f}")
    print("ember flash calls", A.calls)
    if "--sweep" not in sys.argv:
        return
    base = dict(A.CONFIG)
    trials = {
        "fwd": [(128, 64, 4, 3), (128, 64, 8, 3), (128, 32, 4, 3), (64, 64, 4, 3), (128, 128, 8, 3),
                (128, 64, 4, 4)],
        "dkdv": [(32, 128, 4, 3), (64, 128, 8, 3), (32, 64, 4, 3), (64, 64, 4, 3), (32, 128, 8, 3),
                 (16, 128, 4, 3)],
        "dq": [(128, 32, 4, 3), (64, 32, 4, 3), (128, 64, 8, 3), (64, 64, 4, 3), (128, 32, 8, 3)],
    }
    f, leaves, go = cases(ember, True)["sdpa"]
    for kern, confs in trials.items():
        for c in confs:
            A.CONFIG.clear()
            A.CONFIG.update(base)
            A.CONFIG[(kern, "16")] = c
            try:
                if kern == "fwd":
                    with ember.no_grad():
                        t = timeit(f, ember.cuda.synchronize)
                else:
                    def fb():
                        for x in leaves:
                            x.grad = None
                        f().backward(go)
                    t = timeit(fb, ember.cuda.synchronize)
                print(f"sweep {kern} {c}: {t:.3f} ms", flush=True)
            except Exception as e:  # noqa: BLE001 - a config that does not compile
                print(f"sweep {kern} {c}: failed {type(e).__name__}: {str(e)[:120]}")
    A.CONFIG.clear()
    A.CONFIG.update(base)


if __name__ == "__main__":
    main()
