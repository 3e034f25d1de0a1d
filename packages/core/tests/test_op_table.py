"""Generic tests over the op table (ember._ops.OPS), driven by the op database (opdb.py).

Every op has a sample record; each record runs: meta vs CPU kernel (shapes, dtypes, strides),
decomposition vs kernel, forward vs torch's op of the same name, float64 gradients (finite
differences and torch), out= and in-place forms, and dtype errors vs torch.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from harness import compare, torch
from opdb import RECORDS, DType, Samples

import ember
from ember._dispatch import execute
from ember._ops import METHODS, OPS

TABLE = {op.qualname: op for op in OPS.values()}
# in-place variants generated for pointwise ops (`add_`) are tested through their functional op
GENERATED = {q for q, op in TABLE.items() if op.inplace_of is not None}

# ops without a record, and why
INTERNAL: dict[str, str] = {}

# ops that need values: on meta tensors they must raise a clear error (as PyTorch does)
SIZE = "output size depends on the input's values"
DATA_DEPENDENT = {
    **dict.fromkeys(("nonzero", "argwhere", "masked_select", "_unique2", "unique_dim",
                     "unique_consecutive", "bincount", "repeat_interleave.self_Tensor"), SIZE),
    "linalg_lstsq": "rank and residuals depend on the values (driver gelsd)",
    "gaussian_nll_loss": "checks var >= 0 on its values (PyTorch raises on meta too)",
}

# vjps that read values, so backward cannot run on meta tensors (nor be traced)
VJP_NEEDS_VALUES = {
    "masked_scatter": "the grad of source is masked_select(grad, mask): data-dependent size, "
                      "as in PyTorch",
}

# dtype cases where ember knowingly differs from torch 2.13 (the test fails once they agree)
KNOWN_DTYPE_DIFFS = {
    "addcmul-f->int64": "torch truncates a float `value` for integer tensors; ember raises "
                        "(PyTorch 1.x's error); the pointwise formula cannot see the dtype",
    "_nn_local_response_norm-f->int64": "torch averages integer squares with integer avg_pool "
                                        "(truncating); ember's average is exact",
    **dict.fromkeys([f"_upsample_{m}-f->int64" for m in ("linear", "cubic", "nearest")],
                    "torch refuses int64 but takes uint8 (images): `supports` cannot say that"),
}

# differentiable in torch, no derivative in ember yet (honest debt: keep it short)
KNOWN_MISSING_VJP: dict[str, str] = {}


def _op(rec):
    return TABLE[rec.name]


def _convert(a, mod, fdt, device=None):
    """numpy sample -> module tensor; float arrays take the dtype under test."""
    if isinstance(a, np.ndarray):
        if a.dtype.kind == "f":
            dt = fdt
        elif a.dtype.kind == "c":
            dt = "complex128" if fdt == "float64" else "complex64"
        else:
            dt = str(a.dtype)
        if mod is torch:
            t = torch.from_numpy(a.copy()).to(getattr(torch, dt))  # copy: C order, 0-dim kept
        else:
            t = ember.tensor(a.copy()).to(getattr(ember, dt))
        return t.to(device) if device else t
    if isinstance(a, (list, tuple)) and any(isinstance(x, np.ndarray) for x in a):
        return type(a)(_convert(x, mod, fdt, device) for x in a)
    if isinstance(a, DType):
        return getattr(mod, a.name)
    return a


def _inputs(rec, mod, fdt=None, device=None, seed=0):
    fdt = fdt or rec.dtype
    args = rec.sample(Samples(seed))
    return ([_convert(a, mod, fdt, device) for a in args],
            {k: _convert(v, mod, fdt, device) for k, v in rec.kw.items()})


def _torch_fn(rec):
    if callable(rec.ref):
        return rec.ref
    op = _op(rec)
    packet = getattr(torch.ops.aten, op.name)
    return getattr(packet, op.overload) if op.overload else packet


def _meta_only(e, t, path="out"):
    """Shapes and dtypes (random or uninitialized outputs)."""
    if isinstance(t, (tuple, list)):
        assert len(e) == len(t), f"{path}: length {len(e)} != {len(t)}"
        for i, (a, b) in enumerate(zip(e, t)):
            _meta_only(a, b, f"{path}[{i}]")
        return
    assert tuple(e.shape) == tuple(t.shape), f"{path}: shape {tuple(e.shape)} != {tuple(t.shape)}"
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], \
        f"{path}: dtype {e.dtype} != {t.dtype}"


def _pick(r, outs):
    return r if outs is None else tuple(tuple(r)[i] for i in outs)


# ---- 1. coverage ---------------------------------------------------------------------------------
def test_every_op_has_a_record():
    have = {r.name for r in RECORDS}
    missing = sorted(q for q in TABLE if q not in have and q not in GENERATED
                     and q not in INTERNAL)
    assert not missing, (f"ops without a sample record: {missing}; add one to "
                         f"packages/core/tests/opdb.py (one line: R(name, lambda s: (...)))")
    unknown = sorted(have - set(TABLE))
    assert not unknown, f"opdb.py has records for ops that are not in the table: {unknown}"


# ---- 2. meta vs kernel ---------------------------------------------------------------------------
def _meta_call(rec, op, args, kw):
    if not op.tensor_idx and not op.list_idx and op.device_idx is not None:
        kw = {**kw, "device": "meta"}   # factories: ask for meta outputs
    return op(*args, **kw)


def _same_meta(m, r, path="out"):
    if isinstance(r, (tuple, list)):
        assert isinstance(m, (tuple, list)) and len(m) == len(r), f"{path}: {m!r} vs {r!r}"
        for i, (a, b) in enumerate(zip(m, r)):
            _same_meta(a, b, f"{path}[{i}]")
        return
    if not isinstance(r, ember.Tensor):
        assert m == r, f"{path}: {m!r} != {r!r}"
        return
    assert isinstance(m, ember.Tensor), f"{path}: meta gave {type(m)}"
    assert m.device.type == "meta", f"{path}: meta call returned a {m.device} tensor"
    assert tuple(m.shape) == tuple(r.shape), f"{path}: meta shape {tuple(m.shape)} != " \
                                             f"{tuple(r.shape)}"
    assert m.dtype == r.dtype, f"{path}: meta dtype {m.dtype} != {r.dtype}"
    assert tuple(m.stride()) == tuple(r.stride()), f"{path}: meta strides {m.stride()} != " \
                                                   f"{r.stride()}"


@pytest.mark.parametrize("rec", RECORDS, ids=str)
def test_meta_matches_kernel(rec):
    op = _op(rec)
    margs, mkw = _inputs(rec, ember, device="meta")
    if rec.name in DATA_DEPENDENT:
        with pytest.raises((NotImplementedError, RuntimeError), match="(?i)meta"):
            _meta_call(rec, op, margs, mkw)
        return
    args, kw = _inputs(rec, ember)
    _same_meta(_meta_call(rec, op, margs, mkw), op(*args, **kw))


# ---- 3. decomposition vs kernel ------------------------------------------------------------------
BOTH = [r for r in RECORDS if _op(r).decomp is not None and _op(r).kernels]


@pytest.mark.parametrize("rec", BOTH, ids=str)
def test_decomp_matches_kernel(rec):
    op = _op(rec)
    args, kw = _inputs(rec, ember, "float64")
    bound = op.bind(args, kw)
    _same_values(op.decomp(*bound), execute(op, bound))  # ember against ember: no torch needed


def _same_values(d, k, path="out"):
    """The decomposition's result d equals the kernel's k: shapes, dtypes, values (float64)."""
    if isinstance(k, (tuple, list)):
        assert isinstance(d, (tuple, list)) and len(d) == len(k), f"{path}: {d!r} vs {k!r}"
        for i, (a, b) in enumerate(zip(d, k)):
            _same_values(a, b, f"{path}[{i}]")
        return
    if not isinstance(k, ember.Tensor):
        assert d == k, f"{path}: {d!r} != {k!r}"
        return
    assert isinstance(d, ember.Tensor), f"{path}: decomp gave {type(d)}"
    assert tuple(d.shape) == tuple(k.shape), f"{path}: shape {tuple(d.shape)} != {tuple(k.shape)}"
    assert d.dtype == k.dtype, f"{path}: dtype {d.dtype} != {k.dtype}"
    a, b = d.numpy(), k.numpy()
    wide = np.complex128 if a.dtype.kind == "c" else np.float64  # bool, ints, bfloat16 too
    np.testing.assert_allclose(a.astype(wide), b.astype(wide), rtol=1e-7, atol=1e-7,
                               err_msg=path)


# ---- 4. forward vs torch -------------------------------------------------------------------------
FORWARD = [r for r in RECORDS if r.ref is not False]


@pytest.mark.parametrize("rec", FORWARD, ids=str)
def test_forward_matches_torch(rec):
    op = _op(rec)
    eargs, ekw = _inputs(rec, ember)
    targs, tkw = _inputs(rec, torch)
    e = op(*eargs, **ekw)
    t = _torch_fn(rec)(*targs, **tkw)
    e, t = _pick(e, rec.outs), _pick(t, rec.outs)
    if rec.values:
        compare(e, t, rtol=rec.rtol, atol=rec.atol)
        for i in op.mutated_idx:  # mutated inputs (copy_, running stats) match too
            if i < len(targs) and targs[i] is not None:
                compare(eargs[i], targs[i], rtol=rec.rtol, atol=rec.atol, path=f"arg{i}")
    else:
        _meta_only(e, t)


# ---- 5. gradients --------------------------------------------------------------------------------
def _diff_leaves(op, args):
    """(i, j) positions of floating tensors the op differentiates: j indexes Tensor[] args."""
    out = []
    for i in op.diff_idx:
        if i >= len(args):  # left to its default (None) or passed by keyword
            continue
        a = args[i]
        items = [(i, j, x) for j, x in enumerate(a)] if isinstance(a, (list, tuple)) else \
            [(i, None, a)]
        out += [(i, j) for i, j, x in items if x is not None and hasattr(x, "dtype")
                and (x.dtype.is_floating_point or x.dtype.is_complex)]
    return out


def _place(args, leaves, xs):
    args = list(args)
    for (i, j), x in zip(leaves, xs):
        if j is None:
            args[i] = x
        else:
            args[i] = list(args[i])
            args[i][j] = x
    return args


def _get(args, i, j):
    return args[i] if j is None else args[i][j]


def _float_outputs(r):
    rs = r if isinstance(r, (tuple, list)) else (r,)
    return [x for x in rs if hasattr(x, "dtype") and x.dtype.is_floating_point]


GRAD = [r for r in RECORDS if r.grad and r.values and _diff_leaves(_op(r), _inputs(r, ember)[0])]


def _gouts(rec, r):
    """The differentiable (floating) outputs of a result."""
    outs = _float_outputs(r)
    return outs if rec.gout is None else outs[:rec.gout]


def _sym(rec, x):
    return (x + x.transpose(-2, -1)) / 2 if rec.sym else x.clone()


def _torch_leaves(rec, op, leaves):
    """The leaves torch differentiates the op for ([] where torch has no derivative)."""
    if rec.ref is False:
        return leaves if (op.vjp or op.decomp) else []
    while leaves:
        targs, tkw = _inputs(rec, torch, "float64")
        xs = [_get(targs, i, j).detach().requires_grad_() for i, j in leaves]
        try:
            r = _torch_fn(rec)(*_place(targs, leaves, [x.clone() for x in xs]), **tkw)
            outs = [o for o in _gouts(rec, r) if o.requires_grad]
            if outs:
                torch.autograd.grad(sum(o.sum() for o in outs), xs, allow_unused=True)
            return leaves if outs else []
        except RuntimeError as e:
            m = re.search(r"not differentiable with respect to argument '(\w+)'", str(e))
            if m and m.group(1) in op.arg_names:  # torch refuses grads for this arg: drop it
                k = op.arg_names.index(m.group(1))
                leaves = [(i, j) for i, j in leaves if i != k]
                continue
            if "not implemented" in str(e):
                return []
            raise
    return []


@pytest.mark.parametrize("rec", GRAD, ids=str)
def test_gradients(rec):
    op = _op(rec)
    eargs, ekw = _inputs(rec, ember, "float64")
    leaves = [(i, j) for i, j in _diff_leaves(op, eargs) if rec.wrt is None or i in rec.wrt]
    leaves = _torch_leaves(rec, op, leaves)
    if not leaves:
        return  # not differentiable in torch either
    if op.vjp is None and op.decomp is None and op.view is None and op.inplace_of is None:
        assert rec.name in KNOWN_MISSING_VJP, (
            f"{rec.name} is differentiable in torch but has no vjp in ember: write one, or "
            f"list it in KNOWN_MISSING_VJP with the reason")
        return
    assert rec.name not in KNOWN_MISSING_VJP, f"{rec.name} has a vjp now: drop it from the list"
    xs = [_get(eargs, i, j).detach().clone().requires_grad_() for i, j in leaves]

    def f(*xs):
        xs = [_sym(rec, x) if k == 0 else x.clone() for k, x in enumerate(xs)]
        return tuple(_gouts(rec, op(*_place(eargs, leaves, xs), **ekw)))
    if rec.fd:
        ember.autograd.gradcheck(f, xs, eps=1e-6, atol=1e-5, rtol=1e-3)
    _compare_torch_grads(rec, leaves, f, xs)


@pytest.mark.parametrize("rec", GRAD, ids=str)
def test_vjp_runs_on_meta(rec):
    """vjps are ember ops, so they trace: backward on meta tensors gives meta grads of the
    inputs' shapes (what the compiler's joint graph needs)."""
    op = _op(rec)
    if rec.name in DATA_DEPENDENT or not (op.vjp or op.decomp or op.view):
        return
    if rec.name in VJP_NEEDS_VALUES:
        with pytest.raises((NotImplementedError, RuntimeError, TypeError), match="(?i)meta"):
            _meta_backward(rec, op)
        return
    _meta_backward(rec, op)


def _meta_backward(rec, op):
    margs, mkw = _inputs(rec, ember, "float64", device="meta")
    leaves = [(i, j) for i, j in _diff_leaves(op, margs) if rec.wrt is None or i in rec.wrt]
    xs = [_get(margs, i, j).detach().requires_grad_() for i, j in leaves]
    outs = [o for o in _gouts(rec, op(*_place(margs, leaves, [x.clone() for x in xs]), **mkw))
            if o.requires_grad]
    if not outs:
        return
    gs = ember.autograd.grad(outs, xs, [ember.empty(o.shape, dtype=o.dtype, device="meta")
                                        for o in outs], allow_unused=True)
    for x, g in zip(xs, gs):
        if g is not None:
            assert g.device.type == "meta" and tuple(g.shape) == tuple(x.shape), \
                f"grad {g.device} {tuple(g.shape)} for input {tuple(x.shape)}"


def _compare_torch_grads(rec, leaves, f, xs):
    if rec.ref is False or not rec.tgrad:
        return
    targs, tkw = _inputs(rec, torch, "float64")
    txs = [_get(targs, i, j).detach().clone().requires_grad_() for i, j in leaves]
    tin = [_sym(rec, x) if k == 0 else x.clone() for k, x in enumerate(txs)]
    touts = _gouts(rec, _torch_fn(rec)(*_place(targs, leaves, tin), **tkw))
    eouts = f(*xs)
    if rec.outs is not None:  # sign-ambiguous outputs (eigenvectors) are left to gradcheck
        touts, eouts = _pick(touts, rec.outs), _pick(eouts, rec.outs)
    assert len(eouts) == len(touts)
    rng = np.random.default_rng(1)
    ws = [rng.uniform(-1, 1, tuple(t.shape)) for t in touts]
    tl = sum((o * torch.from_numpy(w)).sum() for o, w in zip(touts, ws) if o.requires_grad)
    el = sum((o * ember.tensor(w)).sum() for o, w in zip(eouts, ws) if o.requires_grad)
    tg = torch.autograd.grad(tl, txs, allow_unused=True)
    eg = ember.autograd.grad(el, xs, allow_unused=True)
    for k, (a, b) in enumerate(zip(eg, tg)):
        if b is None or b._is_zerotensor():
            assert a is None or not np.asarray(a.numpy()).any(), f"grad[{k}]: torch gives 0"
            continue
        assert a is not None, f"grad[{k}]: ember gives None, torch {b}"
        compare(a, b, "float64", rtol=rec.rtol, atol=rec.atol, path=f"grad[{k}]")


# ---- 6. out= and in-place forms ------------------------------------------------------------------
OUT = [r for r in RECORDS if _op(r).has_out]


@pytest.mark.parametrize("rec", OUT, ids=str)
def test_out(rec):
    op = _op(rec)
    args, kw = _inputs(rec, ember)
    want = op(*args, **kw)
    ws = want if isinstance(want, (tuple, list)) else (want,)
    for fresh in (True, False):  # an empty out is resized; a right-sized one is written into
        outs = tuple(ember.empty((0,) if fresh else tuple(w.shape), dtype=w.dtype)
                     if w is not None else None for w in ws)
        args, kw = _inputs(rec, ember)
        got = op(*args, **kw, out=outs if isinstance(want, (tuple, list)) else outs[0])
        gs = got if isinstance(got, (tuple, list)) else (got,)
        assert len(gs) == len(outs)
        for g, o, w in zip(gs, outs, ws):
            assert g is o, f"{rec.name}(out=...) did not return the out tensor"
            assert tuple(o.shape) == tuple(w.shape), f"out shape {tuple(o.shape)} != {w.shape}"
            if rec.values:
                np.testing.assert_allclose(o.numpy(), w.numpy(), rtol=1e-6, atol=1e-6)


INPLACE = [r for r in RECORDS if f"{_op(r).name}_" in METHODS and f"{r.name}_" in GENERATED]


@pytest.mark.parametrize("rec", INPLACE, ids=str)
def test_inplace_method(rec):
    name = _op(rec).name + "_"
    eargs, ekw = _inputs(rec, ember)
    targs, tkw = _inputs(rec, torch)
    if rec.name == "polygamma":   # polygamma_(n) takes n first, as torch
        eargs, targs = [eargs[0], eargs[1]], [targs[0], targs[1]]
        ecall = lambda x, *a: x.polygamma_(a[0])  # noqa: E731
        tcall = lambda x, *a: x.polygamma_(a[0])  # noqa: E731
    else:
        ecall = lambda x, *a: getattr(x, name)(*a, **ekw)  # noqa: E731
        # torch binds some of these only as ops (gelu_, silu_): ember's methods match the op
        tm = (lambda x, *a: getattr(x, name)(*a, **tkw)) if hasattr(torch.Tensor, name) else \
            (lambda x, *a: getattr(torch.ops.aten, name)(x, *a, **tkw))
        tcall = tm
    try:
        tr = tcall(*targs)
    except Exception as te:
        with pytest.raises(type(te)):
            ecall(*eargs)
        return
    x = eargs[0]
    v = x._version
    r = ecall(*eargs)
    assert r is x, f"{name} did not return self"
    assert x._version > v, f"{name} did not bump the version counter"
    compare(r, tr)


MUTATING = [r for r in RECORDS if _op(r).mutated_idx and _op(r).returns_alias]


@pytest.mark.parametrize("rec", MUTATING, ids=str)
def test_mutating_op_returns_self_and_bumps_version(rec):
    op = _op(rec)
    args, kw = _inputs(rec, ember)
    x = args[op.mutated_idx[0]]
    v = x._version
    assert op(*args, **kw) is x, f"{rec.name} did not return its mutated argument"
    assert x._version > v, f"{rec.name} did not bump the version counter"


# ---- 7. dtype errors vs torch --------------------------------------------------------------------
def _cast_kind(rec, kind, to):
    """Record args with every array of `kind` ('f' or 'i') cast to dtype `to`."""
    args = rec.sample(Samples(0))
    hit = []

    def cast(a):
        if isinstance(a, np.ndarray) and a.dtype.kind == kind:
            hit.append(1)
            return a.astype(to)
        if isinstance(a, list):
            return [cast(x) for x in a]
        return a
    return [cast(a) for a in args], bool(hit)


def _dtype_cases():
    for r in RECORDS:
        if not r.values or r.ref is False or "inplace" in _op(r).tags:
            continue
        for kind, to in (("f", "int64"), ("i", "float32")):
            if _cast_kind(r, kind, to)[1]:
                yield pytest.param(r, kind, to, id=f"{r}-{kind}->{to}")


@pytest.mark.parametrize("rec,kind,to", list(_dtype_cases()))
def test_dtype_errors_match_torch(rec, kind, to):
    if f"{rec}-{kind}->{to}" in KNOWN_DTYPE_DIFFS:
        try:
            _dtype_case(rec, kind, to)
        except (Exception, pytest.fail.Exception):  # any disagreement: still the known one
            return
        pytest.fail(f"{rec}-{kind}->{to} now matches torch: drop it from KNOWN_DTYPE_DIFFS")
    _dtype_case(rec, kind, to)


def _dtype_case(rec, kind, to):
    op = _op(rec)
    args, _ = _cast_kind(rec, kind, to)
    ekw = {k: _convert(v, ember, "float32") for k, v in rec.kw.items()}
    tkw = {k: _convert(v, torch, "float32") for k, v in rec.kw.items()}
    eargs = [_convert(a, ember, to) for a in args]
    targs = [_convert(a, torch, to) for a in args]
    tfn = _torch_fn(rec)
    if _op(rec).pointwise is not None and rec.ref is None and hasattr(torch, _op(rec).name):
        tfn = getattr(torch, _op(rec).name)  # the argument checks live in torch's Python API
    try:
        t = tfn(*targs, **tkw)
    except Exception as te:
        with pytest.raises(Exception) as ee:
            op(*eargs, **ekw)
        assert isinstance(ee.value, type(te)), (
            f"torch raised {type(te).__name__}: {te}; ember raised "
            f"{type(ee.value).__name__}: {ee.value}")
        return
    compare(_pick(op(*eargs, **ekw), rec.outs), _pick(t, rec.outs), rtol=rec.rtol,
            atol=rec.atol)
