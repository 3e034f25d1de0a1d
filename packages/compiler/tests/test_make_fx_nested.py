"""make_fx on nested inputs and outputs (tuples, lists, dicts of tensors: one placeholder per
leaf, torch's names), and the size-oblivious / guard-free checks of symbolic_shapes
(`guard_size_oblivious`, `statically_known_true`, `guard_or_false`, ...) against torch 2.13."""
import warnings

import numpy as np
import pytest

import ember
from ember.fx.experimental import symbolic_shapes as ess
from ember.fx.experimental.proxy_tensor import make_fx

torch = pytest.importorskip("torch")
from torch.fx.experimental import symbolic_shapes as tss  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx as tmake_fx  # noqa: E402


def _f(xs, d):
    a, b = xs
    return {"s": a * d["k"], "l": [b.relu() + d["k"], (a @ b.t()).sum()]}


def _inputs(t, n, seed=0):
    r = np.random.default_rng(seed)
    a, b, k = (t.tensor(r.standard_normal((n, 3)).astype("float32")) for _ in range(3))
    return (a, b), {"k": k}


@pytest.mark.parametrize("mode", ["real", "fake", "symbolic"])
def test_nested_inputs_and_outputs(mode):
    gm = make_fx(_f, tracing_mode=mode)(*_inputs(ember, 4))
    tgm = tmake_fx(_f, tracing_mode=mode)(*_inputs(torch, 4))
    phs = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    assert phs == [n.name for n in tgm.graph.nodes if n.op == "placeholder"] == \
        ["xs_1", "xs_2", "d_1"]
    assert not any(n.op == "get_attr" for n in gm.graph.nodes)   # leaves are inputs
    n = 6 if mode == "symbolic" else 4
    got, want = gm(*_inputs(ember, n, 1)), _f(*_inputs(torch, n, 1))
    assert set(got) == {"s", "l"} and isinstance(got["l"], list)
    for g, w in zip([got["s"], *got["l"]], [want["s"], *want["l"]]):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="structured"):
        gm(*_inputs(ember, 4)[0], {"k": ember.ones(4, 3)})


def _checks(t, ss, res):
    def f(x):
        u = x.nonzero().shape[0]
        s = x.shape[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res.extend([ss.guard_size_oblivious(u == 1), ss.guard_size_oblivious(u >= 0),
                    ss.guard_size_oblivious(u < 2), ss.guard_size_oblivious(s == 1),
                    ss.guard_size_oblivious(s > 5), ss.statically_known_true(s == 7),
                    ss.statically_known_true(s > 1), ss.statically_known_true(s >= 2),
                    ss.statically_known_true(u >= 0), ss.statically_known_true(u == 0),
                    ss.statically_known_false(s == 1), ss.guard_or_false(u == 3),
                    ss.guard_or_true(u == 3), ss.guard_size_oblivious(True),
                    ss.statically_known_true(False)])
        try:
            bool(u == 1)
            res.append("no error")
        except RuntimeError as e:
            res.append(type(e).__name__)
        return x * 2
    return f


def test_size_oblivious_checks_as_torch():
    t_res, e_res = [], []
    tgm = tmake_fx(_checks(torch, tss, t_res), tracing_mode="symbolic")(torch.randn(7))
    gm = make_fx(_checks(ember, ess, e_res), tracing_mode="symbolic")(ember.randn(7))
    assert e_res == t_res
    assert e_res[-1] == "GuardOnDataDependentSymNode"
    # only the decisions that needed the input's size took guards: s > 5 (size-oblivious
    # falls back to a guard) and none of the statically known ones
    t_guards = sorted(str(g.expr) for g in tgm.shape_env.guards)
    assert len(gm.shape_env.guards) == len(t_guards) == 1
    assert "> 5" in str(gm.shape_env.guards[0]) and "> 5" in t_guards[0]
