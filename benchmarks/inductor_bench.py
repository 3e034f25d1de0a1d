"""ember eager vs ember compiled (backend="inductor") vs PyTorch eager vs torch.compile, on CPU:
a pointwise chain, softmax, layer_norm, an MLP train step and a small GPT train step (the
model of /work/shared/bench/workloads.py, copied in `gpt` below). One run; medians of a few
repetitions; ratios are ember-compiled / torch.compile (time: above 1 means ember is slower).

    python benchmarks/inductor_bench.py [--only chain,softmax,...] [--skip-torch-compile]
"""
import argparse
import importlib
import json
import math
import os
import sys
import time


def timeit(fn, reps=7, budget=10.0):
    fn()
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < reps and time.perf_counter() - start < budget:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def gpt(t, vocab, block, n_layer, n_head, n_embd):
    nn, F = t.nn, t.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
            self.qkv, self.proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
            self.fc, self.out = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(n_embd, dim=2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = t.tril(t.ones(T, T)) == 0
            att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, n_embd), nn.Embedding(block, n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln, self.head = nn.LayerNorm(n_embd), nn.Linear(n_embd, vocab, bias=False)

        def forward(self, idx, targets):
            T = idx.shape[1]
            x = self.tok(idx) + self.pos(t.arange(T))
            for b in self.blocks:
                x = b(x)
            logits = self.head(self.ln(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
    return GPT()


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

    model = gpt(t, vocab=65, block=64, n_layer=2, n_head=4, n_embd=128)
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
