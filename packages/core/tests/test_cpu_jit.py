"""Generated C++ pointwise kernels (ember._ops._cpujit) against the numpy kernels of the same
formulas: every pointwise op of the table, on its opdb sample (broadcasting as recorded), with a
strided first input, NaN / inf / signed-zero edges, and the dtypes the op supports (float32,
float64, bfloat16, int32, bool). All kernels are built up front in one compiler run.
The fallback to numpy (no compiler, a failed compile, EMBER_CPU_JIT=0) is checked too.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest
from opdb import RECORDS, DType, Samples

import ember
from ember import _dispatch
from ember import _dtype as D
from ember._ops import OPS, _cpujit

POINTWISE = {op.qualname: op for op in OPS.values() if op.pointwise is not None}
# formulas whose primitives have no C++ code yet: numpy runs them (checked: they stay numpy)
NO_KERNEL = {"erfinv", "polygamma"}
# special functions computed by ember's own numpy code vs libm: a few ulps apart
LOOSE = {"erf", "erfc", "lgamma", "digamma", "gelu", "gelu_backward", "logit", "xlogy", "mish",
         "pow", "tanh", "tanhshrink", "sigmoid", "silu", "logsigmoid", "softplus", "acosh", "asinh",
         "atanh", "atan2", "logaddexp", "logaddexp2", "expm1", "log1p", "cosh", "sinh", "tan",
         "hypot"}


def _recs():
    seen = {}
    for r in RECORDS:
        if r.name in POINTWISE and r.name not in seen:
            seen[r.name] = r
    return seen


RECS = _recs()
EDGES = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1.0, -1.0, 0.5])


def _to_dtype(a: np.ndarray, dt):
    if a.dtype.kind == "f":
        if dt._cat == 1:
            return ember.tensor(np.round(a * 3).astype(np.int32)).to(dt)
        if dt is D.bool:
            return ember.tensor(a > 0)
        return ember.tensor(a).to(dt)
    return ember.tensor(a.copy())


def _args(rec, dt, variant):
    """Full schema-order args for a record: numpy samples -> tensors of dtype dt."""
    raw = list(rec.sample(Samples(0)))
    first = True
    args = []
    for a in raw:
        if isinstance(a, np.ndarray) and a.ndim and a.dtype.kind == "f":
            if first and variant == "edges" and dt._cat == 2:
                flat = a.copy().reshape(-1)
                flat[:min(flat.size, EDGES.size)] = EDGES[:flat.size]
                a = flat.reshape(a.shape)
            t = _to_dtype(a, dt)
            if first and variant == "strided" and t.ndim >= 2:
                t = t.transpose(0, 1).contiguous().transpose(0, 1)  # same values, F order
            elif first and variant == "strided" and t.ndim == 1:
                big = ember.zeros(2 * t.shape[0], dtype=t.dtype)
                big[::2] = t
                t = big[::2]
            first = False
            args.append(t)
        elif isinstance(a, np.ndarray):
            args.append(ember.tensor(a.copy()))
        elif isinstance(a, DType):
            args.append(getattr(ember, a.name))
        else:
            args.append(a)
    op = POINTWISE[rec.name]
    kw = {k: (getattr(ember, v.name) if isinstance(v, DType) else v) for k, v in rec.kw.items()}
    return tuple(op.bind(tuple(args), kw))


def _dtypes_for(op):
    out = [(D.float32, "plain"), (D.float64, "strided"), (D.float32, "edges")]
    if "f" in op.supports and op.qualname in ("gelu", "add", "mul", "sigmoid", "where",
                                              "maximum", "exp", "silu", "div", "masked_fill"):
        out.append((D.bfloat16, "plain"))
    if "i" in op.supports:
        out.append((D.int32, "plain"))
    if "b" in op.supports:
        out.append((D.bool, "plain"))
    return out


# (numpy's polygamma does not return on inf: NO_KERNEL ops skip the edge values)
CASES = [(name, dt, v) for name, rec in sorted(RECS.items()) for dt, v in
         _dtypes_for(POINTWISE[name]) if not (name in NO_KERNEL and v == "edges")]


def _prepare(name, dt, variant):
    """(op, args, rdt, cdt), or None when numpy refuses the inputs (not a kernel question)."""
    op = POINTWISE[name]
    args = _args(RECS[name], dt, variant)
    inputs = [args[i] for i in op.pw_idx]
    try:
        common, rdt, cdt = _dispatch.pointwise_dtypes(op, inputs, args)
        if op.check is not None:
            op.check(common, *args)
    except (RuntimeError, TypeError, NotImplementedError):
        return None
    return op, args, rdt, cdt


@pytest.fixture(scope="module", autouse=True)
def jit_everything():
    """Every call goes to the JIT (threshold 0); all kernels built in one compiler run."""
    if not _cpujit.available():
        pytest.fail("no C++ compiler: the JIT tests need g++ (or $CXX)")
    old = _cpujit.THRESHOLD
    _cpujit.THRESHOLD = 0
    calls = [c for c in (_prepare(*case) for case in CASES) if c is not None]
    t = time.perf_counter()
    n = _cpujit.compile_batch(calls)
    sys.stderr.write(f"\ncpu_jit: {n} kernels compiled in {time.perf_counter() - t:.1f}s\n")
    yield
    _cpujit.THRESHOLD = old


def _numpy(op, args):
    saved = _dispatch.CPU_JIT
    _dispatch.CPU_JIT = None
    try:
        return _dispatch.run_pointwise(op, args)
    finally:
        _dispatch.CPU_JIT = saved


def _compare(name, got, want, rdt):
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    if rdt._cat < 2:
        np.testing.assert_array_equal(got, want, err_msg=name)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    if rdt is D.bfloat16:
        rtol, atol = 1e-2, 1e-2
    elif rdt is D.float32:
        rtol, atol = (2e-5, 1e-6) if name in LOOSE else (1e-6, 0)
    else:
        rtol, atol = (1e-12, 1e-14) if name in LOOSE else (1e-15, 0)
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)
    # NaN where numpy has NaN, infinities of the same sign
    assert np.array_equal(np.isnan(g), np.isnan(w)), f"{name}: NaN positions differ"
    assert np.array_equal(np.isposinf(g), np.isposinf(w)), f"{name}: +inf positions differ"


@pytest.mark.parametrize("name,dt,variant", CASES,
                         ids=[f"{n}-{str(d).split('.')[-1]}-{v}" for n, d, v in CASES])
def test_kernel_matches_numpy(name, dt, variant):
    prep = _prepare(name, dt, variant)
    if prep is None:  # numpy's path raises PyTorch's argument error: so must the dispatcher
        with pytest.raises((RuntimeError, TypeError, NotImplementedError)):
            _dispatch.execute(POINTWISE[name], _args(RECS[name], dt, variant))
        return
    op, args, rdt, cdt = prep
    try:
        want = _numpy(op, args)._np
    except RuntimeError as e:  # integer division by zero: the kernel must raise it too
        with pytest.raises(RuntimeError, match=str(e)):
            _cpujit.run(op, args, rdt, cdt)
        return
    got = _cpujit.run(op, args, rdt, cdt)
    if name in NO_KERNEL or (rdt._cat == 3 or cdt._cat == 3):
        assert got is None, f"{name}: expected the numpy fallback"
        return
    assert got is not None, f"{name} ({dt}, {variant}): no C++ kernel"
    _compare(name, got, want, rdt)
    # and through the dispatcher (in-place / out= / methods all end in run_pointwise)
    r = _dispatch.execute(op, args)
    _compare(name, r._np, want, rdt)


def test_every_pointwise_op_has_a_case():
    assert set(RECS) == set(POINTWISE)


def test_large_threads_broadcast_and_views():
    """Sizes past the threshold, several threads, broadcast rows and transposed views."""
    _cpujit.THRESHOLD = 1 << 16
    try:
        x = ember.randn(300, 500)
        b = ember.randn(500)
        xt = ember.randn(500, 300).t()
        for got, want in (
                (ember.nn.functional.gelu(x), lambda: ember.nn.functional.gelu(x)),
                (x * b + 1, lambda: x * b + 1),
                (ember.maximum(xt, x), lambda: ember.maximum(xt, x)),
                (ember.where(x > 0, xt, b), lambda: ember.where(x > 0, xt, b)),
                (ember.sub(x, b, alpha=0.25), lambda: ember.sub(x, b, alpha=0.25))):
            saved = _dispatch.CPU_JIT
            _dispatch.CPU_JIT = None
            try:
                w = want()
            finally:
                _dispatch.CPU_JIT = saved
            np.testing.assert_allclose(got._np, w._np, rtol=2e-6, atol=1e-6)
        # the kernel ran (not the numpy fallback)
        assert _cpujit.run(OPS["add"], (x, b, 1), D.float32, D.float32) is not None
    finally:
        _cpujit.THRESHOLD = 0


def test_scalar_guards_reuse_one_kernel():
    """add's `alpha == 1` is a guard: every alpha != 1 shares one kernel; alpha = 1 another."""
    x, y = ember.randn(64), ember.randn(64)
    op = OPS["add"]
    before = len(_cpujit._kernels)
    for alpha in (0.5, -3.0, 7.25):
        r = _cpujit.run(op, (x, y, alpha), D.float32, D.float32)
        np.testing.assert_allclose(r, x._np + y._np * np.float32(alpha), rtol=1e-6)
    r = _cpujit.run(op, (x, y, 1.0), D.float32, D.float32)
    np.testing.assert_allclose(r, x._np + y._np, rtol=1e-6)
    key = [k for k in _cpujit._kernels if k[0] == "add" and k[1][2] == ("s", float)
           and k[2] is D.float32 and k[4] == ("flat", "flat")]
    assert len(key) == 1 and len(_cpujit._kernels[key[0]]) == 2
    assert len(_cpujit._kernels) <= before + 1


def test_integer_division_by_zero_raises():
    x = ember.tensor(np.arange(10, dtype=np.int64))
    y = ember.tensor(np.array([1, 2, 0, 3, 4, 5, 6, 7, 8, 9], dtype=np.int64))
    for fn in (lambda: x // y, lambda: x % y, lambda: ember.fmod(x, y),
               lambda: ember.div(x, y, rounding_mode="trunc")):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn()
    m = ember.tensor(np.array([-2**63, 7, -7], dtype=np.int64))
    n = ember.tensor(np.array([-1, -2, 2], dtype=np.int64))
    assert (m // n).tolist() == [-2**63, -4, -4]
    assert (m % n).tolist() == [0, -1, 1]


def test_fallback_without_compiler(monkeypatch, tmp_path):
    """No compiler, or one that fails: the op still runs (numpy), nothing raises."""
    x = ember.randn(100)
    want = ember.exp(x)._np
    monkeypatch.setattr(_cpujit, "_compiler", False)
    assert _cpujit.run(OPS["exp"], (x,), D.float32, D.float32) is None
    np.testing.assert_array_equal(ember.exp(x)._np, want)
    # a compiler that fails every compile: logged once per key, numpy from then on
    monkeypatch.setattr(_cpujit, "_compiler", ("false", "a broken compiler"))
    monkeypatch.setattr(_cpujit, "_kernels", {})
    monkeypatch.setattr(_cpujit, "_mvec", False)
    monkeypatch.setenv("EMBER_CPU_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(_cpujit, "_broken", False)
    assert _cpujit.run(OPS["sin"], (x,), D.float32, D.float32) is None
    np.testing.assert_allclose(ember.sin(x)._np, np.sin(x._np), rtol=1e-6)
    assert _cpujit._broken  # the bare helpers did not compile either: JIT off for the process
    monkeypatch.setattr(_cpujit, "_broken", False)


def test_disabled_by_env():
    code = ("import ember; from ember._ops import _cpujit; "
            "x = ember.randn(1 << 17); y = ember.nn.functional.gelu(x); "
            "print(_cpujit.available(), len(_cpujit._kernels))")
    env = dict(os.environ, EMBER_CPU_JIT="0")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "0"]
