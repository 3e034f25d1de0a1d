"""Native launch plans of cuda calls that are not pointwise (matmul through cuBLASLt, Triton
reductions, softmax, losses: ember.cuda's runtime/native_ops.py, core's csrc/devplan*.cpp) and
native autograd nodes of cuda calls (csrc/fastpath.cpp's device_call), against the Python path:
values bit for bit, dtypes, strides, graph node names, gradients, and the calls that must stay
on the Python path (a pushed stream, a random op, a float32 precision change drops the plans).
On a GPU in a fresh process; without one on the fake device (EMBER_CUDA_FAKE=1
TRITON_INTERPRET=1 EMBER_CUDA_FAKE_PLANS=1), where plans run the interpreter / numpy from the
parameters C++ packed."""
import pytest
from cuda_script import run_plan_script

from ember import _native

SCRIPT = r"""
import numpy as np, ember
import ember.autograd
from ember import _native
from ember.cuda.runtime import driver as rt
F = ember.nn.functional
rng = np.random.default_rng(0)

def stats():
    return _native.device_stats()

def same(a, b):
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), (a, b)
    assert tuple(a.stride()) == tuple(b.stride()), (a.stride(), b.stride())
    an, bn = a.detach().cpu().float().numpy(), b.detach().cpu().float().numpy()
    assert np.array_equal(an, bn, equal_nan=True), (an, bn)

def both(f):
    # the Python path twice, then native: a miss builds the plan, later calls replay it
    _native.set_enabled(False)
    ref = f()
    f()
    _native.set_enabled(True)
    f()
    h0 = stats()[0]
    out = [f() for _ in range(2)]
    for o in out:
        for a, b in zip(ref if isinstance(ref, tuple) else (ref,),
                        o if isinstance(o, tuple) else (o,)):
            same(a, b)
    return stats()[0] - h0

def cu(*shape, dt="float32"):
    return ember.tensor(rng.standard_normal(shape).astype(dt)).cuda()

x, w, v, xt = cu(8, 16), cu(12, 16), cu(16), cu(8, 12)
b3, c3 = cu(3, 8, 16), cu(3, 16, 5)
lab = ember.tensor(rng.integers(0, 16, (8,))).cuda()
emb, img, ker = cu(20, 16), cu(2, 3, 6, 6), cu(4, 3, 3, 3)
idx = ember.tensor(rng.integers(0, 20, (4, 6))).cuda()
records = {
    "mm": lambda: x @ w.t(), "mm_tn": lambda: xt.t() @ x, "same_storage": lambda: x.t() @ x,
    "mv": lambda: x @ v,
    "bmm": lambda: b3 @ c3, "linear": lambda: F.linear(x, w),
    "sum_dim": lambda: x.sum(0), "sum_list": lambda: x.sum([0]), "sum_all": lambda: x.sum(),
    "mean": lambda: x.mean(-1), "amax": lambda: x.amax(1),
    "softmax": lambda: F.softmax(x, -1), "log_softmax": lambda: F.log_softmax(x, 1),
    "cross_entropy": lambda: F.cross_entropy(x, lab),
    "layer_norm": lambda: F.layer_norm(x, (16,)), "embedding": lambda: F.embedding(idx, emb),
    "half_mm": lambda: x.half() @ w.t().half(), "clone": lambda: x.clone(),
    "clone_strided": lambda: x.t().clone(),
    "conv2d": lambda: F.conv2d(img, ker), "max_pool2d": lambda: F.max_pool2d(img, 2),
    "nll_loss": lambda: nllf(lsm, lab, None, 1, -100),
}
from ember._ops.registry import lookup
nllf, lsm = lookup("nll_loss_forward"), F.log_softmax(x, 1)
hits = {name: both(f) for name, f in records.items()}
print("native hits per record", hits)
for name in ("mm", "mm_tn", "bmm", "linear", "sum_dim", "sum_list", "softmax", "log_softmax",
             "clone", "layer_norm", "nll_loss"):
    assert hits[name] > 0, f"no native plan for {name}: {hits}"

# a float32 precision change drops the plans (f32 GEMMs depend on it), then they are rebuilt
x @ w.t()
m0 = stats()[1]
prev = ember.get_float32_matmul_precision()
ember.set_float32_matmul_precision("high" if prev == "highest" else "highest")
try:
    r = x @ w.t()
    assert stats()[1] > m0, "a matmul plan replayed across a precision change"
finally:
    ember.set_float32_matmul_precision(prev)
# a pushed stream: the Python path
x @ w.t(); x @ w.t()
h0 = stats()[0]
s = ember.cuda.Stream()
with ember.cuda.stream(s):
    r = x @ w.t()
s.synchronize()
assert stats()[0] == h0, "a native matmul while a stream was current"
# a random op is never planned (its seed would be baked in)
_native.set_enabled(True)
d1, d2 = F.dropout(x, 0.5), F.dropout(x, 0.5)
d3 = F.dropout(x, 0.5)
assert not (np.array_equal(d2.cpu().numpy(), d3.cpu().numpy())
            and np.array_equal(d1.cpu().numpy(), d2.cpu().numpy())), "dropout replayed a mask"
# a misaligned view of the same shape: another key (16-byte class), never the aligned plan's
xa = cu(8 * 16 + 1)
mis = xa[1:].view(8, 16)
_native.set_enabled(False)
ref = mis @ w.t()
_native.set_enabled(True)
for _ in range(3):
    same(mis @ w.t(), ref)

# autograd: nodes of cuda calls built natively, the same graph and gradients as the Python path
def train(native):
    _native.set_native_grad(native)
    ember.manual_seed(0)
    net = ember.nn.Sequential(ember.nn.Linear(16, 32), ember.nn.ReLU(),
                              ember.nn.Linear(32, 16)).cuda()
    ember.manual_seed(0)
    names, grads = [], None
    for _ in range(3):
        net.zero_grad()
        out = net(x)
        loss = F.cross_entropy(F.log_softmax(out, -1) * 1.0, lab)
        names = []
        fn, seen = loss.grad_fn, set()
        todo = [fn]
        while todo:
            n = todo.pop()
            if n is None or id(n) in seen:
                continue
            seen.add(id(n))
            names.append(type(n).__name__ + ":" + str(n.name() if hasattr(n, "name") else ""))
            todo += [e[0] for e in n.next_functions]
        loss.backward()
        grads = [p.grad.cpu().numpy() for p in net.parameters()]
    return out, loss, sorted(names), grads

g0 = _native.grad_stats()
out_n, loss_n, names_n, grads_n = train(True)
g1 = _native.grad_stats()
out_p, loss_p, names_p, grads_p = train(False)
_native.set_native_grad(True)
assert g1 is not None and g1 > (g0 or 0), ("no native cuda graph node", g0, g1)
assert names_n == names_p, (names_n, names_p)
same(out_n, out_p)
same(loss_n, loss_p)
for a, b in zip(grads_n, grads_p):
    assert np.array_equal(a, b), (a, b)
assert out_n.grad_fn is not None and out_n.requires_grad
# a leaf's grad through a native matmul node, against numpy
wg = w.clone().requires_grad_()
(x @ wg.t()).sum().backward()
assert np.allclose(wg.grad.cpu().numpy(),
                   np.ones((8, 12), np.float32).T @ x.cpu().numpy(), atol=1e-4)
# a slot whose work goes through a library the recorder does not replay (cuSOLVER / the fake
# device's numpy stand-ins) is never planned: solve_triangular's and cholesky's gradients equal
# the Python path's (a plan of only its recorded part once replayed a copy without the solve)
A = ember.tensor(np.triu(rng.standard_normal((3, 3))).astype("float32")
                 + 3 * np.eye(3, dtype="float32"))
B = ember.tensor(rng.standard_normal((3, 2)).astype("float32"))

def solve(native):
    _native.set_enabled(native)
    outs = []
    for _ in range(4):
        a, b = A.cuda().requires_grad_(), B.cuda().requires_grad_()
        r = ember.linalg.solve_triangular(a, b, upper=True)
        r.sum().backward()
        spd = a.detach() @ a.detach().t() + ember.eye(3, device="cuda")
        outs.append([r.detach(), a.grad, b.grad, ember.linalg.cholesky(spd)])
    _native.set_enabled(True)
    return outs
for u, v in zip(solve(False), solve(True)):
    for p, q in zip(u, v):
        assert np.allclose(p.cpu().numpy(), q.cpu().numpy(), atol=1e-5), (p, q)
# a native miss runs the slot once (its recording is that call, never a second run)
from ember.cuda.runtime import launcher
calls, orig_call = [], launcher.FastLauncher.__call__
def counted(self, *a, **k):
    calls.append(1)
    return orig_call(self, *a, **k)
launcher.FastLauncher.__call__ = counted
try:
    z = cu(7, 9)
    for _ in range(4):
        n0 = len(calls)
        z.sum(1)
        assert len(calls) - n0 <= 1, ("a slot ran twice for one call", len(calls) - n0)
finally:
    launcher.FastLauncher.__call__ = orig_call
print("native device stats", stats(), "grad nodes", _native.grad_stats())
"""


@pytest.mark.skipif(_native._C is None or not hasattr(_native._C, "devplan_register"),
                    reason="ember._C not built (python tools/build_native.py)")
def test_native_cuda_ops(monkeypatch):
    run_plan_script(SCRIPT, "native_cuda_ops", monkeypatch)
