"""The op database (core's opdb.RECORDS) through `ember.compile(backend="aot_eager",
fullgraph=True)`: values equal eager's, and gradients (through the compiled backward) equal
eager autograd's, at the records' static sizes; and with dynamic=True (symbolic sizes, the
joint graph traced on them or, where it cannot be, per size)."""
import os
import sys

import numpy as np
import pytest

import ember
import ember._dynamo as dynamo

try:
    from opdb import RECORDS, DType, Samples
except ImportError:  # running from the source tree: core's test folder holds the records
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "core", "tests"))
    from opdb import RECORDS, DType, Samples

from ember._ops import OPS

TABLE = {op.qualname: op for op in OPS.values()}


def _convert(a, fdt):
    if isinstance(a, np.ndarray):
        kind = a.dtype.kind
        dt = fdt if kind == "f" else ("complex64" if kind == "c" else str(a.dtype))
        return ember.tensor(a.copy()).to(getattr(ember, dt))
    if isinstance(a, (list, tuple)) and any(isinstance(x, np.ndarray) for x in a):
        return type(a)(_convert(x, fdt) for x in a)
    if isinstance(a, DType):
        return getattr(ember, a.name)
    return a


def _inputs(rec):
    args = rec.sample(Samples(0))
    return [_convert(a, rec.dtype) for a in args], {k: _convert(v, rec.dtype)
                                                    for k, v in rec.kw.items()}


def _flat(r):
    if isinstance(r, (tuple, list)):
        return [y for x in r for y in _flat(x)]
    return [r]


def _close(a, b, rec):
    fa, fb = _flat(a), _flat(b)
    assert len(fa) == len(fb)
    for x, y in zip(fa, fb):
        if isinstance(x, ember.Tensor):
            assert tuple(x.shape) == tuple(y.shape) and x.dtype == y.dtype
            np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(),
                                       rtol=rec.rtol or 1e-5, atol=rec.atol or 1e-5,
                                       equal_nan=True)
        else:
            assert x == y


# ops whose output shape or checks read the data: a graph break (fullgraph raises), and the
# compiled function without fullgraph still equals eager
DATA_DEPENDENT = {"_unique2", "unique_dim", "unique_consecutive", "bincount", "masked_select",
                  "nonzero", "argwhere", "repeat_interleave.self_Tensor", "linalg_lstsq",
                  "gaussian_nll_loss"}
VALUES = [r for r in RECORDS if r.values and r.name in TABLE and "random" not in TABLE[r.name].tags]


@pytest.mark.parametrize("rec", VALUES, ids=str)
def test_opdb_compiled_values_and_grads_equal_eager(rec):
    dynamo.reset()
    op = TABLE[rec.name]
    args, kw = _inputs(rec)
    fn = ember.compile(lambda *a: op(*a, **kw), backend="aot_eager", fullgraph=True)
    if rec.name in DATA_DEPENDENT:
        with pytest.raises(dynamo.exc.Unsupported, match="data-dependent|meta"):
            fn(*args)
        fn = ember.compile(lambda *a: op(*a, **kw), backend="aot_eager")
    if op.mutated_idx:  # in-place: the same writes to the inputs, compiled or not
        a2, _ = _inputs(rec)
        _close(fn(*a2), op(*args, **kw), rec)
        _close([a2[i] for i in op.mutated_idx], [args[i] for i in op.mutated_idx], rec)
        return
    _check_values_and_grads(op, fn, args, kw, rec)


DYNAMIC = [r for r in VALUES if r.name not in DATA_DEPENDENT and not TABLE[r.name].mutated_idx]


@pytest.mark.parametrize("rec", DYNAMIC, ids=str)
def test_opdb_dynamic_compiled_values_and_grads_equal_eager(rec):
    dynamo.reset()
    op = TABLE[rec.name]
    args, kw = _inputs(rec)
    fn = ember.compile(lambda *a: op(*a, **kw), backend="aot_eager", dynamic=True)
    _check_values_and_grads(op, fn, args, kw, rec)


def _check_values_and_grads(op, fn, args, kw, rec):
    ref = op(*args, **kw)
    leaves = [i for i, a in enumerate(args) if isinstance(a, ember.Tensor)
              and a.dtype.is_floating_point] if rec.grad and (op.vjp or op.decomp) else []
    _close(fn(*args), ref, rec)
    outs = [o for o in _flat(ref) if isinstance(o, ember.Tensor) and o.dtype.is_floating_point]
    if not leaves or not outs:
        return
    if rec.gout is not None:
        outs = outs[:rec.gout]
    grads = []
    for f in (lambda *a: op(*a, **kw), fn):
        xs = list(args)
        for i in leaves:
            xs[i] = args[i].detach().clone().requires_grad_()
        r = f(*xs)
        rs = [o for o in _flat(r) if isinstance(o, ember.Tensor) and o.dtype.is_floating_point]
        rs = [o for o in (rs if rec.gout is None else rs[:rec.gout]) if o.requires_grad]
        if not rs:
            grads.append(None)
            continue
        total = sum((o * (k + 1.0)).sum() for k, o in enumerate(rs))
        want = [xs[i] for i in leaves]
        grads.append(ember.autograd.grad(total, want, allow_unused=True))
    if grads[0] is None:
        return
    assert grads[1] is not None, "compiled outputs do not require grad"
    for g0, g1 in zip(*grads):
        assert (g0 is None) == (g1 is None)
        if g0 is not None:
            _close(g0, g1, rec)
