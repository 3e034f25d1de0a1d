"""Multi-tensor (foreach), fused and capturable optimizer steps on cuda (Adam/AdamW/SGD): equal to
PyTorch's CPU steps over several steps, in a few launches for all parameters, with device step
counters that a CUDA graph of `opt.step()` replays. Scripts run in this process on a GPU and on
the fake device (Triton's interpreter, a subprocess) elsewhere: the same assertions on both."""
import pytest
from cuda_script import run_script

import ember

COMMON = r"""
import numpy as np
import torch
import ember
import ember.cuda.kernels.foreach_optim as FO

calls = []
_orig = FO._launch_update
def _count(be, kind, *a):
    calls.append(kind)
    return _orig(be, kind, *a)
FO._launch_update = _count
# a step that repeats an earlier one's launches (memoized: the same parameters, gradients laid
# out the same) counts once too: its one launch per chunk of parameters, replayed
_orig_rp = FO._replay
def _count_replay(be, kind, *a):
    calls.append(kind)
    return _orig_rp(be, kind, *a)
FO._replay = _count_replay

SHAPES = [(7, 5), (5,), (3, 4), (1500,), (2, 3, 4)]
rng = np.random.default_rng(0)
STEPS = 3
GRADS = [[rng.standard_normal(s).astype("float32") for s in SHAPES] for _ in range(STEPS)]
INIT = [rng.standard_normal(s).astype("float32") for s in SHAPES]

def run(lib, make, dev="cpu", transpose=False, dtype="float32", **kw):
    ps = [lib.tensor(a.astype(dtype)) for a in INIT]
    ps = [(p.to(dev) if dev != "cpu" else p).requires_grad_() for p in ps]
    opt = make(lib, ps, **kw)
    for k in range(STEPS):
        for p, g in zip(ps, GRADS[k]):
            g = lib.tensor(g.astype(dtype))
            if transpose and g.ndim == 2:  # a transposed view, as linear's weight gradient
                g = g.t().contiguous().t()
            p.grad = g.to(dev) if dev != "cpu" else g
        opt.step()
    return [p.detach().cpu().float().numpy() for p in ps], opt

def same(a, b, tol=2e-6):
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol)
"""

CASES = COMMON + r"""
OPTS = {
    "adamw": lambda L, ps, **k: L.optim.AdamW(ps, lr=1e-2, **k),
    "adam_l2_amsgrad_maximize": lambda L, ps, **k: L.optim.Adam(
        ps, lr=1e-2, weight_decay=0.1, amsgrad=True, maximize=True, **k),
    "adamw_amsgrad": lambda L, ps, **k: L.optim.AdamW(ps, lr=3e-2, amsgrad=True, **k),
    "sgd_nesterov_wd": lambda L, ps, **k: L.optim.SGD(
        ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, **k),
    "sgd_plain": lambda L, ps, **k: L.optim.SGD(ps, lr=0.1, **k),
    "sgd_dampening_maximize": lambda L, ps, **k: L.optim.SGD(
        ps, lr=0.1, momentum=0.5, dampening=0.3, maximize=True, **k),
}
for name, make in OPTS.items():
    ref, _ = run(torch, make)
    variants = [{}, {"fused": True}, {"foreach": True}]
    if name.startswith("adam"):
        variants.append({"capturable": True})
    for kw in variants:
        for transpose in ((False, True) if not kw else (False,)):
            calls.clear()
            out, opt = run(ember, make, "cuda", transpose=transpose, **kw)
            same(out, ref)
            kind = "adam" if name.startswith("adam") else "sgd"
            # one launch per step for all five parameters (SGD's first step makes the buffers)
            first = 1 if kind == "sgd" and "momentum" in str(opt.defaults) and \
                opt.defaults["momentum"] else 0
            assert calls == [kind] * (STEPS - first), (name, kw, calls)
    calls.clear()
    out, _ = run(ember, make, "cuda", foreach=False)        # the per-parameter path
    same(out, ref)
    assert calls == [], calls
"""


def test_foreach_fused_capturable_equal_torch_in_one_launch_per_step():
    run_script(CASES, "foreach_optim_cases")


TENSOR_LR = COMMON + r"""
# capturable with the learning rate a device tensor: read on the device (no host read)
ref, _ = run(torch, lambda L, ps: L.optim.AdamW(ps, lr=0.02, weight_decay=0.05))
lr = ember.tensor(0.02, device="cuda")
out, opt = run(ember, lambda L, ps: L.optim.AdamW(ps, lr=lr, weight_decay=0.05,
                                                   capturable=True), "cuda")
same(out, ref)
st = opt.state[opt.param_groups[0]["params"][0]]["step"]
assert st.device.type == "cuda" and st.dtype == ember.float32 and st.item() == STEPS
# SGD with a device lr and fused
ref, _ = run(torch, lambda L, ps: L.optim.SGD(ps, lr=0.05, momentum=0.9))
out, _ = run(ember, lambda L, ps: L.optim.SGD(ps, lr=ember.tensor(0.05, device="cuda"),
                                               momentum=0.9, fused=True), "cuda")
same(out, ref)
# a tensor lr without capturable: foreach is not chosen by default (as PyTorch); same values
calls.clear()
out, _ = run(ember, lambda L, ps: L.optim.Adam(ps, lr=ember.tensor(0.02)), "cuda")
ref, _ = run(torch, lambda L, ps: L.optim.Adam(ps, lr=0.02))
same(out, ref)
assert calls == [], calls
# float64 parameters keep the per-parameter path (double math, as PyTorch)
calls.clear()
# (SGD: the interpreter of the fake device has no float64 sqrt)
ref, _ = run(torch, lambda L, ps: L.optim.SGD(ps, lr=0.1, momentum=0.9), dtype="float64")
out, _ = run(ember, lambda L, ps: L.optim.SGD(ps, lr=0.1, momentum=0.9), "cuda",
             dtype="float64")
same(out, ref, 1e-12)
assert calls == [], calls
# a capturable state dict loaded from a host-step optimizer: the steps move to the device
_, src = run(ember, lambda L, ps: L.optim.Adam(ps, lr=1e-2), "cuda")
ps = [ember.tensor(a).cuda().requires_grad_() for a in INIT]
dst = ember.optim.Adam(ps, lr=1e-2, capturable=True)
sd = src.state_dict()
sd["param_groups"][0]["capturable"] = True   # (a loaded group keeps its saved settings)
dst.load_state_dict(sd)
for p, g in zip(ps, GRADS[0]):
    p.grad = ember.tensor(g).cuda()
dst.step()
assert dst.state[ps[0]]["step"].device.type == "cuda"
assert dst.state[ps[0]]["step"].item() == STEPS + 1
"""


def test_tensor_lr_float64_and_loaded_steps():
    run_script(TENSOR_LR, "foreach_optim_tensor_lr")


GRAPH = COMMON + r"""
# opt.step() of a capturable optimizer captured in a CUDA graph: replays equal eager steps
def setup(cap):
    ps = [ember.tensor(a).cuda().requires_grad_() for a in INIT]
    for p, g in zip(ps, GRADS[0]):
        p.grad = ember.tensor(g).cuda()
    return ps, ember.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, capturable=cap)

eager, opt_e = setup(False)
graphed, opt_g = setup(True)
for _ in range(2):                 # warm-up (state made, kernels compiled) on both
    opt_e.step(); opt_g.step()
s = ember.cuda.Stream()
with ember.cuda.stream(s):
    opt_g.step()                   # one more eager step on the side stream
ember.cuda.current_stream().wait_stream(s)
opt_e.step()
g = ember.cuda.CUDAGraph()
with ember.cuda.graph(g):
    opt_g.step()                   # captured, not run
for k in range(4):
    new = [rng.standard_normal(sh).astype("float32") for sh in SHAPES]
    for pe, pg, gr in zip(eager, graphed, new):
        pe.grad.copy_(ember.tensor(gr).cuda())
        pg.grad.copy_(ember.tensor(gr).cuda())
    opt_e.step()
    g.replay()
    ember.cuda.synchronize()
    same([p.detach().cpu().numpy() for p in graphed], [p.detach().cpu().numpy() for p in eager],
         1e-5)
assert opt_g.state[graphed[0]]["step"].item() == 7, opt_g.state[graphed[0]]["step"]
"""


def test_capturable_step_replays_in_a_cuda_graph():
    run_script(GRAPH, "foreach_optim_graph")


def test_constructor_and_device_checks_match_torch():
    torch = pytest.importorskip("torch")
    for lib in (ember, torch):
        w = lib.zeros(2, requires_grad=True)
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True`"):
            lib.optim.Adam([w], fused=True, foreach=True)
        with pytest.raises(RuntimeError, match="`fused` does not support `differentiable`"):
            lib.optim.SGD([w], fused=True, differentiable=True)
        opt = lib.optim.Adam([w], capturable=True)
        w.grad = lib.ones(2)
        with pytest.raises(AssertionError, match="If capturable=True, params and state_steps"):
            opt.step()


MEMO = COMMON + r"""
# gradients kept in place between steps (as a CUDA-graphed backward leaves them): after the
# first call, each step repeats the memoized launches straight through the compiled kernels
replays = []
_orig_replay = FO._replay
FO._replay = lambda *a: (replays.append(a[1]), _orig_replay(*a))[1]
for make, kw in ((lambda L, ps, **k: L.optim.AdamW(ps, lr=1e-2, amsgrad=True, **k), {}),
                 (lambda L, ps, **k: L.optim.Adam(ps, lr=1e-2, weight_decay=0.1, **k),
                  {"capturable": True}),
                 (lambda L, ps, **k: L.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, **k),
                  {})):
    out = {}
    for lib, dev in ((torch, "cpu"), (ember, "cuda")):
        ps = [lib.tensor(a).to(dev).requires_grad_() for a in INIT]
        for p in ps:
            p.grad = lib.zeros_like(p)
        opt = make(lib, ps, **kw) if lib is ember else make(lib, ps)
        for k in range(STEPS):
            for p, g in zip(ps, GRADS[k]):
                p.grad.copy_(lib.tensor(g).to(dev))
            opt.step()
        out[lib.__name__] = [p.detach().cpu().numpy() for p in ps]
    same(out["ember"], out["torch"])
sgd_first = 1   # SGD's first step makes the momentum buffers on the per-parameter path
assert len(replays) == 3 * (STEPS - 1) - sgd_first, replays
"""


def test_repeated_steps_replay_memoized_launches(monkeypatch):
    monkeypatch.setenv("EMBER_CUDA_FAKE_PLANS", "1")  # the fake device keeps launch plans too
    run_script(MEMO, "foreach_optim_memo")


MEMO_NEW_GRADS = COMMON + r"""
# gradients in new memory every step (what zero_grad(set_to_none=True) and a backward leave):
# the memoized launches still replay, with each step's gradient addresses put in
replays = []
_orig_replay = FO._replay
FO._replay = lambda *a: (replays.append(a[1]), _orig_replay(*a))[1]
keep = []  # (the old gradients stay alive: the new ones cannot reuse their memory)
for make in (lambda L, ps: L.optim.AdamW(ps, lr=1e-2),
             lambda L, ps: L.optim.SGD(ps, lr=0.1, momentum=0.9)):
    out = {}
    for lib, dev in ((torch, "cpu"), (ember, "cuda")):
        ps = [lib.tensor(a).to(dev).requires_grad_() for a in INIT]
        opt = make(lib, ps)
        for k in range(STEPS):
            for p, g in zip(ps, GRADS[k]):
                p.grad = lib.tensor(g).to(dev)
                keep.append(p.grad)
            opt.step()
        out[lib.__name__] = [p.detach().cpu().numpy() for p in ps]
    same(out["ember"], out["torch"])
assert len({g.data_ptr() for g in keep if g.device.type == "cuda"}) > len(INIT)
sgd_first = 1   # SGD's first step makes the momentum buffers on the per-parameter path
assert len(replays) == 2 * (STEPS - 1) - sgd_first, replays
"""


def test_steps_with_new_gradients_replay_memoized_launches(monkeypatch):
    monkeypatch.setenv("EMBER_CUDA_FAKE_PLANS", "1")  # the fake device keeps launch plans too
    run_script(MEMO_NEW_GRADS, "foreach_optim_memo_new_grads")
