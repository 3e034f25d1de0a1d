"""The native hit path (ember._C's fast_call, csrc/fastpath.cpp) against the Python path.

Every record of the op database (and its error records) runs twice, with the native path off
(`ember._native.set_enabled(False)`: every call takes dispatch's Python `call`) and on: values,
dtypes, shapes, strides, errors (type and message) and float64 gradients must be identical.
Pointwise records also run with a Python scalar in each tensor slot (the plans keyed by scalar
values). With grad, the graph's shape is compared too (grad_fn names, next_functions), and the
targeted tests below compare backward's errors and hooks between the native node
(csrc/fastpath_grad.cpp) and autograd's Python `record`. Without a built ember._C both runs
take the Python path (the test still runs: CI builds the module, see tools/build_native.py and
packages/core/BUILD.bazel).
"""
from __future__ import annotations

import numpy as np
import pytest
from native_helpers import both_paths
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


def _graph(t, depth=3):
    """A tensor's graph as names and edges: grad_fn name, then each next function's, nested."""
    def node(fn, d):
        if fn is None:
            return None
        if d == 0:
            return fn.name()
        return (fn.name(), tuple((node(n, d - 1), nr) for n, nr in fn.next_functions))
    return (t.requires_grad, t.is_leaf, node(t.grad_fn, depth))


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
            grads = tuple(_graph(o) for o in outs)
            try:
                loss = sum((o * o).sum() for o in outs)
                gs = ember.autograd.grad(loss, leaves, allow_unused=True)
                grads += tuple(_summary(g) for g in gs)
            except Exception as e:  # noqa: BLE001
                grads += ("E", type(e).__name__, str(e))
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
    if rec.grad:
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


# ---- autograd: the native node against record's -----------------------------------------------


def _leaf(*vals):
    return ember.tensor(list(vals), dtype=ember.float64, requires_grad=True)


def _twice_without_retain():
    x = _leaf(1.0, 2.0)
    y = (x * x).exp()
    y.sum().backward()
    y.sum().backward()


def _saved_input_modified():
    x = _leaf(1.0, 2.0)
    x2 = x * 1
    x2.add_(1)  # (saved at version 1)
    y = x2 * x
    x2.add_(1)
    y.sum().backward()


def _saved_output_modified():
    x = _leaf(0.5, 2.0)
    y = x.exp()
    y.mul_(2)
    y.sum().backward()


def _hooks():
    x = _leaf(1.0, -2.0)
    seen = []
    y = x * 2
    y.register_hook(lambda g: seen.append(g.tolist()) or g * 3)
    y.retain_grad()
    z = (y * y + x).tanh()
    z.grad_fn.register_prehook(lambda gs: seen.append(len(gs)))
    z.sum().backward(retain_graph=True)
    z.sum().backward()
    return seen, x.grad.tolist(), y.grad.tolist(), _graph(z)


def _saved_attrs():
    x = _leaf(1.0, 3.0)
    y = x.sigmoid() * x
    r = (y.grad_fn._saved_self.tolist(), y.grad_fn._saved_other.tolist(),
         y.grad_fn.next_functions[0][0]._saved_result.tolist())
    y.sum().backward()
    try:
        return r, y.grad_fn._saved_self
    except RuntimeError as e:
        return r, str(e)
    return r, None


def _views_and_no_grad():
    x = _leaf(1.0, 2.0, 3.0)
    b = x * 1
    v = b[1:]
    y = v * v
    with ember.no_grad():
        n = x * 2
    ember.autograd.backward(y.sum())
    return x.grad.tolist(), n.requires_grad, n.grad_fn, _graph(y)


def _anomaly_and_saved_hooks():
    x = _leaf(1.0, 2.0)
    packed = []
    with ember.autograd.graph.saved_tensors_hooks(lambda t: packed.append(1) or t, lambda t: t):
        y = x * x
    with ember.autograd.detect_anomaly():
        z = (y * x).sin()
    z.sum().backward()
    return len(packed), x.grad.tolist(), _graph(z)


def _double_backward():
    x = _leaf(1.0, 2.0)
    y = (x * x * x).sum()
    (g,) = ember.autograd.grad(y, x, create_graph=True)
    (g2,) = ember.autograd.grad(g.sum(), x)
    return g.tolist(), g2.tolist(), _graph(g)


def _parameters():
    """Kernel ops (matmul, reductions, softmax) on nn.Parameter and on results, with grad."""
    w = ember.nn.Parameter(ember.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=ember.float64))
    x = _leaf(1.0, 2.0)
    h = ember.softmax(x @ w, -1).mean(0, keepdim=True)
    y = (h.sum() * w.sum(1)).sum()
    y.backward()
    return _graph(y, 5), w.grad.tolist(), x.grad.tolist(), (x @ w).grad_fn.name()


@pytest.mark.parametrize("fn", [_parameters, _twice_without_retain, _saved_input_modified,
                                _saved_output_modified, _hooks, _saved_attrs,
                                _views_and_no_grad, _anomaly_and_saved_hooks, _double_backward],
                         ids=lambda f: f.__name__.strip("_"))
def test_autograd_matches_python(fn):
    off, on = both_paths(fn)
    assert off == on


def test_errors_are_raised():
    """The comparisons above see the errors PyTorch raises (not two equal non-errors)."""
    off, on = both_paths(_twice_without_retain)
    assert on[0] == "E" and "second time" in on[2]
    off, on = both_paths(_saved_input_modified)
    assert on[0] == "E" and "is at version 2; expected version 1" in on[2]
    off, on = both_paths(_saved_output_modified)
    assert on[0] == "E" and "output 0 of Exp" in on[2]


def test_native_node_is_built():
    """Guards the autograd tests above against comparing record() with itself."""
    if _native.grad_stats() is None:
        pytest.skip("ember._C is not built here, or EMBER_NATIVE=0")
    x = _leaf(1.0, 2.0)
    before = _native.grad_stats()
    y = x * x + x
    assert _native.grad_stats() >= before + 2
    assert y.grad_fn.name() == "AddBackward0"
    assert [n.name() for n, _ in y.grad_fn.next_functions] == [
        "MulBackward0", "ember::autograd::AccumulateGrad"]
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 5.0]


def test_new_vjp_is_seen():
    """ember.library's register_autograd gives an op a new vjp and drops autograd's cached
    `_ag_info`: the native node must use the new vjp, not a description kept from before."""
    op = TABLE["exp"]
    old = op.vjp
    x = _leaf(0.0, 1.0)
    x.exp().sum().backward()
    assert x.grad.tolist() == [1.0, pytest.approx(2.718281828)]
    try:
        op.vjp = lambda g, out, self: (g * 0 + 7,)
        op.__dict__.pop("_ag_info", None)
        x.grad = None
        x.exp().sum().backward()
        assert x.grad.tolist() == [7.0, 7.0]
    finally:
        op.vjp = old
        op.__dict__.pop("_ag_info", None)
    x.grad = None
    x.exp().sum().backward()
    assert x.grad.tolist() == [1.0, pytest.approx(2.718281828)]
