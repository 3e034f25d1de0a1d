"""A linear layer's block `gelu(x @ w.T + b) + r` on the GPU: eager, compiled (the extern
cuBLASLt GEMM, then bias + GELU + residual in one Triton kernel) and compiled with
mode="max-autotune-no-cudagraphs" (Triton GEMM templates with that epilogue inside, when the
benchmark picks one). Prints ms per call and the autotune timings (EMBER_LOGS=output_code
shows them as they are taken): `python packages/devices/tests/gpu_inductor_gemm_bench.py`
(`--small` on the fake device: sizes for Triton's interpreter). Needs ember-compiler."""
import sys
import time

import ember
import ember._dynamo
import ember.nn.functional as F


def per_call_ms(f, n):
    f()
    ember.cuda.synchronize()
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    t = time.perf_counter()
    start.record()
    for _ in range(n):
        f()
    end.record()
    end.synchronize()
    if ember.cuda.get_device_name().startswith("ember fake"):
        return (time.perf_counter() - t) / n * 1e3
    return start.elapsed_time(end) / n


def block(x, w, b, r):
    return F.gelu(F.linear(x, w, b)) + r


def one(dt, m, k, nn, n):
    """Times (ms) of the three ways for one size and dtype, printed."""
    from ember._inductor import autotune
    x, r = ember.randn(m, k, device="cuda").to(dt), ember.randn(m, nn, device="cuda").to(dt)
    w, b = ember.randn(nn, k, device="cuda").to(dt), ember.randn(nn, device="cuda").to(dt)
    args = (x, w, b, r)
    ember._dynamo.reset()
    times = {"eager": per_call_ms(lambda: block(*args), n)}
    with ember.no_grad():
        f = ember.compile(block)
        times["compiled"] = per_call_ms(lambda: f(*args), n)
        ember._dynamo.reset()
        before = autotune.stats["benchmarked"]
        fa = ember.compile(block, mode="max-autotune-no-cudagraphs")
        times["max-autotune"] = per_call_ms(lambda: fa(*args), n)
        diff = (fa(*args).float() - block(*args).float()).abs().max().item()
    print(f"{str(dt):15} M={m} K={k} N={nn}: " +
          ", ".join(f"{name} {t:.3f} ms" for name, t in times.items()) +
          f" (benchmarks {autotune.stats['benchmarked'] - before}, max |diff| {diff:.3g})")


def main():
    small = "--small" in sys.argv
    sizes = [(64, 32, 48)] if small else [(8192, 4096, 4096), (4096, 1024, 4096),
                                          (1024, 768, 3072)]
    dtypes = [ember.float32] if small else [ember.bfloat16, ember.float32]
    for dt in dtypes:
        for m, k, nn in sizes:
            one(dt, m, k, nn, 2 if small else 20)


if __name__ == "__main__":
    main()
