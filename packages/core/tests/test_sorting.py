"""Sorting, order statistics and counting against torch: op records (forward, grad, meta) plus
NaN placement, ties, error and data-dependent-output tests."""
from collections import namedtuple

import numpy as np
import pytest
from harness import ALL, FLOATS, LOWP, check, check_error, make_array, to_ember, to_torch, torch

import ember

Rec = namedtuple("Rec", "id fn shapes dtypes grad meta")
NUM = ALL[1:]
FL = FLOATS + LOWP


def rec(id, fn, shapes=((3, 5),), dtypes=FLOATS, grad=True, meta=True):
    return Rec(id, fn, shapes, dtypes, grad, meta)


def values(r):
    return r[0]


RECORDS = [
    rec("sort", lambda t, x: x.sort(), dtypes=FL),
    rec("sort_dim0_desc", lambda t, x: t.sort(x, 0, True)),
    rec("sort_stable_ints", lambda t, x: x.sort(dim=1, stable=True), dtypes=ALL, grad=False),
    rec("sort_stable_desc_ints", lambda t, x: t.sort(x, dim=-1, descending=True, stable=True),
        dtypes=("bool", "int32", "uint8"), grad=False),
    rec("sort_0d", lambda t, x: x.sort(), shapes=[()]),
    rec("argsort", lambda t, x: x.argsort(1), grad=False),
    rec("argsort_stable", lambda t, x: t.argsort(x, dim=0, descending=True, stable=True),
        dtypes=NUM, grad=False),
    rec("msort", lambda t, x: t.msort(x), dtypes=FL),
    rec("topk", lambda t, x: x.topk(2), dtypes=FL),
    rec("topk_smallest_dim0", lambda t, x: t.topk(x, 2, 0, largest=False)),
    rec("topk_k0", lambda t, x: x.topk(0)),
    rec("topk_ints_values", lambda t, x: values(x.topk(3)), dtypes=NUM, grad=False),
    rec("kthvalue", lambda t, x: x.kthvalue(2)),
    rec("kthvalue_dim0_keep", lambda t, x: t.kthvalue(x, 3, 0, True)),
    rec("median", lambda t, x: x.median(), dtypes=FL),
    rec("median_even", lambda t, x: t.median(x), shapes=[(2, 2)]),
    rec("median_dim", lambda t, x: x.median(1)),
    rec("median_dim_keep", lambda t, x: t.median(x, dim=0, keepdim=True), shapes=[(4, 3)]),
    rec("median_ints", lambda t, x: x.median(), dtypes=NUM, grad=False),
    rec("nanmedian", lambda t, x: x.nanmedian()),
    rec("nanmedian_dim", lambda t, x: t.nanmedian(x, 0)),
    rec("mode", lambda t, x: x.mode(1), dtypes=("int64", "float32", "bool"), grad=False),
    rec("mode_dim0_keep", lambda t, x: t.mode(x, 0, True), shapes=[(5, 3)],
        dtypes=("int32",), grad=False),
    rec("mode_float_grad", lambda t, x: x.mode(1)),
    rec("quantile", lambda t, x: t.quantile(x, 0.3)),
    rec("quantile_dim", lambda t, x: x.quantile(0.75, dim=1, keepdim=True)),
    rec("nanquantile", lambda t, x: t.nanquantile(x, 0.4, dim=0)),
    rec("histc", lambda t, x: t.histc(x, 7), grad=False),
    rec("histc_range", lambda t, x: x.histc(4, min=-1, max=2), grad=False),
]


@pytest.mark.parametrize("r", RECORDS, ids=[r.id for r in RECORDS])
def test_forward(r):
    check(r.fn, shapes=r.shapes, dtypes=r.dtypes)


GRADS = [r for r in RECORDS if r.grad]


@pytest.mark.parametrize("r", GRADS, ids=[r.id for r in GRADS])
def test_grad(r):
    check(r.fn, shapes=r.shapes, dtypes=("float64",), grad=True)


def _meta_shapes(o):
    if isinstance(o, (tuple, list)):
        return [_meta_shapes(x) for x in o]
    return tuple(o.shape), str(o.dtype).split(".")[-1]


METAS = [r for r in RECORDS if r.meta]


@pytest.mark.parametrize("r", METAS, ids=[r.id for r in METAS])
def test_meta(r):
    dtype = r.dtypes[0]
    arrays = [make_array(s, dtype, np.random.default_rng(0)) for s in r.shapes]
    eo = r.fn(ember, *[to_ember(a, dtype).to("meta") for a in arrays])
    to = r.fn(torch, *[to_torch(a, dtype) for a in arrays])  # real run: the shapes
    assert _meta_shapes(eo) == _meta_shapes(to)


# ---- NaN, ties, q tensors, interpolation ---------------------------------------------------------
NAN = float("nan")
XN = np.array([[1.0, NAN, 3.0, 2.0, 0.5], [5.0, 1.0, 0.0, 4.0, 2.0], [NAN, 2.0, NAN, 1.0, 3.0]],
              "float32")


@pytest.mark.parametrize("fn", [
    lambda t, x: x.sort(1), lambda t, x: x.sort(1, descending=True),
    lambda t, x: x.argsort(dim=0, stable=True), lambda t, x: x.topk(3), lambda t, x: x.topk(2, 0),
    lambda t, x: x.kthvalue(4), lambda t, x: x.median(1), lambda t, x: x.median(),
    lambda t, x: x.nanmedian(1), lambda t, x: x.nanmedian(), lambda t, x: x.quantile(0.5, 1),
    lambda t, x: x.nanquantile(0.5, 1), lambda t, x: x.nanquantile(0.2),
    lambda t, x: t.unique(x)])
def test_nan(fn):
    check(fn, dtypes=("float32",), args=[XN])


def test_all_nan_rows():
    x = np.array([[NAN, NAN, NAN], [1.0, NAN, 2.0]], "float32")
    check(lambda t, x: t.nanmedian(x, 1), dtypes=("float32",), args=[x])
    check(lambda t, x: t.nanquantile(x, 0.5, 1), dtypes=("float32",), args=[x])


def test_ties():
    x = np.array([[3, 1, 3, 1, 2], [5, 5, 4, 4, 6], [1, 1, 1, 1, 1]], "int64")
    check(lambda t, x: x.mode(1), dtypes=("int64", "float64"), args=[x])
    check(lambda t, x: x.sort(dim=1, stable=True), dtypes=("int64",), args=[x])
    check(lambda t, x: x.sort(dim=1, descending=True, stable=True), dtypes=("int64",), args=[x])
    check(lambda t, x: x.float().median(), dtypes=("int64",), args=[x])
    # full median of tied values spreads the grad evenly, as PyTorch
    check(lambda t, x: x.median(), dtypes=("float64",), grad=True,
          args=[np.array([[2.0, 1.0, 2.0], [2.0, 3.0, 0.0]])])


@pytest.mark.parametrize("interp", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_interpolation(interp):
    q = np.array([0.0, 0.25, 0.5, 0.9, 1.0], "float64")
    check(lambda t, x, q: t.quantile(x, q, dim=0, interpolation=interp), shapes=[(6, 3)],
          dtypes=("float64",), args=[make_array((6, 3), "float64", np.random.default_rng(1)), q])
    check(lambda t, x, q: t.nanquantile(x, q, interpolation=interp, keepdim=True),
          dtypes=("float64",), args=[make_array((2, 4), "float64", np.random.default_rng(2)), q])
    check(lambda t, x, q: t.quantile(x, q, dim=1, keepdim=True, interpolation=interp),
          dtypes=("float64",), args=[make_array((2, 5), "float64", np.random.default_rng(3)), q],
          grad=True)


# ---- unique / unique_consecutive / bincount ------------------------------------------------------
U = np.array([[3, 1, 2], [1, 3, 3], [3, 1, 2]], "int64")


@pytest.mark.parametrize("fn", [
    lambda t, x: t.unique(x), lambda t, x: x.unique(return_inverse=True),
    lambda t, x: t.unique(x, return_counts=True, return_inverse=True),
    lambda t, x: t.unique(x, dim=0, return_inverse=True, return_counts=True),
    lambda t, x: x.unique(dim=1, return_counts=True),
    lambda t, x: t.unique_consecutive(x), lambda t, x: x.unique_consecutive(return_counts=True),
    lambda t, x: t.unique_consecutive(x, return_inverse=True, return_counts=True, dim=0),
    lambda t, x: t.unique_consecutive(x.flatten(), return_inverse=True)])
def test_unique(fn):
    check(fn, dtypes=("int64", "float32", "bfloat16", "uint8"), args=[U])
    check(fn, dtypes=("bool",), args=[U > 1])


@pytest.mark.parametrize("fn", [
    lambda t, x: t.bincount(x), lambda t, x: x.bincount(minlength=12),
    lambda t, x: t.bincount(x, t.linspace(0, 1, 7)),
    lambda t, x: t.bincount(x, t.arange(7), 3),
    lambda t, x: t.bincount(x, t.ones(7, dtype=t.float64))])
def test_bincount(fn):
    check(fn, dtypes=("int64", "uint8", "int32"), args=[np.array([4, 1, 1, 0, 9, 4, 4])])


def test_bincount_empty():
    check(lambda t, x: t.bincount(x), dtypes=("int64",), args=[np.zeros(0, "int64")])


@pytest.mark.parametrize("fn", [
    lambda t: t.tensor([1.0, 2.0]).topk(3),
    lambda t: t.tensor([1.0, 2.0]).kthvalue(0),
    lambda t: t.tensor([1.0, 2.0]).kthvalue(3),
    lambda t: t.ones(2, 3).sort(2),
    lambda t: t.empty(0, 3).median(0),
    lambda t: t.empty(0, 3).mode(0),
    lambda t: t.tensor([1, 2]).quantile(0.5),
    lambda t: t.tensor([1.0, 2.0]).quantile(1.5),
    lambda t: t.tensor([1.0, 2.0]).quantile(t.tensor([0.5], dtype=t.float64)),
    lambda t: t.tensor([1.0, 2.0]).quantile(t.tensor([[0.5]])),
    lambda t: t.tensor([1.0, 2.0]).quantile(0.5, interpolation="foo"),
    lambda t: t.tensor([]).quantile(0.5),
    lambda t: t.tensor([1, -1]).bincount(),
    lambda t: t.tensor([[1, 1]]).bincount(),
    lambda t: t.tensor([1.0, 1.0]).bincount(),
    lambda t: t.tensor([1, 1]).bincount(minlength=-1),
    lambda t: t.tensor([1, 1]).bincount(t.ones(3)),
    lambda t: t.tensor([1, 2]).histc(3),
    lambda t: t.tensor([1.0, 2.0]).histc(0),
    lambda t: t.tensor([1.0, 2.0]).histc(3, min=3, max=1),
    lambda t: t.tensor([1.0, float("nan")]).histc(3),
])
def test_errors(fn):
    check_error(fn)


def test_return_types():
    r = ember.ones(3).sort()
    assert type(r).__name__ == "sort" and r._fields == ("values", "indices")
    assert type(ember.ones(3).topk(1)).__name__ == "topk"
    assert ember.ones(2, 3).median(1)._fields == ("values", "indices")


@pytest.mark.parametrize("name", ["unique", "unique_consecutive"])
@pytest.mark.parametrize("shape,dim", [((2, 0), 1), ((0, 3), 0), ((2, 3, 0), 2), ((0,), 0),
                                       ((3, 0), 0), ((0, 3), 1)])
def test_unique_dim_of_empty(name, shape, dim):
    """Empty results along the empty dim; PyTorch's error when another dim is empty."""
    def run(mod):
        return getattr(mod, name)(mod.zeros(shape), dim=dim, return_inverse=True,
                                  return_counts=True)
    try:
        t = run(torch)
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match="0 sized dimensions"):
            run(ember)
        assert "0 sized dimensions" in str(e)
        return
    e = run(ember)
    for a, b in zip(e, t):
        assert tuple(a.shape) == tuple(b.shape) and str(a.dtype)[6:] == str(b.dtype)[6:]
