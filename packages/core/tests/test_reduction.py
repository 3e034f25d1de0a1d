"""Reductions, scans and softmax against torch: one record per case drives the forward,
gradient and meta tests; targeted tests cover NaN, ties, empty tensors, out= and errors."""
from collections import namedtuple

import numpy as np
import pytest
from harness import ALL, FLOATS, LOWP, check, check_error, make_array, to_ember, to_torch, torch

import ember

Rec = namedtuple("Rec", "id fn shapes dtypes grad meta low high rtol atol")
NUM = ALL[1:]                 # every dtype but bool
FL = FLOATS + LOWP


def rec(id, fn, shapes=((3, 4),), dtypes=FLOATS, grad=True, meta=True, low=None, high=None,
        rtol=None, atol=None):
    return Rec(id, fn, shapes, dtypes, grad, meta, low, high, rtol, atol)


RECORDS = [
    # sum / nansum / mean / nanmean / prod
    rec("sum", lambda t, x: x.sum(), dtypes=ALL),
    rec("sum_dim", lambda t, x: t.sum(x, 1), dtypes=ALL),
    rec("sum_neg_keepdim", lambda t, x: x.sum(-1, keepdim=True), shapes=[(2, 3, 4)]),
    rec("sum_tuple", lambda t, x: x.sum((0, -1)), shapes=[(2, 3, 4)], dtypes=FL + ("int32",)),
    rec("sum_dtype", lambda t, x: x.sum(0, dtype=t.float64), dtypes=("int32", "float32")),
    rec("sum_0d", lambda t, x: x.sum(0, keepdim=True), shapes=[()]),
    rec("nansum", lambda t, x: t.nansum(x, 0), dtypes=FL + ("int64",)),
    rec("mean", lambda t, x: x.mean(), dtypes=FL),
    rec("mean_dims", lambda t, x: x.mean((0, 2), True), shapes=[(2, 3, 4)], dtypes=FL),
    rec("mean_int_dtype", lambda t, x: x.mean(1, dtype=t.float32), dtypes=("int64",)),
    rec("nanmean", lambda t, x: t.nanmean(x, 1)),
    rec("prod", lambda t, x: x.prod(), low=0.5, high=1.5, dtypes=ALL),
    rec("prod_dim", lambda t, x: x.prod(1, keepdim=True), low=0.5, high=2, dtypes=FL),
    rec("prod_int", lambda t, x: t.prod(x, 0), dtypes=("bool", "uint8", "int32"), grad=False),
    # max / min / amax / argmax / aminmax
    rec("max", lambda t, x: x.max(), dtypes=ALL),
    rec("min", lambda t, x: t.min(x), dtypes=ALL),
    rec("max_dim", lambda t, x: x.max(1), dtypes=NUM),
    rec("min_dim_keep", lambda t, x: t.min(x, dim=-2, keepdim=True), shapes=[(2, 3, 4)]),
    rec("max_binary", lambda t, x, y: t.max(x, y), shapes=[(3, 4), (4,)]),
    rec("max_0d_dim", lambda t, x: x.max(0), shapes=[()]),
    rec("amax", lambda t, x: x.amax((0, 2)), shapes=[(2, 3, 4)], dtypes=NUM),
    rec("amin", lambda t, x: t.amin(x, -1, True), dtypes=NUM),
    rec("amax_all", lambda t, x: x.amax()),
    rec("argmax", lambda t, x: x.argmax(), dtypes=NUM, grad=False),
    rec("argmin_dim", lambda t, x: t.argmin(x, 1, keepdim=True), dtypes=NUM, grad=False),
    rec("argmax_keep_all", lambda t, x: x.argmax(keepdim=True), grad=False),
    rec("aminmax", lambda t, x: t.aminmax(x, dim=0), dtypes=NUM),
    rec("aminmax_keep", lambda t, x: t.aminmax(x, keepdim=True)),
    # var / std / norm / logsumexp
    rec("var", lambda t, x: x.var(), dtypes=FL),
    rec("var_dim", lambda t, x: t.var(x, 1, keepdim=True)),
    rec("var_correction", lambda t, x: x.var((0, 1), correction=0), shapes=[(2, 3, 4)]),
    rec("var_unbiased_pos", lambda t, x: x.var(1, False, True)),
    rec("std", lambda t, x: x.std(0), dtypes=FL),
    rec("std_legacy_bool", lambda t, x: x.std(False)),
    rec("var_mean", lambda t, x: t.var_mean(x, 1)),
    rec("std_mean", lambda t, x: t.std_mean(x, dim=(0,), correction=2)),
    rec("norm", lambda t, x: x.norm(), dtypes=FL),
    rec("norm_p1_dim", lambda t, x: t.norm(x, 1, 1)),
    rec("norm_p3", lambda t, x: x.norm(p=3, dim=0, keepdim=True)),
    rec("norm_p05", lambda t, x: x.norm(p=0.5), low=0.1, high=2),
    rec("norm_inf", lambda t, x: x.norm(float("inf"), 1)),
    rec("norm_ninf", lambda t, x: x.norm(float("-inf"))),
    rec("norm_p0", lambda t, x: x.norm(0, 1)),
    rec("norm_fro_dims", lambda t, x: x.norm("fro", (0, 1))),
    rec("norm_dtype", lambda t, x: x.norm(dtype=t.float32), dtypes=("float16",), grad=False),
    rec("dist", lambda t, x, y: t.dist(x, y, 3), shapes=[(3, 4), (4,)]),
    rec("logsumexp", lambda t, x: x.logsumexp(1), dtypes=FL),
    rec("logsumexp_dims", lambda t, x: t.logsumexp(x, (0, 2), True), shapes=[(2, 3, 4)]),
    rec("logsumexp_int", lambda t, x: x.logsumexp(0), dtypes=("int64",)),
    # scans
    rec("cumsum", lambda t, x: x.cumsum(1), dtypes=ALL),
    rec("cumsum_dtype", lambda t, x: t.cumsum(x, 0, dtype=t.float64)),
    rec("cumprod", lambda t, x: x.cumprod(-1), low=0.5, high=1.5, dtypes=FL + ("int32",)),
    rec("cummax", lambda t, x: x.cummax(0), dtypes=NUM),
    rec("cummin", lambda t, x: t.cummin(x, -1), dtypes=NUM),
    rec("logcumsumexp", lambda t, x: x.logcumsumexp(1), dtypes=FL),
    rec("scan_0d", lambda t, x: x.cumsum(0), shapes=[()]),
    # all / any / count_nonzero
    rec("all", lambda t, x: x.all(), dtypes=ALL, grad=False, low=0, high=3),
    rec("any_dim", lambda t, x: t.any(x, 1, keepdim=True), dtypes=ALL, grad=False, low=0,
        high=2),
    rec("all_tuple", lambda t, x: x.all((0, 1)), shapes=[(2, 3, 4)], dtypes=("bool", "uint8"),
        grad=False),
    rec("count_nonzero", lambda t, x: t.count_nonzero(x, (0, 1)), dtypes=ALL, grad=False,
        low=-1, high=2, shapes=[(2, 3, 4)]),
    # softmax
    rec("softmax", lambda t, x: x.softmax(1), dtypes=FL),
    rec("log_softmax", lambda t, x: t.log_softmax(x, 0), dtypes=FL),
    rec("softmax_dtype", lambda t, x: t.softmax(x, -1, dtype=t.float64), dtypes=("float32",)),
    rec("F_softmax", lambda t, x: t.nn.functional.softmax(x, dim=-1), shapes=[(2, 3, 4)]),
    rec("F_log_softmax", lambda t, x: t.nn.functional.log_softmax(x, 1), shapes=[(2, 3, 4)]),
    rec("softmax_big", lambda t, x: (x * 1000).softmax(1)),
    # diff
    rec("diff", lambda t, x: t.diff(x), dtypes=("float32", "int64", "bool")),
    rec("diff_n2_dim0", lambda t, x: x.diff(2, 0), shapes=[(4, 3)]),
]
IDS = [r.id for r in RECORDS]


@pytest.mark.parametrize("r", RECORDS, ids=IDS)
def test_forward(r):
    check(r.fn, shapes=r.shapes, dtypes=r.dtypes, low=r.low, high=r.high, rtol=r.rtol,
          atol=r.atol)


@pytest.mark.parametrize("r", [r for r in RECORDS if r.grad], ids=[r.id for r in RECORDS
                                                                   if r.grad])
def test_grad(r):
    check(r.fn, shapes=r.shapes, dtypes=("float64",), low=r.low, high=r.high, grad=True)


def _meta_shapes(o):
    if isinstance(o, (tuple, list)):
        return [_meta_shapes(x) for x in o]
    return tuple(o.shape), str(o.dtype).split(".")[-1]


@pytest.mark.parametrize("r", [r for r in RECORDS if r.meta], ids=[r.id for r in RECORDS
                                                                   if r.meta])
def test_meta(r):
    dtype = r.dtypes[0]
    rng = np.random.default_rng(0)
    arrays = [make_array(s, dtype, rng) for s in r.shapes]
    eo = r.fn(ember, *[to_ember(a, dtype).to("meta") for a in arrays])
    to = r.fn(torch, *[to_torch(a, dtype) for a in arrays])  # real run: the shapes
    assert _meta_shapes(eo) == _meta_shapes(to)
    assert all(x.device.type == "meta" for x in (eo if isinstance(eo, tuple) else (eo,)))


# ---- NaN, ties, empty tensors ------------------------------------------------------------------
NAN = float("nan")
XN = np.array([[1.0, NAN, 3.0, 2.0], [5.0, 1.0, 0.0, 5.0], [NAN, 2.0, NAN, 1.0]], "float32")
XT = np.array([[1.0, 3.0, 3.0, 2.0], [4.0, 4.0, 0.0, 4.0]], "float64")


@pytest.mark.parametrize("fn", [
    lambda t, x: x.max(), lambda t, x: x.min(1), lambda t, x: x.amax(0), lambda t, x: x.argmax(1),
    lambda t, x: x.argmin(), lambda t, x: x.cummax(1), lambda t, x: x.cummin(0),
    lambda t, x: x.sum(1), lambda t, x: t.nansum(x, 1), lambda t, x: t.nanmean(x),
    lambda t, x: x.logsumexp(1), lambda t, x: x.softmax(1), lambda t, x: x.var(1),
    lambda t, x: x.norm(dim=1), lambda t, x: x.logcumsumexp(1)])
def test_nan(fn):
    check(fn, dtypes=("float32",), args=[XN])


@pytest.mark.parametrize("fn", [
    lambda t, x: x.max(), lambda t, x: x.amax(1), lambda t, x: x.amin(), lambda t, x: x.max(1),
    lambda t, x: x.min(0, True), lambda t, x: x.norm(float("inf"), 1), lambda t, x: x.cummax(1),
    lambda t, x: x.prod(1), lambda t, x: x.cumprod(1), lambda t, x: x.prod()])
def test_ties_and_zeros_grad(fn):
    # evenly split grads among ties (full max, amax, inf-norm); grads through zeros (prod)
    check(fn, dtypes=("float64",), args=[XT], grad=True)
    check(fn, dtypes=("float64",), args=[np.array([[1.0, 0.0, 3.0], [0.0, 2.0, 0.0]])],
          grad=True)


@pytest.mark.parametrize("fn", [lambda t, x: x.std(1), lambda t, x: x.norm(dim=1),
                                lambda t, x: x.norm(3, 1), lambda t, x: x.norm(0.5, 1),
                                lambda t, x: t.std_mean(x, 1)])
def test_grad_at_zero_spread(fn):
    # constant or all-zero rows: PyTorch's backward masks the 0/0 to 0
    check(fn, dtypes=("float64",), args=[np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0],
                                                   [1.0, 2.0, 3.0]])], grad=True)


def test_logsumexp_inf():
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [1000.0, 1000.0]], "float32")
    check(lambda t, x: x.logsumexp(1), dtypes=("float32",), args=[x])


@pytest.mark.parametrize("fn", [
    lambda t, x: x.sum(), lambda t, x: x.sum(0), lambda t, x: x.prod(1), lambda t, x: x.mean(),
    lambda t, x: x.max(1), lambda t, x: x.amax(1), lambda t, x: x.all(), lambda t, x: x.any(0),
    lambda t, x: x.logsumexp(0), lambda t, x: x.norm(), lambda t, x: x.cumsum(0),
    lambda t, x: x.softmax(0), lambda t, x: x.argmax(1), lambda t, x: x.count_nonzero()])
def test_empty(fn):
    check(fn, shapes=[(0, 3)], dtypes=("float32",))


def test_var_few_elements():
    with pytest.warns(UserWarning, match="degrees of freedom"):
        check(lambda t, x: x.var(), shapes=[(1,)], dtypes=("float32",))


@pytest.mark.parametrize("fn", [
    lambda t: t.ones(2, 3, dtype=t.long).mean(),
    lambda t: t.ones(2, 3, dtype=t.long).nanmean(),
    lambda t: t.empty(0, 3).max(),
    lambda t: t.empty(0, 3).min(0),
    lambda t: t.empty(0, 3).amax(0),
    lambda t: t.empty(0, 3).argmax(),
    lambda t: t.ones(2, 3).sum(2),
    lambda t: t.ones(2, 3).sum((0, -2)),
    lambda t: t.ones(2, 3).max(-3),
    lambda t: t.ones(2, 3).cumsum(2),
    lambda t: t.ones(2, 3).softmax(5),
    lambda t: t.ones(2, 3, dtype=t.bool).argmax(),
    lambda t: t.ones(2, 3, dtype=t.int32).var(),
    lambda t: t.ones(2, 3, dtype=t.int32).std(1),
    lambda t: t.ones(2, 3, dtype=t.int32).norm(),
    lambda t: t.ones(2, 3, dtype=t.int32).softmax(0),
    lambda t: t.ones(2, 3, dtype=t.int32).logcumsumexp(0),
    lambda t: t.ones(2, 3).prod((0, 1)),
    lambda t: t.diff(t.tensor(1.0)),
])
def test_errors(fn):
    check_error(fn)


def test_error_messages():
    with pytest.raises(RuntimeError, match=r"mean\(\): could not infer output dtype.*Got: Long"):
        ember.ones(2, dtype=ember.long).mean()
    with pytest.raises(RuntimeError, match="Specify the reduction dim with the 'dim' argument"):
        ember.empty(0).max()
    with pytest.raises(IndexError, match=r"range of \[-2, 1\], but got 2"):
        ember.ones(2, 3).sum(2)


def test_out():
    f32 = ("float32",)  # torch's reductions want out= of the result dtype exactly
    check(lambda t, x: t.sum(x, 1, out=t.empty(0)), dtypes=f32)
    check(lambda t, x: t.max(x, 1, out=(t.empty(0), t.empty(0, dtype=t.long))), dtypes=f32)
    check(lambda t, x: t.cumsum(x, 0, out=t.empty(3, 4)), dtypes=f32)
    check(lambda t, x: t.amax(x, 0, out=t.empty(4)), dtypes=f32)
    check(lambda t, x: t.logsumexp(x, 1, out=t.empty(3)), dtypes=f32)


def test_overload_keywords():
    check(lambda t, x: t.max(input=x))
    check(lambda t, x: t.min(input=x, dim=1, keepdim=True))
    check(lambda t, x, y: t.max(x, other=y), shapes=[(3, 4), (3, 4)])
    check(lambda t, x: t.median(input=x, dim=0))


def test_return_types():
    r = ember.ones(2, 3).max(1)
    assert type(r).__name__ == "max" and r._fields == ("values", "indices")
    v, i = ember.ones(2, 3).cummax(0)
    assert i.dtype == ember.int64
    assert ember.aminmax(ember.ones(2))._fields == ("min", "max")


def test_double_backward():
    # vjps are ember ops, so their own graph can be differentiated
    for fn in (lambda t, x: x.softmax(1), lambda t, x: x.logsumexp(1), lambda t, x: x.var(0),
               lambda t, x: x.norm(dim=1), lambda t, x: x.prod(1)):
        outs = []
        for t in (ember, torch):
            x = t.tensor([[0.5, -1.0, 2.0], [1.5, 0.3, -0.7]], dtype=t.float64,
                         requires_grad=True)
            (g,) = t.autograd.grad((fn(t, x) ** 2).sum(), x, create_graph=True)
            (gg,) = t.autograd.grad((g * g).sum(), x)
            outs.append(gg.detach().numpy())
        np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("fn", [
    lambda t, y, x: t.trapezoid(y), lambda t, y, x: t.trapezoid(y, x),
    lambda t, y, x: t.trapezoid(y, dx=0.5, dim=0), lambda t, y, x: t.trapz(y, x, dim=-1),
    lambda t, y, x: t.cumulative_trapezoid(y, x), lambda t, y, x: t.cumulative_trapezoid(y, dim=0),
    lambda t, y, x: t.cov(y), lambda t, y, x: t.cov(y[0]), lambda t, y, x: t.cov(y, correction=0),
    lambda t, y, x: t.cov(y, aweights=x.abs()),
    lambda t, y, x: t.cov(y, fweights=t.tensor([1, 2, 0, 3]), aweights=x.abs(), correction=2),
    lambda t, y, x: t.corrcoef(y), lambda t, y, x: t.corrcoef(y[1])])
def test_trapezoid_cov(fn):
    check(fn, shapes=[(3, 4), (4,)], grad=True)


def test_trapezoid_cov_ints_and_errors():
    check(lambda t, y: t.trapezoid(y), dtypes=("int64",))
    check(lambda t, y: t.cov(y), dtypes=("int64",))
    check_error(lambda t: t.cov(t.ones(2, 2, 2)))
    check_error(lambda t: t.cov(t.ones(2, 3), fweights=t.ones(3)))
    check_error(lambda t: t.cov(t.ones(2, 3), aweights=t.ones(2)))
