"""Symbolic sizes: the ShapeEnv's guards, and make_fx(tracing_mode="symbolic") over workloads
and over core's whole op database, each graph re-run on other sizes against eager."""
import numpy as np
import pytest
from opdb import RECORDS, DType, Samples
from test_op_table import DATA_DEPENDENT

import ember
import ember.nn as nn
from ember._ops import OPS
from ember._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
from ember.fx.experimental.proxy_tensor import make_fx, sym_size
from ember.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, ShapeEnv, SymInt


def test_shape_env_specializes_zero_one_and_duck_shapes():
    env = ShapeEnv()
    a, b, one = env.create_symint(5, ("x", 0)), env.create_symint(5, ("y", 1)), \
        env.create_symint(1, ("x", 1))
    assert one == 1 and type(one) is int
    assert isinstance(a, SymInt) and str(a) == str(b) == "s0"
    assert str(a * 2 - 1) == "2*s0 - 1" and (a - a) == 0
    assert not bool(a == 1) and bool(a >= 2) and not env.guards  # the range decides
    assert bool(a < 7) and env.format_guards() == ["L['x'].size()[0] < 7"]
    assert int(a) == 5 and env.format_guards()[-1] == "L['x'].size()[0] == 5"
    assert env.evaluate_guards({("x", 0): 5}) and not env.evaluate_guards({("x", 0): 6})
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)


def _rand(*shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_mlp_symbolic_batch():
    ember.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))

    def f(x):
        return mlp(x).softmax(-1).view(x.shape[0] * 2, -1)
    gm = make_fx(f, tracing_mode="symbolic")(_rand(5, 8))
    assert gm.shape_env.format_guards() == ["L['x'].size()[1] == 8"]
    assert sym_size in [n.target for n in gm.graph.nodes]
    for batch in (3, 9):
        x = _rand(batch, 8, seed=batch)
        np.testing.assert_allclose(gm(x).detach().numpy(), f(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_attention_symbolic_sizes():
    def attn(q, k, v):
        scores = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5   # (B, H, T, T)
        mask = ember.ones(q.shape[-2], k.shape[-2]).tril().bool()
        return scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v
    gm = make_fx(attn, tracing_mode="symbolic")(*(_rand(2, 3, 5, 4, seed=i) for i in range(3)))
    assert gm.shape_env.guards == []
    q, k, v = (_rand(3, 2, 7, 6, seed=i) for i in range(3, 6))
    np.testing.assert_allclose(gm(q, k, v).numpy(), attn(q, k, v).numpy(), rtol=1e-5,
                               atol=1e-6)


# ---- the op database ---------------------------------------------------------------------------
def _convert(a, fdt):
    if isinstance(a, np.ndarray):
        kind = a.dtype.kind
        dt = fdt if kind == "f" else "complex64" if kind == "c" else str(a.dtype)
        return ember.tensor(a.copy()).to(getattr(ember, dt))
    if isinstance(a, (list, tuple)) and any(isinstance(x, np.ndarray) for x in a):
        return type(a)(_convert(x, fdt) for x in a)
    if isinstance(a, DType):
        return getattr(ember, a.name)
    return a


def _grow(t, rng):
    """Another input of the same kind: every size n >= 2 becomes n + 1."""
    shape = tuple(n + 1 if n >= 2 else n for n in t.shape)
    if t.dtype.is_floating_point or t.dtype.is_complex:
        return ember.tensor(rng.standard_normal(shape)).to(t.dtype)
    if t.dtype == ember.bool:
        return ember.tensor(rng.random(shape) > 0.5)
    return ember.tensor(rng.integers(0, 2, shape)).to(t.dtype)


def _same(ref, got, values):
    r = ref if isinstance(ref, (tuple, list)) else [ref]
    g = got if isinstance(got, (tuple, list)) else [got]
    assert len(r) == len(g)
    for x, y in zip(r, g):
        if isinstance(x, ember.Tensor):
            assert tuple(x.shape) == tuple(y.shape) and x.dtype == y.dtype
            if values:
                np.testing.assert_allclose(y.detach().numpy().astype(complex),
                                           x.detach().numpy().astype(complex), rtol=1e-4,
                                           atol=1e-5, equal_nan=True)


UNBACKED = {"nonzero", "argwhere", "masked_select"}  # their output sizes: unbacked symbols


@pytest.mark.parametrize("rec", RECORDS, ids=str)
def test_op_database_traces_symbolically(rec):
    op = OPS[rec.name]
    args = [_convert(a, rec.dtype) for a in rec.sample(Samples(0))]
    kw = {k: _convert(v, rec.dtype) for k, v in rec.kw.items()}
    tpos = [i for i, a in enumerate(args) if isinstance(a, ember.Tensor)]

    def fn(*ts):
        a = list(args)
        for i, t in zip(tpos, ts):
            a[i] = t
        return op(*a, **kw)
    ts = [args[i] for i in tpos]
    if rec.name in DATA_DEPENDENT and rec.name not in UNBACKED:  # a clear error, as PyTorch
        with pytest.raises((DynamicOutputShapeException, DataDependentOutputException,
                            NotImplementedError)):
            make_fx(fn, tracing_mode="symbolic")(*ts)
        return
    gm = make_fx(fn, tracing_mode="symbolic")(*[t.clone() for t in ts])
    _same(fn(*[t.clone() for t in ts]), gm(*[t.clone() for t in ts]), rec.values)
    if not ts:
        return
    rng = np.random.default_rng(1)
    new = [_grow(t, rng) for t in ts]
    names = [n.target[:-2] for n in gm.graph.nodes if n.op == "placeholder"]
    sizes = {(nm, d): s for nm, t in zip(names, new) for d, s in enumerate(t.shape)}
    if not gm.shape_env.evaluate_guards(sizes):
        return  # the graph is specialized to these sizes (its guards say so)
    try:
        ref = fn(*[t.clone() for t in new])
    except (RuntimeError, IndexError, ValueError):
        return  # the grown inputs are not valid for this op (index ranges, shapes)
    _same(ref, gm(*[t.clone() for t in new]), rec.values)


def test_unbacked_sizes_of_data_dependent_ops():
    def f(x):
        nz = (x > 0).nonzero()                       # (u0, 2)
        return nz * 2, ember.zeros(nz.shape[0] + 1), x.masked_select(x > 0.5)
    x = ember.tensor([[1.0, -1.0], [0.7, 2.0]])
    gm = make_fx(f, tracing_mode="symbolic")(x)
    assert gm.shape_env.format_guards() == [] and len(gm.shape_env.unbacked) == 2
    y = ember.tensor([[-1.0, -1.0, 3.0], [0.7, 2.0, 0.1], [1.0, 1.0, 1.0]])
    for got, ref in zip(gm(y), f(y)):
        assert got.shape == ref.shape and got.tolist() == ref.tolist()

    def g(x):
        return x.sum() if x.nonzero().shape[0] > 2 else x  # a branch on data
    with pytest.raises(GuardOnDataDependentSymNode, match="u0 > 2"):
        make_fx(g, tracing_mode="symbolic")(x)


def test_item_gives_unbacked_scalars():
    def f(x, n):
        k = n.sum().item()                           # u0: an integer only the data knows
        return ember.zeros(k) + 1, x * x.max().item()
    x, n = _rand(4), ember.tensor([1, 2])
    gm = make_fx(f, tracing_mode="symbolic")(x, n)
    assert [nd.target for nd in gm.graph.nodes if nd.op == "call_method"] == ["item", "item"]
    n2 = ember.tensor([2, 3])
    for got, ref in zip(gm(x, n2), f(x, n2)):
        assert got.shape == ref.shape and got.tolist() == ref.tolist()

    def g(x):
        return x * 2 if x.sum().item() > 0 else x
    with pytest.raises(GuardOnDataDependentSymNode):
        make_fx(g, tracing_mode="symbolic")(x)
    with pytest.raises(DataDependentOutputException):
        make_fx(g, tracing_mode="fake")(x)
