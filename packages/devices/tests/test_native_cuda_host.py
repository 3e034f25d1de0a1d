"""The cuda calls that stayed on the Python path through session 6, now native plans (ember.cuda's
runtime/native_ops.py, core's csrc/devplan*.cpp), against the Python path (values bit for bit,
dtypes, strides; no Python slot call once a plan is built):
- factories given a cuda device (zeros, ones, full, empty, arange), and the calls that must not
  replay (requires_grad=True, another default dtype);
- layer_norm's and convolution's backward (a list of bools, a Size, a result tuple with None);
- nll_loss_forward under grad (two outputs, no weight): a plan and a native graph node;
- the composites (linear, layer_norm, cross_entropy): from C++ to their cuda slot, or under
  grad to autograd's record, with no pass through dispatch's Python `call`;
- embedding, its bounds checked on the device: an out-of-range index raises IndexError at the
  next wait for the device, with no copy to the host per call.
On a GPU in this process; without one on the fake device (EMBER_CUDA_FAKE=1 TRITON_INTERPRET=1
EMBER_CUDA_FAKE_PLANS=1), where plans run the interpreter / numpy from the parameters C++
packed."""
import pytest
from cuda_script import run_plan_script

from ember import _native

COMMON = r"""
import numpy as np, ember
import ember.autograd
from ember import _native
from ember._ops import OPS
F = ember.nn.functional
rng = np.random.default_rng(0)

def same(a, b):
    if a is None or b is None:
        assert a is None and b is None, (a, b)
        return
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), (a, b)
    assert tuple(a.stride()) == tuple(b.stride()), (a.stride(), b.stride())
    assert a.device == b.device and a.requires_grad == b.requires_grad, (a, b)
    an, bn = a.detach().cpu().float().numpy(), b.detach().cpu().float().numpy()
    assert np.array_equal(an, bn, equal_nan=True), (an, bn)

SLOT_CALLS, SLOTS = {}, {}
def count_slots(*names):
    # the Python cuda slots of these ops, counted (a native plan's hit calls none)
    for name in names:
        op = OPS[name]
        k = SLOTS[name] = op.kernels["cuda"]
        def slot(*a, _k=k, _n=name):
            SLOT_CALLS[_n] = SLOT_CALLS.get(_n, 0) + 1
            return _k(*a)
        op.kernels["cuda"] = slot

def restore_slots():
    for name, k in SLOTS.items():
        OPS[name].kernels["cuda"] = k

def check(f, names, empty=False):
    # the Python path, then native: misses build the plan, later calls replay it with no slot
    _native.set_enabled(False)
    ref = f()
    _native.set_enabled(True)
    for _ in range(3):
        f()
    n0 = sum(SLOT_CALLS.get(n, 0) for n in names)
    h0 = _native.device_stats()[0]
    for _ in range(2):
        out = f()
        for a, b in zip(ref if isinstance(ref, tuple) else (ref,),
                        out if isinstance(out, tuple) else (out,)):
            if empty:
                assert (a.shape, a.stride(), a.dtype, a.device) == (
                    b.shape, b.stride(), b.dtype, b.device)
            else:
                same(a, b)
    assert sum(SLOT_CALLS.get(n, 0) for n in names) == n0, ("a Python slot ran", SLOT_CALLS)
    assert _native.device_stats()[0] > h0, "no native plan hit"
"""

FACTORIES = COMMON + r"""
count_slots("zeros", "ones", "full", "empty", "arange")
dev = ember.device("cuda:0")
x = ember.ones(3, device="cuda")
check(lambda: ember.zeros(4, 5, device=dev), ["zeros"])
check(lambda: ember.zeros((2, 3), dtype=ember.float16, device=x.device), ["zeros"])
if ember.cuda.device_count() == 1:
    check(lambda: ember.ones(7, device="cuda"), ["ones"])
else:  # several GPUs: a bare "cuda" (the current device) is never planned, values still right
    o = ember.ones(7, device="cuda")
    assert o.device == ember.device("cuda", ember.cuda.current_device())
    assert o.cpu().tolist() == [1.0] * 7
check(lambda: ember.ones(3, 3, dtype=ember.int64, device="cuda:0"), ["ones"])
check(lambda: ember.full((2, 5), 2.5, device=dev), ["full"])
check(lambda: ember.full((4,), 3, dtype=ember.int32, device=dev), ["full"])
check(lambda: ember.arange(10, device=dev), ["arange"])
check(lambda: ember.arange(2, 20, 3, device=dev), ["arange"])
check(lambda: ember.empty(6, 2, device=dev), ["empty"], empty=True)
# each size its own plan (the size is keyed by value, not only its length)
a, b = ember.zeros(3, 4, device=dev), ember.zeros(5, 6, device=dev)
assert tuple(a.shape) == (3, 4) and tuple(b.shape) == (5, 6)
c, d = ember.full((2,), 1.0, device=dev), ember.full((2,), 7.0, device=dev)
assert c.cpu().tolist() == [1.0, 1.0] and d.cpu().tolist() == [7.0, 7.0]
# requires_grad=True: never replayed (a plan's tensors do not require grad)
for _ in range(4):
    g = ember.zeros(4, device=dev, requires_grad=True)
    assert g.requires_grad and g.is_leaf
    h = ember.zeros_like(x, requires_grad=True)
    assert h.requires_grad and h.is_leaf
# the default dtype is part of the key
prev = ember.get_default_dtype()
ember.set_default_dtype(ember.float64)
try:
    assert ember.zeros(4, device=dev).dtype is ember.float64
finally:
    ember.set_default_dtype(prev)
assert ember.zeros(4, device=dev).dtype is ember.float32
# errors are the Python path's (a negative size), plans or not
for _ in range(2):
    try:
        ember.zeros(-1, device=dev)
    except RuntimeError as e:
        assert "negative dimension" in str(e)
    else:
        raise AssertionError("no error for a negative size")
# CPU and meta factories are unchanged
assert ember.zeros(2, device="meta").device.type == "meta"
assert ember.arange(4).tolist() == [0, 1, 2, 3]
restore_slots()
print("factories ok", SLOT_CALLS, _native.device_stats())
"""


BACKWARDS = COMMON + r"""
from ember._ops.registry import lookup
count_slots("native_layer_norm_backward", "convolution_backward", "nll_loss_forward")
def cu(*shape):
    return ember.tensor(rng.standard_normal(shape).astype("float32")).cuda()
# layer_norm's backward: its output mask is a list of bools (keyed by value); a False entry
# returns None there, which the plan puts back
lnb = lookup("native_layer_norm_backward")
x, w, b, g = cu(6, 16), cu(16), cu(16), cu(6, 16)
_, mean, rstd = lookup("native_layer_norm")(x, [16], w, b, 1e-5)
for mask in ([True, True, True], [True, False, False], [False, True, True]):
    check(lambda: lnb(g, x, [16], mean, rstd, w, b, mask), ["native_layer_norm_backward"])
    r = lnb(g, x, [16], mean, rstd, w, b, mask)
    assert [t is not None for t in r] == mask, (mask, r)
# convolution_backward: bias_sizes is a Size, the first conv's input gradient is None
cb = lookup("convolution_backward")
img, ker, go = cu(2, 3, 8, 8), cu(4, 3, 3, 3), cu(2, 4, 6, 6)
for mask in ([False, True, True], [True, True, True], [True, True, False]):
    check(lambda: cb(go, img, ker, ember.Size([4]), [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                     mask), ["convolution_backward"])
    r = cb(go, img, ker, ember.Size([4]), [1, 1], [0, 0], [1, 1], False, [0, 0], 1, mask)
    assert [t is not None for t in r] == mask, (mask, r)
# a conv + layer_norm net: the same gradients with the native path on and off
def train(native):
    _native.set_enabled(native)
    ember.manual_seed(0)
    net = ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3), ember.nn.ReLU(), ember.nn.Flatten(),
                              ember.nn.LayerNorm(144), ember.nn.Linear(144, 5)).cuda()
    lab = ember.tensor([1, 4]).cuda()
    for _ in range(3):
        net.zero_grad()
        F.cross_entropy(net(img), lab).backward()
    return [p.grad.cpu().numpy() for p in net.parameters()]
for a, b in zip(train(False), train(True)):
    assert np.array_equal(a, b), (a, b)
_native.set_enabled(True)
# nll_loss_forward under grad (two outputs, weight None): a plan's hit and a native node
logits, lab = cu(8, 5), ember.tensor([0, 4, 1, 2, 3, 0, 1, 4]).cuda()
def nll():
    z = logits.clone().requires_grad_()
    loss = F.nll_loss(F.log_softmax(z, -1), lab)
    loss.backward()
    return loss.detach(), z.grad
ref = nll()
for _ in range(2):
    nll()
n0, g0 = SLOT_CALLS.get("nll_loss_forward", 0), _native.grad_stats()
for _ in range(2):
    for a, b in zip(ref, nll()):
        same(a, b)
assert SLOT_CALLS.get("nll_loss_forward", 0) == n0, ("nll_loss_forward ran in Python", SLOT_CALLS)
assert _native.grad_stats() > g0, "no native graph node"
restore_slots()
print("backwards ok", SLOT_CALLS, _native.device_stats())
"""


EMBEDDING = COMMON + r"""
from ember.cuda.runtime import driver as rt
count_slots("embedding")
w = ember.tensor(rng.standard_normal((10, 4)).astype("float32")).cuda()
idx = ember.tensor([[0, 3], [9, 2]]).cuda()
check(lambda: F.embedding(idx, w), ["embedding"])
# no copy to the host (and so no wait for the device) per call: the bounds are checked there
reads, dtoh = [], rt.memcpy_dtoh
rt.memcpy_dtoh = lambda *a: (reads.append(a), dtoh(*a))[1]
try:
    for _ in range(3):
        y = F.embedding(idx, w)
finally:
    rt.memcpy_dtoh = dtoh
assert not reads, ("embedding copied to the host", len(reads))
assert np.array_equal(y.cpu().numpy(), w.cpu().numpy()[[[0, 3], [9, 2]]])
# an out-of-range index (too large, negative) raises the CPU's IndexError at the next wait for
# the device (a copy to the host, synchronize, item), once; the device stays usable
waits = [lambda t: t.cpu(), lambda t: ember.cuda.synchronize(), lambda t: t.sum().item(),
         lambda t: ember.cuda.current_stream().synchronize()]
for bad in ([0, 10], [-1, 2], [0, 10]):
    for wait in waits:
        y = F.embedding(ember.tensor(bad).cuda(), w)
        try:
            wait(y)
        except IndexError as e:
            assert "index out of range in self" in str(e), e
        else:
            if not rt.NOLAUNCH:
                raise AssertionError(f"no IndexError for {bad}")
        ember.cuda.synchronize()  # (raised once: cleared)
        assert y.cpu().numpy()[0].tolist() == w.cpu().numpy()[bad[0]].tolist() or bad[0] < 0
try:
    F.embedding(ember.tensor([0.5]).cuda(), w)  # a float index: the meta's error, at the call
except RuntimeError:
    pass
else:
    raise AssertionError("no error for float indices")
# the gradient is unchanged
wg = w.clone().requires_grad_()
F.embedding(idx, wg).sum().backward()
assert wg.grad.cpu().numpy()[[0, 2, 3, 9]].tolist() == [[1.0] * 4] * 4
restore_slots()
print("embedding ok", SLOT_CALLS, _native.device_stats())
"""


COMPOSITES = COMMON + r"""
import sys
from ember import _dispatch
def cu(*shape):
    return ember.tensor(rng.standard_normal(shape).astype("float32")).cuda()
x, w, b, lab = cu(6, 16), cu(8, 16), cu(8), ember.tensor([1, 0, 7, 3, 2, 5]).cuda()
def step():
    xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = F.linear(xs, ws, b)
    z = F.layer_norm(y, (8,))
    loss = F.cross_entropy(z, lab)
    loss.backward()
    return y.detach(), z.detach(), loss.detach(), xs.grad, ws.grad
_native.set_enabled(False)
ref = step()
_native.set_enabled(True)
for _ in range(3):
    step()
# the composites under grad go from C++ to autograd's record (their decomposition), never
# through dispatch's Python `call`
calls = []
def prof(frame, event, arg):
    if event == "call" and frame.f_code is _dispatch.call.__code__:
        calls.append(frame.f_locals["op"].name)
sys.setprofile(prof)
try:
    out = step()
finally:
    sys.setprofile(None)
for a, b_ in zip(ref, out):
    same(a, b_)
assert not calls, ("dispatch's Python call ran", calls)
# and with grad off, linear's cuda slot (its plan) from C++
with ember.no_grad():
    check(lambda: F.linear(x, w, b), [])
print("composites ok")
"""


needs_c = pytest.mark.skipif(_native._C is None or not hasattr(_native._C, "devplan_register"),
                             reason="ember._C not built (python tools/build_native.py)")


@needs_c
def test_native_cuda_factories(monkeypatch):
    run_plan_script(FACTORIES, "native_cuda_factories", monkeypatch)


@needs_c
def test_native_cuda_backward_plans(monkeypatch):
    run_plan_script(BACKWARDS, "native_cuda_backward_plans", monkeypatch)


@needs_c
def test_native_cuda_embedding(monkeypatch):
    run_plan_script(EMBEDDING, "native_cuda_embedding", monkeypatch)


@needs_c
def test_native_cuda_composites(monkeypatch):
    run_plan_script(COMPOSITES, "native_cuda_composites", monkeypatch)
