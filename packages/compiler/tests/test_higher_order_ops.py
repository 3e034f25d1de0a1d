"""ember.cond and ember._higher_order_ops.map against torch 2.13: eager values, make_fx graphs
(one higher-order node, the functions as get_attr subgraphs) in real, fake and symbolic mode,
re-run on other inputs and sizes, and torch's errors for branches that disagree."""
import numpy as np
import pytest

import ember
from ember._higher_order_ops.map import map as emap
from ember.fx.experimental.proxy_tensor import make_fx

torch = pytest.importorskip("torch")
from torch._higher_order_ops.map import map as tmap  # noqa: E402


def _np(t):
    return t.detach().numpy()


def _pair(shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype("float32")
    return ember.tensor(a), torch.tensor(a)


def _cond_fn(t):
    def f(x, y):
        return t.cond(x.sum() > 0, lambda x, y: (x.sin() * y).relu(), lambda x, y: x.cos() + y,
                      (x, y))
    return f


def _size_cond_fn(t):
    def f(x):
        return t.cond(x.shape[0] > 4, lambda x: x.sum(0, keepdim=True).expand(x.shape) * 1,
                      lambda x: x * 2, (x,))
    return f


def _ops(gm, target_name):
    return [n for n in gm.graph.nodes if n.op == "call_function"
            and getattr(n.target, "__name__", "") == target_name]


@pytest.mark.parametrize("sign", [1, -1])
def test_cond_eager_equals_torch(sign):
    (ex, tx), (ey, ty) = _pair((4, 3)), _pair((3,), 1)
    ex, tx = ex.abs() * sign, tx.abs() * sign
    np.testing.assert_allclose(_np(_cond_fn(ember)(ex, ey)), _np(_cond_fn(torch)(tx, ty)),
                               rtol=1e-6)
    assert ember.cond(True, lambda a: a + 1, lambda a: a - 1, [ex]).sum().item() == \
        pytest.approx((tx + 1).sum().item(), rel=1e-5)
    nested = ember.cond(ember.tensor(False), lambda d: {"o": d["a"] * 2},
                        lambda d: {"o": d["a"] - 1}, ({"a": ex},))
    np.testing.assert_allclose(_np(nested["o"]), _np(tx - 1), rtol=1e-6)


@pytest.mark.parametrize("mode", ["real", "fake", "symbolic"])
def test_cond_make_fx_one_node_and_subgraphs(mode):
    (ex, tx), (ey, ty) = _pair((4, 3)), _pair((3,), 1)
    gm = make_fx(_cond_fn(ember), tracing_mode=mode)(ex, ey)
    tgm = torch.fx.experimental.proxy_tensor.make_fx(_cond_fn(torch), tracing_mode=mode)(tx, ty)
    assert len(_ops(gm, "cond")) == len(_ops(tgm, "cond")) == 1
    subs = sorted(n.target for n in gm.graph.nodes if n.op == "get_attr")
    assert subs == sorted(n.target for n in tgm.graph.nodes if n.op == "get_attr") == \
        ["false_graph_0", "true_graph_0"]
    assert "ember.ops.higher_order.cond(" in gm.code
    assert [t.name for t in _targets(gm.true_graph_0)] == ["sin", "mul", "relu"]
    for sign in (1, -1):      # either branch taken by the graph on new inputs
        (ex2, tx2), (ey2, ty2) = _pair((4, 3), 5), _pair((3,), 6)
        ex2, tx2 = ex2.abs() * sign, tx2.abs() * sign
        np.testing.assert_allclose(_np(gm(ex2, ey2)), _np(_cond_fn(torch)(tx2, ty2)),
                                   rtol=1e-5, atol=1e-6)


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def test_cond_on_a_symbolic_size_keeps_both_branches():
    ex, _ = _pair((5, 3))
    gm = make_fx(_size_cond_fn(ember), tracing_mode="symbolic")(ex)
    assert len(_ops(gm, "cond")) == 1
    assert "sym_size" in gm.code and " > 4" in gm.code      # the predicate computed from sizes
    for n in (3, 4, 6, 9):        # fresh sizes on both sides of the predicate
        ex2, tx2 = _pair((n, 3), n)
        np.testing.assert_allclose(_np(gm(ex2)), _np(_size_cond_fn(torch)(tx2)), rtol=1e-5)


def test_cond_lifts_closures_and_module_parameters():
    lin_e = ember.nn.Linear(3, 3)
    lin_t = torch.nn.Linear(3, 3)
    with torch.no_grad():
        lin_t.weight.copy_(torch.tensor(lin_e.weight.detach().numpy()))
        lin_t.bias.copy_(torch.tensor(lin_e.bias.detach().numpy()))

    def f(t, lin):
        def g(x, z):
            return t.cond(x.mean() > 0, lambda x: lin(x) * z, lambda x: x + z, (x,))
        return g
    (ex, _), (ez, tz) = _pair((2, 3)), _pair((3,), 1)
    with ember.no_grad():
        gm = make_fx(f(ember, lin_e), tracing_mode="fake")(ex, ez)
    node = _ops(gm, "cond")[0]
    assert len(node.args[3]) > 1                    # z (a closure) passed in as an operand
    for sign in (1, -1):
        (ex2, tx2) = _pair((2, 3), 7)
        ex2, tx2 = ex2.abs() * sign, tx2.abs() * sign
        with ember.no_grad():
            got = gm(ex2, ez)
        np.testing.assert_allclose(_np(got), _np(f(torch, lin_t)(tx2, tz)), rtol=1e-5,
                                   atol=1e-6)


BAD = {
    "structure": (lambda x: (x.sin(), x.cos()), lambda x: x * 1,
                  "Unmatched output spec from torch.cond branches"),
    "dtype": (lambda x: x.sin(), lambda x: x.int(),
              "expected same dtype but got torch.float32 and torch.int32"),
    "dim": (lambda x: x.sin().unsqueeze(0), lambda x: x * 1, "expected same dim but got 2 and 1"),
    "alias": (lambda x: x, lambda x: x * 1, "aliasing"),
}


@pytest.mark.parametrize("kind", BAD)
@pytest.mark.parametrize("mode", ["eager", "symbolic"])
def test_mismatched_branches_raise_torchs_error(kind, mode):
    t_fn, f_fn, msg = BAD[kind]
    ex, tx = _pair((3,))

    def run(t, x):
        def f(x):
            return t.cond(x.sum() > 0, t_fn, f_fn, (x,))
        if mode == "eager":
            return f(x)
        mk = torch.fx.experimental.proxy_tensor.make_fx if t is torch else make_fx
        return mk(f, tracing_mode=mode)(x)
    with pytest.raises(RuntimeError) as te:
        run(torch, tx)
    with pytest.raises(RuntimeError) as ee:
        run(ember, ex)
    assert msg in str(te.value)
    assert msg.replace("torch.float32", "ember.float32").replace(
        "torch.int32", "ember.int32") in str(ee.value)


def test_pred_must_be_one_element():
    ex, tx = _pair((2,))
    with pytest.raises(RuntimeError, match="Expected pred to be bool or single-element tensor"):
        torch.cond(tx > 0, lambda x: x, lambda x: x, (tx,))
    with pytest.raises(RuntimeError, match="Expected pred to be bool or single-element tensor"):
        ember.cond(ex > 0, lambda x: x, lambda x: x, (ex,))


def _map_fn(m):
    def f(xs, y):
        return m(lambda x, y: (x.sin() + y, x.sum()), xs, y)
    return f


@pytest.mark.parametrize("mode", ["eager", "real", "fake", "symbolic"])
def test_map_equals_torch(mode):
    (ex, tx), (ey, ty) = _pair((4, 3)), _pair((3,), 1)
    want = _map_fn(tmap)(tx, ty)
    if mode == "eager":
        got = _map_fn(emap)(ex, ey)
    else:
        gm = make_fx(_map_fn(emap), tracing_mode=mode)(ex, ey)
        assert len(_ops(gm, "map_impl")) == 1 and hasattr(gm, "body_graph_0")
        assert "ember.ops.higher_order.map_impl(" in gm.code
        got = gm(ex, ey)
        if mode == "symbolic":     # other sizes
            (ex2, tx2), (ey2, ty2) = _pair((6, 5), 2), _pair((5,), 3)
            for g, w in zip(gm(ex2, ey2), _map_fn(tmap)(tx2, ty2)):
                np.testing.assert_allclose(_np(g), _np(w), rtol=1e-5, atol=1e-6)
    for g, w in zip(got, want):
        np.testing.assert_allclose(_np(g), _np(w), rtol=1e-5, atol=1e-6)


def test_map_errors_as_torch():
    for t, m in ((torch, tmap), (ember, emap)):
        with pytest.raises(RuntimeError, match="Leading dimensions of mapped xs cannot be 0"):
            m(lambda x: x * 1, t.zeros(0, 3))
        with pytest.raises(RuntimeError, match="Leading dimensions of mapped xs must be "
                                               "consistent"):
            m(lambda x, y: x + y, [t.zeros(2, 3), t.zeros(3, 3)], t.zeros(3))


def test_ops_namespace_names_the_higher_order_ops():
    from ember._higher_order_ops import cond_op, map_impl
    assert ember.ops.higher_order.cond is cond_op
    assert ember.ops.higher_order.map_impl is map_impl
    with pytest.raises(AttributeError):
        _ = ember.ops.higher_order.no_such_op
