"""How many Triton kernels the GPT-2 124M train step compiles, and how long Triton takes to
compile them for sm_90, on a machine without a GPU: the step's graphs generated on the fake
device without launches, each distinct launch (kernel, dtypes, constexprs, num_warps) compiled
with triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32)).
    EMBER_FX_GRAPH_CACHE=0 EMBER_CUDA_FAKE=nolaunch \
        python benchmarks/inductor_triton_compile.py 12 2 [compile]
(arguments: layers, batch; `compile` also runs the sm_90 compiles, one after another)."""
import sys
import time

sys.path.insert(0, "benchmarks")
import workloads  # noqa: E402

import ember  # noqa: E402
from ember._inductor import graph as G  # noqa: E402

TY = {"bfloat16": "bf16", "float32": "fp32", "float16": "fp16", "float64": "fp64",
      "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1"}
seen: dict = {}
_launch = G._launch_triton


def _record(fn, grid, bufs, ints, xblock, rblock, opts=None):
    key = (fn.__name__, tuple(str(t.dtype) for t in bufs), xblock, rblock,
           tuple(sorted((opts or {}).items())))
    seen.setdefault(key, (fn, [str(t.dtype) for t in bufs], list(ints), xblock, rblock,
                          dict(opts or {})))
    return _launch(fn, grid, bufs, ints, xblock, rblock, opts)


def first_step(n_layer, batch) -> float:
    cfg = dict(vocab=50304, block=1024, n_layer=n_layer, n_head=12, n_embd=768)
    model = workloads.gpt(ember, **cfg).to("cuda").to(ember.bfloat16)
    opt = ember.optim.AdamW(model.parameters(), lr=3e-4)
    idx = ember.randint(0, cfg["vocab"], (batch, cfg["block"]), device="cuda")
    m = ember.compile(model)
    t0 = time.process_time()
    opt.zero_grad()
    m(idx, idx).backward()
    opt.step()
    return time.process_time() - t0


def compile_one(fn, dtypes, ints, xblock, rblock, opts) -> float:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    const, opts = {"XBLOCK": xblock, "RBLOCK": rblock}, dict(opts)
    options = {"num_warps": opts.pop("num_warps", 4), "num_stages": opts.pop("num_stages", 3)}
    const.update(opts)
    sig, dts, vals = {}, iter(dtypes), iter(ints)
    for a in fn.arg_names:
        if a in const:
            sig[a] = "constexpr"
        elif a[0] == "p" and a[1:].isdigit():
            sig[a] = "*" + TY[next(dts).split(".")[-1]]
        else:
            sig[a] = "i32" if abs(next(vals)) < 2 ** 31 else "i64"
    t = time.perf_counter()
    triton.compile(ASTSource(fn, sig, const), target=GPUTarget("cuda", 90, 32), options=options)
    return time.perf_counter() - t


def main():
    n_layer, batch = int(sys.argv[1]), int(sys.argv[2])
    G._launch_triton = _record
    host = first_step(n_layer, batch)
    names = {k[0] for k in seen}
    print(f"layers {n_layer} batch {batch}: {len(names)} distinct kernel texts, {len(seen)} "
          f"distinct launches; first step without Triton compiles {host:.1f} s CPU", flush=True)
    if "compile" in sys.argv[3:]:
        total = sum(compile_one(*v) for v in seen.values())
        print(f"compiled {len(seen)} kernels for sm_90 in {total:.1f} s wall "
              f"({total / max(len(seen), 1):.2f} s each)")


if __name__ == "__main__":
    main()
