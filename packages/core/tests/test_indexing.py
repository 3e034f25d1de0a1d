"""Indexing vs torch: __getitem__/__setitem__ over a matrix of index expressions (values,
shapes, strides, view-or-copy), the index/scatter/gather ops, and their errors."""
import numpy as np
import pytest
from harness import check, check_error, torch

import ember

# index expressions on a (4, 5, 6) tensor; `t` is the module, to build tensor indices
INDEX = [
    lambda t: 1,
    lambda t: -1,
    lambda t: (1, 2),
    lambda t: (1, 2, 3),
    lambda t: (-4, -5, -6),
    lambda t: slice(None),
    lambda t: slice(1, 3),
    lambda t: slice(None, None, 2),
    lambda t: (slice(-3, None), slice(None, -1, 3)),
    lambda t: (slice(10, 20),),
    lambda t: (slice(3, 1),),
    lambda t: (Ellipsis, 0),
    lambda t: (0, Ellipsis, 1),
    lambda t: Ellipsis,
    lambda t: None,
    lambda t: (None, 1, None, slice(None), None),
    lambda t: (Ellipsis, None),
    lambda t: True,
    lambda t: False,
    lambda t: (1, True, slice(2)),
    lambda t: t.tensor(2),
    lambda t: (t.tensor(1), t.tensor(-1)),
    lambda t: t.tensor(True),
    lambda t: t.tensor(False),
    lambda t: [0, 2],
    lambda t: [[0, 1], [2, 3]],
    lambda t: [],
    lambda t: t.tensor([3, 0, 3]),
    lambda t: t.tensor([3, 0, -1], dtype=t.int32),
    lambda t: (t.tensor([0, 1]), t.tensor([2, 3])),
    lambda t: (slice(None), t.tensor([0, 4]), t.tensor([1, 5])),
    lambda t: (t.tensor([0, 1]), slice(None), t.tensor([1, 5])),
    lambda t: (t.tensor([[0], [1]]), slice(1, 3), t.tensor([0, 2, 4])),
    lambda t: (1, slice(None), t.tensor([0, 2])),
    lambda t: (slice(None), 1, t.tensor([0, 2])),
    lambda t: (t.tensor([0, 2]), 1),
    lambda t: (t.tensor([0, 2]), 1, t.tensor([3, 4])),
    lambda t: (None, t.tensor([1, 2]), None, t.tensor([[0], [3]])),
    lambda t: (Ellipsis, t.tensor([0, 5])),
    lambda t: (t.tensor([True, False, True, False]),),
    lambda t: (t.arange(120).reshape(4, 5, 6) % 7 == 0),
    lambda t: (slice(None), t.arange(30).reshape(5, 6) > 20),
    lambda t: (t.tensor([True, False, True, True]), slice(None), t.tensor([0, 1, 2])),
    lambda t: (t.tensor([1, 3]), t.tensor([True, False, True, False, False])),
    lambda t: (slice(1, None, 2), [0, 1], slice(None, None, 3)),
    lambda t: (t.tensor([[1]]), Ellipsis, t.tensor([2])),
]


def _base(mod):
    return mod.arange(120.).reshape(4, 5, 6)


@pytest.mark.parametrize("i", range(len(INDEX)))
def test_getitem(i):
    eb, tb = _base(ember), _base(torch)
    e, t = eb[INDEX[i](ember)], tb[INDEX[i](torch)]
    assert tuple(e.shape) == tuple(t.shape)
    assert str(e.dtype) == "ember.float32"
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    t_view = t._is_view()
    assert (e.untyped_storage() is eb.untyped_storage()) == t_view, f"torch view: {t_view}"
    if t_view:
        assert e.stride() == t.stride() and e.storage_offset() == t.storage_offset()


@pytest.mark.parametrize("i", range(len(INDEX)))
def test_setitem_scalar_and_tensor(i):
    # a scalar, then a tensor of the indexed shape, then one that broadcasts
    eb, tb = _base(ember), _base(torch)
    eb[INDEX[i](ember)] = -1.5
    tb[INDEX[i](torch)] = -1.5
    np.testing.assert_array_equal(eb.numpy(), tb.numpy())
    shape = tuple(tb[INDEX[i](torch)].shape)
    vals = np.random.default_rng(i).uniform(-9, 9, size=shape).astype(np.float32)
    eb[INDEX[i](ember)] = ember.tensor(vals)
    tb[INDEX[i](torch)] = torch.tensor(vals)
    np.testing.assert_array_equal(eb.numpy(), tb.numpy())
    if shape:
        row = vals.reshape(-1, shape[-1])[:1] if vals.size else vals[..., :1]
        eb[INDEX[i](ember)] = ember.tensor(row)
        tb[INDEX[i](torch)] = torch.tensor(row)
        np.testing.assert_array_equal(eb.numpy(), tb.numpy())


def test_setitem_writes_through_views_and_bumps_version():
    e, t = ember.zeros(3, 4), torch.zeros(3, 4)
    ev, tv = e.t(), t.t()
    v0 = e._version
    ev[1] = 5.0
    tv[1] = 5.0
    ev[[0, 3], 2] = ember.tensor([7.0, 8.0])
    tv[[0, 3], 2] = torch.tensor([7.0, 8.0])
    ev[ev > 6] += 1  # getitem, add, setitem (index_put_) all on the same storage
    tv[tv > 6] += 1
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    assert e._version >= v0 + 3


def test_setitem_casts_and_strips_leading_ones():
    e, t = ember.zeros(3, 4, dtype=ember.int32), torch.zeros(3, 4, dtype=torch.int32)
    for idx, val in [(0, 2.7), ((slice(None), 1), [1, 2, 3]), (([0, 1], 2), 9.9)]:
        e[idx] = val
        t[idx] = torch.tensor(val) if isinstance(val, list) else val
    e[1] = ember.ones(1, 1, 4)
    t[1] = torch.ones(1, 1, 4)
    e[[2]] = ember.full((1, 1, 4), 3, dtype=ember.int32)
    t[[2]] = torch.full((1, 1, 4), 3, dtype=torch.int32)
    np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_setitem_zero_dim_and_iteration():
    e, t = ember.tensor(1.0), torch.tensor(1.0)
    e[...] = 3.0
    t[...] = 3.0
    e[()] += 1
    t[()] += 1
    assert e.item() == t.item()
    assert [r.tolist() for r in ember.arange(6).view(3, 2)] == \
        [r.tolist() for r in torch.arange(6).view(3, 2)]


INDEX_ERRORS = [
    lambda t, x: x[5],
    lambda t, x: x[0, 0, 0, 0],
    lambda t, x: x[::-1],
    lambda t, x: x[:, ::0],
    lambda t, x: x[[5]],
    lambda t, x: x[:, [7]],
    lambda t, x: x[t.tensor([-5])],
    lambda t, x: x[t.tensor([1.0])],
    lambda t, x: x[1.5],
    lambda t, x: x[t.tensor([True, False])],
    lambda t, x: x[t.tensor([0, 1]), t.tensor([0, 1, 2])],
    lambda t, x: x.__setitem__((t.tensor([0, 1]),), t.ones(3)),
    lambda t, x: x.__setitem__(0, t.ones(3)),
    lambda t, x: x.index_put_((t.tensor([0, 1]),), t.ones(6, dtype=t.long)),
]


@pytest.mark.parametrize("i", range(len(INDEX_ERRORS)))
def test_index_errors(i):
    check_error(lambda t: INDEX_ERRORS[i](t, _base(t)))


def test_index_error_message():
    check_error(lambda t: t.ones(3)[5], match="index 5 is out of bounds for dimension 0 with "
                                              "size 3")
    check_error(lambda t: t.ones(3)[[5]], match="index 5 is out of bounds for dimension 0 with "
                                                "size 3")
    check_error(lambda t: t.ones(3)[::-1], match="step must be greater than zero")


# ---- ops -------------------------------------------------------------------------------------
def _i(*a):
    return np.array(a, dtype=np.int64)


OPS = {
    "index_select": (lambda t, x: x.index_select(1, t.tensor([0, 2, 2])), [(3, 4)]),
    "index_select_neg": (lambda t, x: t.index_select(x, -1, t.tensor([3, 0])), [(3, 4)]),
    "index_select_0d": (lambda t, x: x[0, 0].index_select(0, t.tensor([0])), [(3, 4)]),
    "gather": (lambda t, x: x.gather(1, t.tensor([[0, 0], [1, 3], [2, 1]])), [(3, 4)]),
    "gather_small": (lambda t, x: t.gather(x, 0, t.tensor([[2, 0]])), [(3, 4)]),
    "scatter": (lambda t, x, y: x.scatter(0, t.tensor([[1, 2, 0, 1]]), y), [(3, 4), (2, 4)]),
    "scatter_value": (lambda t, x: x.scatter(1, t.tensor([[1], [0], [3]]), 2.5), [(3, 4)]),
    "scatter_value_kw": (lambda t, x: x.scatter(1, t.tensor([[1], [3]]), value=-1), [(3, 4)]),
    "scatter_add_reduce": (lambda t, x, y: x.scatter(0, t.tensor([[1, 1], [1, 0]]), y,
                                                     reduce="add"), [(3, 4), (2, 4)]),
    "scatter_mul_reduce": (lambda t, x: x.scatter(0, t.tensor([[1, 1]]), 2.0,
                                                  reduce="multiply"), [(3, 4)]),
    "scatter_add": (lambda t, x, y: x.scatter_add(0, t.tensor([[1, 1, 0, 2], [1, 1, 1, 1]]), y),
                    [(3, 4), (2, 4)]),
    "index_add": (lambda t, x, y: x.index_add(0, t.tensor([2, 2]), y), [(3, 4), (2, 4)]),
    "index_add_alpha": (lambda t, x, y: t.index_add(x, 1, t.tensor([3, 0]), y.t()[:3], alpha=2),
                        [(3, 4), (2, 4)]),
    "index_copy": (lambda t, x, y: x.index_copy(0, t.tensor([2, 0]), y), [(3, 4), (2, 4)]),
    "index_fill": (lambda t, x: x.index_fill(1, t.tensor([0, 3]), -2), [(3, 4)]),
    "index_fill_tensor": (lambda t, x: x.index_fill(0, t.tensor([1]), t.tensor(7)), [(3, 4)]),
    "index_put": (lambda t, x, y: x.index_put((t.tensor([0, 2]), t.tensor([1, 1])), y[0, :2]),
                  [(3, 4), (2, 4)]),
    "index_put_acc": (lambda t, x, y: t.index_put(x, (t.tensor([0, 0, 2]),), y[:1], True),
                      [(3, 4), (2, 4)]),
    "index_put_2d": (lambda t, x, y: x.index_put((t.tensor([[1], [0]]),), y[:1]),
                     [(3, 4), (2, 4)]),
    "masked_select": (lambda t, x: x.masked_select(x > 0), [(3, 4)]),
    "masked_select_bcast": (lambda t, x: t.masked_select(x, t.tensor([True, False, True, True])),
                            [(3, 4)]),
    "masked_scatter": (lambda t, x, y: x.masked_scatter(x > 0, y), [(3, 4), (3, 4)]),
    "take": (lambda t, x: x.take(t.tensor([[0, 11], [-1, 5]])), [(3, 4)]),
    "take_along_dim": (lambda t, x: t.take_along_dim(x, x.argsort(1)[:, :2], 1), [(3, 4)]),
    "take_along_dim_flat": (lambda t, x: x.take_along_dim(t.tensor([0, 5, 11])), [(3, 4)]),
    "take_along_dim_bcast": (lambda t, x: t.take_along_dim(x, t.tensor([[1, 0]]), 1), [(3, 4)]),
    "put": (lambda t, x, y: x.put(t.tensor([0, 5]), y[0, :2]), [(3, 4), (2, 4)]),
    "put_acc": (lambda t, x, y: x.put(t.tensor([1, 1]), y[0, :2], accumulate=True),
                [(3, 4), (2, 4)]),
    "nonzero": (lambda t, x: t.nonzero(x > 0), [(3, 4)]),
    "nonzero_tuple": (lambda t, x: t.nonzero(x > 0, as_tuple=True), [(3, 4)]),
    "nonzero_method": (lambda t, x: (x > 0).nonzero(), [(3, 4)]),
    "nonzero_0d": (lambda t, x: t.nonzero(x[0, 0] != 100, as_tuple=True), [(3, 4)]),
    "argwhere": (lambda t, x: t.argwhere(x > 1), [(3, 4)]),
    "searchsorted": (lambda t, x: t.searchsorted(t.tensor([-2., 0., 0., 1.5]), x), [(3, 4)]),
    "searchsorted_right": (lambda t, x: t.searchsorted(t.tensor([-2., 0., 1.5]), x, right=True),
                           [(3, 4)]),
    "searchsorted_side": (lambda t, x: t.searchsorted(t.tensor([-2., 0., 1.5]), x, side="right",
                                                      out_int32=True), [(3, 4)]),
    "searchsorted_nd": (lambda t, x: t.searchsorted(x.sort(1).values, x[:, :2]), [(3, 4)]),
    "searchsorted_sorter": (lambda t, x: t.searchsorted(x[0], x[1], sorter=x[0].argsort()),
                            [(3, 4)]),
    "searchsorted_scalar": (lambda t, x: t.searchsorted(t.tensor([1., 2., 3.]), 2.5), [(3, 4)]),
    "bucketize": (lambda t, x: t.bucketize(x, t.tensor([-1., 0., 2.])), [(3, 4)]),
    "bucketize_right": (lambda t, x: t.bucketize(x, t.tensor([-1., 0., 2.]), right=True), [(3, 4)]),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops(name):
    fn, shapes = OPS[name]
    check(fn, shapes=shapes, dtypes=("float32",))


@pytest.mark.parametrize("dtype", ["int64", "bool", "float64", "bfloat16"])
def test_ops_dtypes(dtype):
    check(lambda t, x: x.index_select(0, t.tensor([1, 0])), shapes=[(3, 4)], dtypes=(dtype,))
    check(lambda t, x: x.gather(0, t.tensor([[1, 0]])), shapes=[(3, 4)], dtypes=(dtype,))
    check(lambda t, x: x[t.tensor([2, 0]), 1:], shapes=[(3, 4)], dtypes=(dtype,))
    check(lambda t, x, y: x.scatter(1, t.tensor([[0], [2], [1]]), y), shapes=[(3, 4), (3, 1)],
          dtypes=(dtype,))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    idx = torch.tensor([[0, 1, 0, 2], [2, 2, 0, 0]])
    for dtype in ("float32", "int64"):
        check(lambda t, x, y: x.scatter_reduce(0, t.tensor(idx.tolist()), y, reduce,
                                               include_self=include_self),
              shapes=[(3, 4), (2, 4)], dtypes=(dtype,))


def test_inplace_variants():
    def f(t, x, y):
        x = x.clone()
        idx = t.tensor([[1, 0, 2, 1]])
        r = [x.scatter_(0, idx, y[:1]) is x, x.clone()]
        x.scatter_add_(0, idx, y[:1])
        r.append(x.clone())
        x.scatter_reduce_(0, idx, y[:1], "amax")
        r.append(x.clone())
        x.index_add_(1, t.tensor([3]), y[:, :1].t().repeat(3, 1)[:, :1] if False else
                     y[0:1, :3].t())
        r.append(x.clone())
        x.index_copy_(0, t.tensor([2]), y[:1])
        x.index_fill_(1, t.tensor([0]), 9.0)
        x.masked_scatter_(x > 1, y)
        x.put_(t.tensor([1]), y[0, :1])
        t.index_put_(x, (t.tensor([0]), t.tensor([2])), y[0, 3], accumulate=True)
        r.append(x)
        return r
    check(f, shapes=[(3, 4), (2, 4)])


OP_ERRORS = [
    lambda t: t.ones(3, 4).index_select(0, t.tensor([[0]])),
    lambda t: t.ones(3, 4).index_select(0, t.tensor([0.])),
    lambda t: t.ones(3, 4).index_select(0, t.tensor([5])),
    lambda t: t.ones(3, 4).gather(0, t.tensor([5])),
    lambda t: t.ones(3, 4).gather(0, t.tensor([[5]])),
    lambda t: t.ones(3, 4).gather(0, t.zeros(2, 5, dtype=t.long)),
    lambda t: t.ones(3, 4).scatter(0, t.zeros(2, 5, dtype=t.long), t.ones(2, 5)),
    lambda t: t.ones(3, 4).scatter(0, t.zeros(2, 3, dtype=t.long), t.ones(2, 2)),
    lambda t: t.ones(3, 4).scatter(0, t.tensor([[5]]), t.ones(2, 2)),
    lambda t: t.ones(3, 4).scatter(0, t.tensor([[1]]), t.ones(2, 2, dtype=t.long)),
    lambda t: t.ones(3, 4).scatter_reduce(0, t.tensor([[0]]), t.ones(1, 1), "foo"),
    lambda t: t.ones(3, 4).take(t.tensor([12])),
    lambda t: t.ones(3, 4).index_add(0, t.tensor([0]), t.ones(2, 4)),
    lambda t: t.ones(3, 4).index_copy(0, t.tensor([0]), t.ones(2, 4)),
    lambda t: t.ones(3, 4).index_fill(0, t.tensor([5]), 1.),
    lambda t: t.ones(3, 4).masked_scatter(t.ones(3, 4, dtype=t.bool), t.ones(3)),
    lambda t: t.searchsorted(t.tensor([1, 3, 5]), t.tensor([3]), right=True, side="left"),
    lambda t: t.bucketize(t.tensor([3]), t.ones(2, 2)),
    lambda t: t.ones(3).put_(t.tensor([0, 1]), t.ones(3)),
    lambda t: t.ones(3).index_select(0, t.tensor([-1])),
    lambda t: t.ones(3).__setitem__([0], t.ones(1, dtype=t.float64)),
]


@pytest.mark.parametrize("i", range(len(OP_ERRORS)))
def test_op_errors(i):
    check_error(OP_ERRORS[i])


# ---- gradients (vjps) vs torch ----------------------------------------------------------------
GRADS = {
    "getitem_basic": (lambda t, x: x[1:, None, ::2], [(3, 4)]),
    "getitem_int": (lambda t, x: x[1, -1], [(3, 4)]),
    "getitem_adv": (lambda t, x: x[t.tensor([0, 2, 0]), 1:], [(3, 4)]),
    "getitem_adv_sep": (lambda t, x: x[t.tensor([0, 2, 0]), :, t.tensor([1])], [(3, 4, 2)]),
    "getitem_mask": (lambda t, x: x[x > 0], [(3, 4)]),
    "setitem": (lambda t, x, y: _set(x, y, (slice(None), t.tensor([1, 3]))), [(3, 4), (3, 2)]),
    "setitem_basic": (lambda t, x, y: _set(x, y[:, 0], (slice(None), 2)), [(3, 4), (3, 2)]),
    "index_put": (lambda t, x, y: x.index_put((t.tensor([0, 2]),), y[:2]), [(3, 2), (3, 2)]),
    "index_put_acc": (lambda t, x, y: x.index_put((t.tensor([0, 0]),), y[:2], True),
                      [(3, 2), (3, 2)]),
    "index_select": (lambda t, x: x.index_select(1, t.tensor([0, 0, 3])), [(3, 4)]),
    "gather": (lambda t, x: x.gather(1, t.tensor([[0, 0], [3, 1], [2, 2]])), [(3, 4)]),
    "scatter": (lambda t, x, y: x.scatter(1, t.tensor([[0, 2], [3, 1], [1, 0]]), y),
                [(3, 4), (3, 2)]),
    "scatter_value": (lambda t, x: x.scatter(1, t.tensor([[0], [3], [1]]), 1.5), [(3, 4)]),
    "scatter_add": (lambda t, x, y: x.scatter_add(1, t.tensor([[0, 0], [3, 1], [1, 1]]), y),
                    [(3, 4), (3, 2)]),
    "index_add": (lambda t, x, y: x.index_add(0, t.tensor([2, 2, 0]), y, alpha=3),
                  [(3, 2), (3, 2)]),
    "index_copy": (lambda t, x, y: x.index_copy(0, t.tensor([2, 0]), y[:2]), [(3, 2), (3, 2)]),
    "index_fill": (lambda t, x: x.index_fill(1, t.tensor([1]), 2.0), [(3, 2)]),
    "masked_select": (lambda t, x, y: x.masked_select(y > 0), [(3, 4), (4,)]),
    "masked_scatter": (lambda t, x, y: x.masked_scatter(x > 0, y), [(3, 4), (3, 4)]),
    "take": (lambda t, x: x.take(t.tensor([[0, 5], [5, 11]])), [(3, 4)]),
    "put": (lambda t, x, y: x.put(t.tensor([0, 5]), y[0]), [(3, 4), (1, 2)]),
    "put_acc": (lambda t, x, y: x.put(t.tensor([5, 5]), y[0], accumulate=True), [(3, 4), (1, 2)]),
    "take_along_dim": (lambda t, x: t.take_along_dim(x, t.tensor([[1], [0], [3]]), 1), [(3, 4)]),
}


def _set(x, y, idx):
    z = x * 1  # a non-leaf to write into
    z[idx] = y
    return z


@pytest.mark.parametrize("name", sorted(GRADS))
def test_grads(name):
    fn, shapes = GRADS[name]
    check(fn, shapes=shapes, dtypes=("float64",), grad=True)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_grad(reduce, include_self):
    idx = [[0, 1, 0, 2], [2, 2, 0, 0]]
    check(lambda t, x, y: x.scatter_reduce(0, t.tensor(idx), y, reduce, include_self=include_self),
          shapes=[(3, 4), (2, 4)], dtypes=("float64",), grad=True, low=0.5, high=2.0)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_scatter_reduce_low_precision_without_self(reduce, dtype):
    """bfloat16/float16 reduce in float32 (bfloat16 is numpy kind 'V' through ml-dtypes)."""
    def run(mod):
        x = mod.tensor([1.0, 2.0, 3.0, 4.0]).to(getattr(mod, dtype))
        src = mod.tensor([5.0, 1.0, 2.0, 8.0, -3.0]).to(getattr(mod, dtype))
        return x.scatter_reduce(0, mod.tensor([0, 1, 0, 1, 3]), src, reduce, include_self=False)
    e, t = run(ember), run(torch)
    assert str(e.dtype)[6:] == str(t.dtype)[6:]
    np.testing.assert_allclose(e.float().numpy(), t.float().numpy(), rtol=1e-2)
