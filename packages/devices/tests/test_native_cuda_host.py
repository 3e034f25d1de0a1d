"""The cuda calls that stayed on the Python path through session 6, now native plans (ember.cuda's
runtime/native_ops.py, core's csrc/devplan*.cpp): factories given a cuda device (zeros, ones,
full, empty, arange), against the Python path: values bit for bit, dtypes, strides, and no
Python slot call once a plan is built; and the calls that must not replay (requires_grad=True,
another device). On a GPU in this process; without one on the fake device (EMBER_CUDA_FAKE=1
TRITON_INTERPRET=1 EMBER_CUDA_FAKE_PLANS=1), where plans run the interpreter / numpy from the
parameters C++ packed."""
import pytest
from cuda_script import run_script

from ember import _native

COMMON = r"""
import numpy as np, ember
import ember.autograd
from ember import _native
from ember._ops import OPS
F = ember.nn.functional
rng = np.random.default_rng(0)

def same(a, b):
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
check(lambda: ember.ones(7, device="cuda"), ["ones"])
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


needs_c = pytest.mark.skipif(_native._C is None or not hasattr(_native._C, "devplan_register"),
                             reason="ember._C not built (python tools/build_native.py)")


def _run(script, name, monkeypatch):
    monkeypatch.setenv("EMBER_CUDA_FAKE_PLANS", "1")  # (the fake device's subprocess)
    try:
        run_script(script, name, timeout=600)
    finally:
        _native.set_enabled(True)


@needs_c
def test_native_cuda_factories(monkeypatch):
    _run(FACTORIES, "native_cuda_factories", monkeypatch)
