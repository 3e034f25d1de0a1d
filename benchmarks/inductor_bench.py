"""ember eager vs ember compiled (backend="inductor") vs PyTorch eager vs torch.compile, on CPU:
a pointwise chain, softmax, layer_norm, an MLP train step and a small GPT train step (the
model and timing loop of workloads.py, imported from there). One run; medians of a few
repetitions; ratios are ember-compiled / torch.compile (time: above 1 means ember is slower).
The side-by-side figures of record come from `compare.py --compile`; this script adds the
ember-eager column and the softmax / layer_norm kernels.

    python benchmarks/inductor_bench.py [--only chain,softmax,...] [--skip-torch-compile]
"""
import argparse
import importlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads as _w  # noqa: E402 - the benchmarks folder is not a package


def timeit(fn):
    return _w.timeit(fn, lambda: None, warmup=2, reps=7, budget=10.0)


def workloads(t, compile_fn):
    """name -> (callable, first-call seconds) for one implementation."""
    out = {}
    t.manual_seed(0)
    F = t.nn.functional
    x = t.randn(1 << 22)
    xs = t.randn(4096, 512)
    w, b = t.randn(512), t.randn(512)

    def compiled(name, fn, *args):
        f = compile_fn(fn)
        t0 = time.perf_counter()
        f(*args)
        first = time.perf_counter() - t0
        out[name] = (lambda: f(*args), first)
    compiled("chain_sum", lambda a: ((a * 2 + 1).relu() * a).sum(), x)
    compiled("gelu", lambda a: F.gelu(a), x)
    compiled("softmax", lambda a: F.softmax(a, -1), xs)
    compiled("layer_norm", lambda a: F.layer_norm(a, (512,), w, b), xs)

    nn = t.nn
    mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                        nn.Linear(512, 10))
    xb, yb = t.randn(256, 784), t.randint(0, 10, (256,))
    cm = compile_fn(mlp)

    def mlp_step():
        for p in mlp.parameters():
            p.grad = None
        F.cross_entropy(cm(xb), yb).backward()
    t0 = time.perf_counter()
    mlp_step()
    out["mlp_train"] = (mlp_step, time.perf_counter() - t0)

    model = _w.gpt(t, vocab=65, block=64, n_layer=2, n_head=4, n_embd=128)
    idx = t.randint(0, 65, (8, 64))
    cg = compile_fn(model)

    def gpt_step():
        for p in model.parameters():
            p.grad = None
        cg(idx, idx).backward()
    t0 = time.perf_counter()
    gpt_step()
    out["gpt_train"] = (gpt_step, time.perf_counter() - t0)
    return out


def run(impl, compiled, only):
    t = importlib.import_module(impl)
    if impl == "ember":
        fn = (lambda f: t.compile(f, backend="inductor")) if compiled else (lambda f: f)
    else:
        fn = (lambda f: t.compile(f)) if compiled else (lambda f: f)
    res = {}
    for name, (f, first) in workloads(t, fn).items():
        if only and name not in only:
            continue
        res[name] = {"ms": round(timeit(f) * 1e3, 3), "first_s": round(first, 2)}
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--skip-torch-compile", action="store_true")
    ap.add_argument("--one", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    if a.one:  # one configuration in this process (each gets a fresh process)
        impl, mode = a.one.split(":")
        print(json.dumps(run(impl, mode == "compiled", only)))
        return
    import subprocess
    configs = [("ember", "eager"), ("ember", "compiled"), ("torch", "eager")]
    if not a.skip_torch_compile:
        configs.append(("torch", "compiled"))
    table = {}
    for impl, mode in configs:
        r = subprocess.run([sys.executable, __file__, "--one", f"{impl}:{mode}", "--only",
                            a.only], capture_output=True, text=True, env=os.environ)
        if r.returncode != 0:
            print(r.stderr[-2000:], file=sys.stderr)
            continue
        table[f"{impl}_{mode}"] = json.loads(r.stdout.strip().splitlines()[-1])
    names = list(next(iter(table.values())))
    cols = list(table)
    print("| workload | " + " | ".join(f"{c} ms (first s)" for c in cols) +
          " | compiled/eager (ember) | ember compiled / torch.compile |")
    print("| --- |" + " ---: |" * (len(cols) + 2))
    for n in names:
        cells = [f"{table[c][n]['ms']} ({table[c][n]['first_s']})" for c in cols]
        ec, ee = table.get("ember_compiled", {}).get(n), table.get("ember_eager", {}).get(n)
        tc = table.get("torch_compiled", {}).get(n)
        r1 = f"{ec['ms'] / ee['ms']:.2f}x" if ec and ee else "-"
        r2 = f"{ec['ms'] / tc['ms']:.2f}x" if ec and tc else "-"
        print(f"| {n} | " + " | ".join(cells) + f" | {r1} | {r2} |")


if __name__ == "__main__":
    main()
