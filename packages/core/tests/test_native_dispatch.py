"""The native hit path (ember._C's fast_call, csrc/fastpath.cpp) against the Python path.

Every record of the op database (and its error records) runs twice, with the native path off
(`ember._native.set_enabled(False)`: every call takes dispatch's Python `call`) and on: values,
dtypes, shapes, strides, errors (type and message) and float64 gradients must be identical.
Pointwise records also run with a Python scalar in each tensor slot (the plans keyed by scalar
values). Without a built ember._C both runs take the Python path (the test still runs: CI
builds the module, see tools/build_native.py and packages/core/BUILD.bazel).
"""
from __future__ import annotations

import numpy as np
import pytest
from opdb import RECORDS, DType, Samples
from opdb_errors import ERRORS

import ember
from ember import _native
from ember._ops import OPS

TABLE = {op.qualname: op for op in OPS.values()}


def _to_ember(a, fdt, grad):
    if isinstance(a, np.ndarray):
        kind = a.dtype.kind
        dt = fdt if kind == "f" else ("complex128" if kind == "c" else str(a.dtype))
        t = ember.tensor(a.copy()).to(getattr(ember, dt))
        return t.requires_grad_() if grad and kind == "f" else t
    if isinstance(a, (list, tuple)) and any(isinstance(x, np.ndarray) for x in a):
        return type(a)(_to_ember(x, fdt, grad) for x in a)
    if isinstance(a, DType):
        return getattr(ember, a.name)
    return a


def _summary(r, values=True):
    """What must be equal between the two paths: values (bitwise, NaNs equal), dtype, shape,
    strides of every output; the exception's type and message."""
    if isinstance(r, ember.Tensor):
        v = r.detach().numpy() if r.device.type == "cpu" and values else None
        return ("T", str(r.dtype), tuple(r.shape), r.stride(),
                None if v is None else v.tobytes())
    if isinstance(r, (tuple, list)):
        return (type(r).__name__, tuple(_summary(x, values) for x in r))
    return ("V", repr(r))


def _run(op, args, kw, grad, values):
    """(result summary, gradient summaries) of one call through the generated entry point."""
    try:
        r = op(*args, **kw)
    except Exception as e:  # noqa: BLE001 - the error itself is what is compared
        return ("E", type(e).__name__, str(e)), None
    grads = None
    if grad:
        outs = [x for x in (r if isinstance(r, (tuple, list)) else (r,))
                if isinstance(x, ember.Tensor) and x.requires_grad and x.dtype.is_floating_point]
        leaves = [a for a in args if isinstance(a, ember.Tensor) and a.requires_grad]
        if outs and leaves:
            try:
                loss = sum((o * o).sum() for o in outs)
                gs = ember.autograd.grad(loss, leaves, allow_unused=True)
                grads = tuple(_summary(g) for g in gs)
            except Exception as e:  # noqa: BLE001
                grads = ("E", type(e).__name__, str(e))
    return _summary(r, values), grads


def _variants(rec, op):
    """The record's args, and for pointwise ops each tensor slot replaced by a Python scalar."""
    args = rec.sample(Samples(0))
    out = [args]
    if op.pointwise is not None:
        for i in op.tensor_idx:
            if i < len(args) and isinstance(args[i], np.ndarray):
                for v in (2.5, 3, True):
                    out.append(tuple(v if j == i else a for j, a in enumerate(args)))
    return out


def _check(rec, fdt, grad):
    op = TABLE[rec.name]
    for k, raw in enumerate(_variants(rec, op)):
        res = []
        for on in (False, True):
            _native.set_enabled(on)
            try:
                args = [_to_ember(a, fdt, grad) for a in raw]
                kw = {n: _to_ember(v, fdt, False) for n, v in rec.kw.items()}
                if not rec.values:
                    ember.manual_seed(0)
                res.append(_run(op, args, kw, grad, rec.values))
            finally:
                _native.set_enabled(True)
        off, on = res
        assert off == on, f"{rec} variant {k} ({fdt}, grad={grad}): native path differs"


@pytest.mark.parametrize("rec", RECORDS + ERRORS, ids=str)
def test_native_matches_python(rec):
    _check(rec, "float32", False)
    if rec.grad and TABLE[rec.name].pointwise is not None:
        _check(rec, "float64", True)


def test_native_path_is_used():
    """Guards the test above against comparing the Python path with itself."""
    if not _native.enabled():
        pytest.skip("ember._C is not built here (tools/build_native.py), or EMBER_NATIVE=0")
    x = ember.ones(16)
    before = _native.stats()[0]
    for _ in range(3):
        x = x + x
    assert _native.stats()[0] >= before + 2
    assert x.tolist() == [8.0] * 16


def test_scalar_keys_positions_and_many_plans():
    """Plans are keyed by each scalar's position, type and exact value: sub(x, 2) and
    sub(2, x) differ, 2 and 2.0 differ, NaN keys and more keys than the cache holds still
    compute the right values."""
    x = ember.tensor([1.0, 2.0, 4.0])
    assert (x - 2).tolist() == [-1.0, 0.0, 2.0]
    assert (2 - x).tolist() == [1.0, 0.0, -2.0]
    assert ember.sub(x, 2, alpha=3).tolist() == [-5.0, -4.0, -2.0]
    assert (x + 2).dtype == (x + 2.0).dtype == ember.float32
    with pytest.raises(RuntimeError, match="Subtraction"):  # as PyTorch: a bool scalar too
        x - True
    for v in range(40):  # beyond the per-op plan cache: the formula runs
        assert (x * (v + 0.5)).tolist() == [(v + 0.5) * e for e in (1.0, 2.0, 4.0)]
    for _ in range(3):
        r = (x + float("nan")).tolist()
        assert all(e != e for e in r)
    assert (x * -0.0).tolist() == [-0.0, -0.0, -0.0]


def test_results_never_alias_inputs():
    x = ember.tensor([1.0, -2.0])  # (positive(x) is x itself, as PyTorch's)
    for y in (x * 1, x + 0, x - 0, x / 1, ember.relu(x).neg().neg()):
        y.add_(1)
        assert x.tolist() == [1.0, -2.0]
