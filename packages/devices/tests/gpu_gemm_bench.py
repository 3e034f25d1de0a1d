"""Host cost of one cuBLAS call through ember.cuda.blas.gemm, piece by piece (GPU machine):
`python packages/devices/tests/gpu_gemm_bench.py`."""
import time

import ember
from ember.cuda import blas as _blas
from ember.cuda.runtime import driver as rt
from ember.cuda.runtime.streams import current_stream_handle


def per_call(f, n=300):
    for _ in range(20):
        f()
    ember.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        f()
    host = time.perf_counter() - t
    ember.cuda.synchronize()
    return host / n * 1e6, (time.perf_counter() - t) / n * 1e6


def show(label, f, n=300):
    host, tot = per_call(f, n)
    print(f"{label}: host {host:.1f} us, with GPU {tot:.1f} us")


def main():
    a = ember.randn(256, 512, device="cuda")
    b = ember.randn(512, 512, device="cuda")
    out = ember.empty(256, 512, device="cuda")
    cublas, h = _blas._handle(0)
    show("gemm (256x512x512 fp32)", lambda: _blas.gemm(a, b, out))
    from ember.cuda import blaslt as _blaslt
    print("cuBLASLt plans", len(_blaslt._plans), "failed", _blaslt._failed[0])
    key, plan = next(iter(_blaslt._plans.items()))
    lt, hl = _blaslt._lt(), _blaslt._state[0]
    desc, la, lb, lc, res = plan
    ws = next(iter(_blaslt._ws.values()))
    s0 = current_stream_handle(0)
    pa, pb, pc = a.data_ptr(), b.data_ptr(), out.data_ptr()
    show("cublasLtMatmul alone", lambda: lt.matmul(
        hl, desc, _blas._ONE_P[_blas.np.float32], pb, la, pa, lb,
        _blas._ZERO_P[_blas.np.float32], pc, lc, pc, lc, res.ptr, ws.ptr, _blaslt._WS, s0))
    _blas._LT = False
    show("gemm through plain cuBLAS", lambda: _blas.gemm(a, b, out))
    _blas._LT = True
    show("matmul op", lambda: a @ b)
    show("set_stream", lambda: cublas.set_stream(h, 0))
    show("ensure_context", lambda: rt.ensure_context(0))
    show("stream handle", lambda: current_stream_handle(0))
    orig = cublas.set_stream
    cublas.set_stream = lambda *a: None
    show("gemm without set_stream", lambda: _blas.gemm(a, b, out))
    cublas.set_stream = orig
    ws = ember.empty(32 << 20, dtype=ember.uint8, device="cuda")
    cublas.set_stream(h, 0)
    cublas.set_workspace(h, ws.data_ptr(), 32 << 20)
    cublas.set_stream = lambda *a: None
    show("gemm with our workspace", lambda: _blas.gemm(a, b, out))
    cublas.set_stream = orig
    x = ember.randn(8192, 768, device="cuda", dtype=ember.bfloat16)
    w = ember.randn(3072, 768, device="cuda", dtype=ember.bfloat16)
    o = ember.empty(8192, 3072, device="cuda", dtype=ember.bfloat16)
    host, tot = per_call(lambda: _blas.gemm(x, w.t(), o), 50)
    print(f"gemm 8192x768x3072 bf16 (workspace set): {tot:.1f} us = "
          f"{2 * 8192 * 768 * 3072 / tot / 1e6:.0f} TFLOP/s")
    cublas.set_stream(h, 0)  # back to the default workspace pool
    cublas.set_stream = lambda *a: None
    host, tot = per_call(lambda: _blas.gemm(x, w.t(), o), 50)
    cublas.set_stream = orig
    print(f"gemm 8192x768x3072 bf16 (default workspace): {tot:.1f} us = "
          f"{2 * 8192 * 768 * 3072 / tot / 1e6:.0f} TFLOP/s")


if __name__ == "__main__":
    main()
