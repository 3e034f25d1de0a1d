"""Time to export the workloads' small GPT (the CPU config of workloads.py: 4 layers, n_embd 128,
block 128, batch 16; static, and with a dynamic batch dim) with ember.export and with
torch.export (PyTorch 2.13), in one run, each in
its own subprocess, the save+load round trip of the archive, and make_fx (symbolic) of the
GPT's train step (loss and gradients in one graph). Prints one JSON line per
implementation and the ratios (ember / torch; < 1 is ember faster).

    python benchmarks/export_bench.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CFG = dict(vocab=65, block=128, n_layer=4, n_head=4, n_embd=128)


def measure(impl: str) -> dict:
    sys.path.insert(0, HERE)
    import workloads
    t = workloads.load(impl)
    export = t.export
    t.manual_seed(0)
    model = workloads.gpt(t, **CFG)
    idx = t.randint(0, CFG["vocab"], (16, CFG["block"]))
    out = {"impl": impl}
    for label in ("export_first_s", "export_again_s"):
        t0 = time.perf_counter()
        ep = export.export(model, (idx, idx))
        out[label] = time.perf_counter() - t0
    batch = export.Dim("batch", min=2, max=64)
    t0 = time.perf_counter()
    dyn = export.export(model, (idx, idx), dynamic_shapes=({0: batch}, {0: batch}))
    out["export_dynamic_batch_s"] = time.perf_counter() - t0
    small = t.randint(0, CFG["vocab"], (3, CFG["block"]))
    out["dynamic_matches_eager"] = abs(float(dyn.module()(small, small)) -
                                       float(model(small, small))) < 1e-4
    path = os.path.join(tempfile.mkdtemp(), "gpt.pt2")
    t0 = time.perf_counter()
    export.save(ep, path)
    back = export.load(path)
    out["save_load_s"] = time.perf_counter() - t0
    loss = back.module()(idx, idx)
    want = model(idx, idx)
    out["loss_matches_eager"] = abs(float(loss) - float(want)) < 1e-4
    out.update(measure_train_step(t, model, idx, small))
    return out


def measure_train_step(t, model, idx, small) -> dict:
    """make_fx(tracing_mode="symbolic") of the train step (loss and the parameters'
    gradients in one graph), then that graph on another batch size against eager."""
    import importlib
    make_fx = importlib.import_module(f"{t.__name__}.fx.experimental.proxy_tensor").make_fx
    params = list(model.parameters())

    def step(a, b):
        loss = model(a, b)
        return [loss, *t.autograd.grad(loss, params)]
    t0 = time.perf_counter()
    gm = make_fx(step, tracing_mode="symbolic", _allow_non_fake_inputs=True)(idx, idx)
    out = {"make_fx_symbolic_train_step_s": time.perf_counter() - t0}
    got, want = gm(small, small), step(small, small)
    out["train_step_graph_matches_eager"] = all(
        float((g - w).abs().max()) < 1e-4 for g, w in zip(got, want))
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        print(json.dumps(measure(sys.argv[2])))
        return
    env = dict(os.environ)
    src = [os.path.join(ROOT, "packages", p, "src") for p in sorted(os.listdir(
        os.path.join(ROOT, "packages")))]
    env["PYTHONPATH"] = os.pathsep.join(src + [env.get("PYTHONPATH", "")])
    res = {}
    for impl in ("torch", "ember"):
        r = subprocess.run([sys.executable, __file__, "--one", impl], env=env,
                           capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            sys.stderr.write(r.stderr[-3000:])
            sys.exit(1)
        res[impl] = json.loads(r.stdout.strip().splitlines()[-1])
        print(json.dumps(res[impl]))
    for k, v in res["ember"].items():
        if k.endswith("_s"):
            print(f"{k}: ember {v:.3f} s, torch {res['torch'][k]:.3f} s, "
                  f"ratio {v / res['torch'][k]:.2f}x")


if __name__ == "__main__":
    main()
