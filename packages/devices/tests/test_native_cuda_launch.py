"""The native launch path of pointwise cuda calls (core's csrc/devplan.cpp, ember.cuda's
runtime/native.py) against the Python path, the reference: values, dtypes, strides,
broadcasting, scalars, argument errors, autograd, and the calls that must fall back (a pushed
stream, another default dtype). On a GPU in-process, with a printout of us/op both ways (no
timing assertion); without one on the fake device (EMBER_CUDA_FAKE=1 TRITON_INTERPRET=1
EMBER_CUDA_FAKE_PLANS=1), where the parameters C++ packed are decoded and compared with the
ones the Python path passed to the same kernel."""
import pytest
from cuda_script import run_plan_script

import ember
from ember import _native

SCRIPT = r"""
import time
import numpy as np, ember
import ember.autograd
from ember import _native
from ember.cuda.runtime import driver as rt, launcher
F = ember.nn.functional
assert _native.device_stats() is not None, "ember._C without the device launch path"
rng = np.random.default_rng(0)

def stats():
    return _native.device_stats()

def same(a, b):  # native vs Python path: bit-identical (the same kernel on the same inputs)
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), (a, b)
    an, bn = a.detach().cpu().numpy(), b.detach().cpu().numpy()
    assert np.array_equal(an, bn, equal_nan=True), (an, bn)

def both(f, *args):
    # the Python path twice (it caches its launch plan), then the native one: the first native
    # call builds the plan after the slot ran, the later ones replay it
    _native.set_enabled(False)
    ref = f(*args)
    f(*args)
    _native.set_enabled(True)
    f(*args)
    h0 = stats()[0]
    out = [f(*args) for _ in range(2)]
    for o in out:
        same(o, ref)
    return ref, stats()[0] - h0

x = ember.tensor(rng.standard_normal((5, 6)).astype("float32")).cuda()
y = ember.tensor(rng.standard_normal((6,)).astype("float32")).cuda()
i = ember.tensor(rng.integers(-9, 9, (5, 6))).cuda()
h = ember.tensor(rng.standard_normal((5, 6)).astype("float32")).cuda().half()
d = ember.tensor(rng.standard_normal((5, 6))).cuda()
records = [
    ("add", lambda: x + y), ("sub_alpha", lambda: x.sub(y, alpha=2)),
    ("mul_scalar", lambda: x * 3.5),
    ("int_scalar", lambda: i * 3), ("int_div", lambda: i // 4), ("int_float", lambda: i / 7),
    ("transposed", lambda: x.t() * 2), ("strided", lambda: x[1:, ::2] + 1),
    ("broadcast", lambda: x[:, :1] - y), ("half", lambda: h * h), ("mixed", lambda: h + x),
    ("float64", lambda: d * 2.0 + d), ("where", lambda: ember.where(x > y, x, y)),
    ("gelu", lambda: F.gelu(x)), ("relu", lambda: x.relu()), ("exp", lambda: x.exp()),
    ("compare", lambda: x > 0.5), ("bool_and", lambda: (i > 0) & (i < 5)),
    ("clamp", lambda: x.clamp(-0.5, 0.5)), ("pow", lambda: i.pow(2)),
    ("sigmoid", lambda: x.sigmoid()),
    ("bool_scalar", lambda: x * True), ("big_int", lambda: i + 2**40),
]
hits = {}
for name, f in records:
    _, hits[name] = both(f)
missed = [n for n, k in hits.items() if k == 0]
# (float64 bakes scalars as values; a record may still hit: only a plan-less record is reported)
assert len(missed) <= 2, f"no native hits for {missed}"

# the op's argument check runs on every hit, as on the Python path's
from ember._ops.registry import lookup
clamp, calls = lookup("clamp"), []
orig = clamp.check
clamp.check = lambda *a: (calls.append(1), orig(*a))[1]
try:
    y.clamp(-0.5, 0.5); y.clamp(-0.5, 0.5)
    h0, n0 = stats()[0], len(calls)
    for _ in range(3):
        y.clamp(-0.5, 0.5)
    assert stats()[0] - h0 == 3 and len(calls) - n0 == 3, (stats(), h0, len(calls), n0)
finally:
    clamp.check = orig
try:
    i.pow(-1)
    raise AssertionError("pow(int, -1) did not raise")
except RuntimeError as e:
    assert "negative" in str(e), e

# a pushed stream or another default dtype: the Python path (no hit counted)
x + y
h0, b0 = stats()[0], stats()[2]
s = ember.cuda.Stream()
with ember.cuda.stream(s):
    r = x + y
    x + y
s.synchronize()
assert stats()[0] == h0, "a native launch while a stream was current"
assert stats()[2] == b0, "a plan built again for a key that has one"
same(r, x + y)
ember.set_default_dtype(ember.float64)
try:
    h0 = stats()[0]
    r = i * 0.5
    assert r.dtype == ember.float64 and stats()[0] == h0
finally:
    ember.set_default_dtype(ember.float32)

# autograd records around the native hit
xg = x.clone().requires_grad_()
for _ in range(3):
    out = (xg * 2.0 + y).sum()
out.backward()
assert np.allclose(xg.grad.cpu().numpy(), 2.0)
# the allocator's bookkeeping through native malloc/free (csrc/devalloc.cpp) as the Python one's
import gc
x + y; x + y
gc.collect()
m0, c0 = ember.cuda.memory_allocated(), ember.cuda.memory_stats()["allocation.all.current"]
outs = [x + y for _ in range(300)]  # (past the allocator's flush of its reuse lists at 256)
assert type(outs[-1]._storage.data).__name__ == "NativeBuffer"
assert ember.cuda.memory_allocated() - m0 == 300 * 512, ember.cuda.memory_allocated() - m0
assert len({o.data_ptr() for o in outs}) == 300
del outs
gc.collect()
assert ember.cuda.memory_allocated() == m0
assert ember.cuda.memory_stats()["allocation.all.current"] == c0
# a Parameter (a plain Tensor subclass) in a recorded call: keyed by its class, hit natively
b = ember.nn.Parameter(y.clone())
_native.set_enabled(False)
ref = x * 0.5 + b
_native.set_enabled(True)
h0 = stats()[0]
for _ in range(3):
    b.grad = None
    out = x * 0.5 + b
    out.sum().backward()
    same(out, ref)
    assert np.allclose(b.grad.cpu().numpy(), 5.0)
assert stats()[0] - h0 >= 2, ("no native hit with a Parameter", stats(), h0)

if rt.FAKE and not rt.NOLAUNCH:
    # the parameters C++ packed, decoded, equal the Python path's (but the output address)
    be = ember.cuda._backend
    for f in (lambda: x + y, lambda: x.t() * 2.5, lambda: i + 2**40, lambda: x * True):
        _native.set_enabled(False); f(); f()
        _native.set_enabled(True); f()
        runs = {id(v[7]): v[7] for v in be._plans.values()
                if isinstance(v[7], launcher.FakeRun)}
        for run in runs.values():
            run.last_args = None
        _native.set_enabled(False); f()
        py = [r.last_args for r in runs.values() if r.last_args is not None]
        for run in runs.values():
            run.last_args = None
        _native.set_enabled(True); f()
        nat = [r.last_args for r in runs.values() if r.last_args is not None]
        assert len(py) == len(nat) == 1, (py, nat)
        assert py[0][1:] == nat[0][1:] and len(py[0]) == len(nat[0]), (py, nat)
else:
    # the microbenchmark: us/op of a small add both ways (printed, never asserted)
    a = ember.ones(16, device="cuda")
    for on in (False, True):
        _native.set_enabled(on)
        for rep in range(2):
            ember.cuda.synchronize()
            t = time.perf_counter()
            z = a
            for _ in range(2000):
                z = z + a
            ember.cuda.synchronize()
            us = (time.perf_counter() - t) / 2000 * 1e6
        print(f"native_cuda_launch add us/op: native={'on' if on else 'off'} {us:.2f}")
    _native.set_enabled(True)
print("native device stats", stats())
"""


@pytest.mark.skipif(not hasattr(_native, "register_device") or _native._C is None
                    or not hasattr(_native._C, "devplan_register"),
                    reason="ember._C not built (python tools/build_native.py)")
def test_native_cuda_launch(monkeypatch):
    run_plan_script(SCRIPT, "native_cuda_launch", monkeypatch)


def _records():
    if not ember.cuda.is_available():
        return []
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "core", "tests"))
    from test_pointwise import RECORDS
    return RECORDS


RECORDS = _records()


@pytest.mark.skipif(not ember.cuda.is_available(), reason="no CUDA GPU present")
@pytest.mark.skipif(_native._C is None or not hasattr(_native._C, "devplan_register"),
                    reason="ember._C not built (python tools/build_native.py)")
@pytest.mark.parametrize("rec", RECORDS, ids=[str(r) for r in RECORDS])
def test_record_native_vs_python(rec):
    """Each record of core's pointwise database, in its dtypes: the native hits give the
    Python path's result bit for bit (the same kernel on the same inputs)."""
    import numpy as np
    from harness import make_array

    from ember.cuda.runtime import driver as rt
    dtypes = ("float32",) if rt.FAKE else ("float32", "float16", "int64", "bool")
    for dtype in dtypes:
        if dtype not in rec.dtypes:
            continue
        rng = np.random.default_rng(0)
        shapes = [(3, 4), (4,), (3, 1)][:rec.n]
        try:
            arrs = [make_array(s, dtype, rng, rec.low, rec.high) for s in shapes]
        except ValueError:
            arrs = [make_array(s, dtype, rng) for s in shapes]
        xs = [ember.tensor(a).to(getattr(ember, dtype)).cuda() for a in arrs]
        try:
            _native.set_enabled(False)
            try:
                ref = [rec.fn(ember, *xs) for _ in range(2)][-1]
            except Exception:  # an error case: the error paths are the op database's tests
                continue
            _native.set_enabled(True)
            got = [rec.fn(ember, *xs) for _ in range(3)]
        finally:
            _native.set_enabled(True)
        for g in got:
            for a, b in zip(ref if isinstance(ref, tuple) else (ref,),
                            g if isinstance(g, tuple) else (g,)):
                assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), (rec, dtype)
                an, bn = a.cpu(), b.cpu()
                if an.dtype in (ember.float16, ember.bfloat16):
                    an, bn = an.float(), bn.float()
                assert np.array_equal(an.numpy(), bn.numpy(), equal_nan=True), (rec, dtype)
