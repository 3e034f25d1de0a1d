"""max-autotune's choice for one GEMM: each Triton template config of `gemm.CONFIGS` and the
extern cuBLASLt matmul run on random operands of the GEMM's sizes, strides and dtype (CUDA
events; wall time on the fake device, where Triton's interpreter runs); the fastest wins.
Choices are kept in memory and on disk (`<cache>/autotune/<key>.json` beside the FX-graph
cache, keyed by the GEMM, the device, Triton's version and the float32 matmul precision;
EMBER_AUTOTUNE_CACHE=0 turns the disk half off), so a second process, or a second graph with
the same GEMM, benchmarks nothing; the FX-graph cache then holds the compiled graph with the
chosen kernels.

`FORCE` ("triton": the first config, "extern") skips the benchmark (tests on the fake device,
where the interpreter's timings mean nothing); `configs` limits the candidates.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import time

__all__ = ["select", "FORCE", "configs", "stats"]

log = logging.getLogger("ember._inductor")
FORCE = None                 # None (benchmark), "triton" or "extern"
configs = None               # None: gemm.CONFIGS
stats = {"selected": 0, "benchmarked": 0, "hit_memory": 0, "hit_disk": 0}
_memory: dict = {}
_REPS = 10


def select(g, spec, dtype):
    """The config tuple of the fastest template, or None where the extern call is faster.
    A symbolic lowering (dynamic sizes: run twice with other size values) shares its choices
    by GEMM order (`g.gemm_choices`), so both runs make the same kernels."""
    shared = getattr(g, "gemm_choices", None)
    if shared is not None:
        i = g.n_gemms = getattr(g, "n_gemms", 0) + 1
        if i not in shared:
            shared[i] = _select(g, spec, dtype)
        return shared[i]
    return _select(g, spec, dtype)


def _select(g, spec, dtype):
    from .gemm import CONFIGS
    cands = list(configs or CONFIGS)
    stats["selected"] += 1
    if FORCE is not None:
        return cands[0] if FORCE == "triton" else None
    key = _key(g, spec, dtype, cands)
    if key in _memory:
        stats["hit_memory"] += 1
        return _memory[key]
    path = _path(key)
    if path is not None and os.path.exists(path):
        try:
            with open(path) as f:
                choice = json.load(f)["choice"]
            choice = tuple(choice) if choice is not None else None
            if choice is None or choice in cands:
                stats["hit_disk"] += 1
                _memory[key] = choice
                return choice
        except (OSError, ValueError, KeyError, TypeError):
            pass
    times = _benchmark(g, spec, dtype, cands)
    choice = min(times, key=times.get)
    stats["benchmarked"] += 1
    from ember._dynamo import _logs
    _logs.emit("output_code", "# autotune " + str(spec.key(g.sv)) + ": " + ", ".join(
        f"{'extern' if c is None else f'triton{c}'} {t * 1e3:.3f} ms"
        for c, t in sorted(times.items(), key=lambda kv: kv[1])))
    _memory[key] = choice
    if path is not None:
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump({"choice": choice, "times": {str(k): v for k, v in times.items()}},
                          f)
            os.replace(tmp, path)
        except OSError:
            pass
    return choice


def _key(g, spec, dtype, cands) -> str:
    from importlib.metadata import version

    import ember
    from ember.cuda.runtime import driver as rt
    dev = "fake" if rt.FAKE else ember.cuda.get_device_name()
    parts = (spec.key(g.sv), str(dtype), dev, version("triton"),
             ember.get_float32_matmul_precision(), tuple(cands))
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:40]


def _path(key):
    if os.environ.get("EMBER_AUTOTUNE_CACHE", "1") == "0":
        return None
    from ember._ops import _kcache
    base = _kcache.cache_dir()
    if base is None:
        return None
    d = os.path.join(base, "autotune")
    os.makedirs(d, mode=0o700, exist_ok=True)
    return os.path.join(d, key + ".json") if _kcache.trusted(d) else None


# ---- benchmarking ----------------------------------------------------------------------------
def _operand(tb, sv, dtype):
    """A random tensor laid out as TBox tb (a flat buffer of its extent, viewed strided)."""
    import ember
    h = sv.hint
    shape = [h(s) for s in tb.shape]
    stride = [h(s) for s in tb.stride]
    off = h(tb.offset)
    extent = 1 + off + sum((n - 1) * s for n, s in zip(shape, stride))
    flat = ember.randn(extent, device="cuda").to(dtype)
    return flat, flat.as_strided(shape, stride, off)


def _benchmark(g, spec, dtype, cands) -> dict:
    """{config or None (extern): seconds per run}."""
    import ember
    from ember._ops.registry import OPS

    from .gemm import TemplateBuffer
    from .graph import _launch_triton, _triton_kernels
    from .scheduler import Kernel
    from .triton import generate
    sv = g.sv
    fa, va = _operand(spec.a, sv, dtype)
    fb, vb = _operand(spec.b, sv, dtype)
    out = ember.empty(sv.numel(spec.out_shape), dtype=dtype, device="cuda")
    times = {}
    for cfg in cands:
        tb = TemplateBuffer("bench_out", spec, dtype, cfg)
        k = Kernel("bench", tb.ranges, ())
        k.phases, k.where, k.template = [("outer", [tb])], {tb.name: (0, "outer")}, tb
        src, args, syms, _ = generate(k, {tb.name}, "bench_gemm", sv)
        fn = _triton_kernels([src])["bench_gemm"]
        bufs = [{spec.a.buf.name: fa, spec.b.buf.name: fb, tb.name: out}[b.name] for b in args]
        ints = [sv.values[y] for y in syms] + [sv.numel(spec.out_shape), 1]
        grid, opts = launch_shape(spec, cfg, sv.hint)
        times[cfg] = _time(lambda f=fn, gr=grid, bs=bufs, i=ints, o=opts:
                           _launch_triton(f, gr, bs, i, 1, 1, o))
    matmul = OPS["matmul"]
    times[None] = _time(lambda: matmul(va, vb))
    return times


def launch_shape(spec, cfg, value):
    """(grid, launch options) of a template kernel; value(expr) gives sizes (ints or source)."""
    bm, bn, _, warps, stages = cfg
    m, n = value(spec.M), value(spec.N)
    if isinstance(m, int):
        grid = (-(-m // bm) * -(-n // bn), value(spec.out_shape[0]) if spec.nb else 1)
    else:
        grid = f"(-(-({m}) // {bm}) * -(-({n}) // {bn}), " + \
            (f"{value(spec.out_shape[0])})" if spec.nb else "1)")
    return grid, {"num_warps": warps, "num_stages": stages}


def _time(fn) -> float:
    import ember
    from ember.cuda.runtime import driver as rt
    fn()   # compiles
    if rt.FAKE:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(_REPS):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / _REPS
