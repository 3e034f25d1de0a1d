"""Time to export the workloads' small GPT (the CPU config of workloads.py: 4 layers, n_embd 128,
block 128, batch 16; static, and with a dynamic batch dim) with ember.export and with
torch.export (PyTorch 2.13), in one run, each in
its own subprocess, the save+load round trip of the archive, and make_fx (symbolic) of the
GPT's train step (loss and gradients in one graph). Prints one JSON line per
implementation and the ratios (ember / torch; < 1 is ember faster).

    python benchmarks/export_bench.py
"""
from __future__ import annotations

import os
import tempfile
import time

import versus

CFG = versus.GPT_CPU


def measure(impl: str) -> dict:
    t = versus.load(impl)
    export = t.export
    t.manual_seed(0)
    model = versus.gpt(t)
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


if __name__ == "__main__":
    versus.main(__file__, measure)
