"""Calling ops by schema (`ember.ops.<ns>.<op>`, `ember.library` ops) checks the call as
torch.ops does (issue 11, defect 17): extra arguments, unknown or repeated keywords, missing
ones and values of the wrong type raise PyTorch's error (RuntimeError, same message); a generator
for a Tensor[] argument is read once. Public functions refuse a generator for Tensor[] with
PyTorch's TypeError (defect 19: `cat(generator)`). Each case runs on torch 2.13 too."""

import itertools
import re

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

_N = itertools.count()


def _custom(t, schema="(Tensor x, Tensor[] xs, float k, SymInt n=2) -> Tensor"):
    """The same op on ember and torch: x * k + sum(xs) + n."""
    name = f"checks{next(_N)}::f"

    def f(x, xs, k, n=2):
        r = x * k + n
        for y in xs:
            r = r + y
        return r
    lib = t.library.Library(name.split("::")[0], "DEF")
    lib.define("f" + schema)
    lib.impl("f", f, "CPU")
    return lib, getattr(t.ops, name.split("::")[0]).f


def _ns(msg: str) -> str:
    return re.sub(r"checksg?\d+::", "ns::", msg)


def _outcome(fn):
    try:
        r = fn()
    except Exception as e:  # noqa: BLE001 - the outcome is compared, whatever it is
        return type(e).__name__, str(e).split("\n")[0]
    return "ok", np.asarray(r.detach().numpy() if hasattr(r, "detach") else r).tolist()


CUSTOM_CALLS = {
    "ok": lambda t, f, x: f(x, [x], 2.0),
    "keywords": lambda t, f, x: f(x, xs=[x], k=2.0, n=3),
    "extra positional": lambda t, f, x: f(x, [x], 2.0, 3, 4),
    "unknown keyword": lambda t, f, x: f(x, [x], 2.0, foo=1),
    "repeated keyword": lambda t, f, x: f(x, [x], 2.0, x=x),
    "missing": lambda t, f, x: f(x, [x]),
    "str for float": lambda t, f, x: f(x, [x], "a"),
    "None for float": lambda t, f, x: f(x, [x], None),
    "float for int": lambda t, f, x: f(x, [x], 2.0, 1.5),
    "float for Tensor": lambda t, f, x: f(2.0, [x], 2.0),
    "list for Tensor": lambda t, f, x: f([x], [x], 2.0),
    "Tensor for Tensor[]": lambda t, f, x: f(x, x, 2.0),
    "None in Tensor[]": lambda t, f, x: f(x, [x, None], 2.0),
    "generator for Tensor[]": lambda t, f, x: f(x, (y for y in [x, x]), 2.0),
    "tuple for Tensor[]": lambda t, f, x: f(x, (x, x), 2.0),
    "bool and numpy numbers": lambda t, f, x: f(x, [x], np.float32(1.5), np.int64(2)),
    "0-dim tensor for float": lambda t, f, x: f(x, [x], t.tensor(2.0)),
}


@pytest.mark.parametrize("case", list(CUSTOM_CALLS))
def test_custom_op_call_is_checked_like_torch_ops(case):
    call = CUSTOM_CALLS[case]
    libs = []
    try:
        got = {}
        for t in (ember, torch):
            lib, f = _custom(t)
            libs.append(lib)
            got[t.__name__] = _outcome(lambda: call(t, f, t.ones(2)))
        e, r = got["ember"], got["torch"]
        assert e[0] == r[0], f"{case}: ember {e}, torch {r}"
        if e[0] == "ok":
            assert e[1] == r[1]
        else:  # the same first line, naming the op (each side's namespace differs)
            assert _ns(e[1]) == _ns(r[1])
    finally:
        for lib in libs:
            if hasattr(lib, "_destroy"):
                lib._destroy()


def test_generator_for_tensor_list_is_read_once():
    seen = []

    def gen(x):
        for y in (x, x + 1):
            seen.append(y)
            yield y
    for t in (ember, torch):
        seen.clear()
        _, f = _custom(t)
        r = f(t.zeros(2), gen(t.zeros(2)), 1.0, 0)
        assert r.tolist() == [1.0, 1.0] and len(seen) == 2


SCHEMA_G = ("(Tensor x, Tensor? y, int[] s, Scalar a, bool b, str m, ScalarType? dt, Device? dev, "
            "SymInt z) -> Tensor")
G_ARGS = dict(y=None, s=[1], a=1, b=True, m="a", dt=None, dev=None, z=3)
G_CASES = [("y", "q"), ("s", 1.5), ("s", (1, 2)), ("s", 1), ("s", [1.0]), ("a", 1j), ("a", "1"),
           ("b", "t"), ("m", 1), ("dt", "float32"), ("dev", "cpu"), ("dev", 0), ("z", 3.0),
           ("a", "tensor"), ("s", "gen")]


@pytest.mark.parametrize("name,value", G_CASES, ids=[f"{n}={v}" for n, v in G_CASES])
def test_each_schema_type_is_checked_like_torch(name, value):
    got = {}
    for t in (ember, torch):
        ns = f"checksg{next(_N)}"
        lib = t.library.Library(ns, "DEF")
        lib.define("g" + SCHEMA_G)
        lib.impl("g", lambda x, *rest: x.clone(), "CPU")
        v = {"tensor": t.tensor(3), "gen": (i for i in (1, 2))}.get(value, value) \
            if isinstance(value, str) and value in ("tensor", "gen") else value
        kw = dict(G_ARGS, **{name: v})
        got[t.__name__] = _outcome(lambda: getattr(t.ops, ns).g(t.ones(2), **kw))
    e, r = got["ember"], got["torch"]
    assert e[0] == r[0], (e, r)
    if e[0] != "ok":
        assert _ns(e[1]) == _ns(r[1])


ATEN_CALLS = {
    "extra": lambda t, x: t.ops.aten.add(x, x, 1, 2),
    "too many with kwonly": lambda t, x: t.ops.aten.sum(x, [0], False, t.float32, 1),
    "unknown keyword": lambda t, x: t.ops.aten.neg(x, foo=1),
    "wrong type": lambda t, x: t.ops.aten.neg("x"),
    "missing": lambda t, x: t.ops.aten.neg(),
    "generator for Tensor[]": lambda t, x: t.ops.aten.cat((y for y in [x, x])),
    "int in Tensor[]": lambda t, x: t.ops.aten.cat([x, 1]),
    "float for int": lambda t, x: t.ops.aten.squeeze(x, 0.5),
}


@pytest.mark.parametrize("case", list(ATEN_CALLS))
def test_core_ops_by_name_are_checked_like_torch(case):
    e = _outcome(lambda: ATEN_CALLS[case](ember, ember.ones(2)))
    r = _outcome(lambda: ATEN_CALLS[case](torch, torch.ones(2)))
    assert e[0] == r[0], (e, r)
    if e[0] == "ok":
        assert e[1] == r[1]


GEN_FUNCS = ["cat", "concat", "concatenate", "stack", "hstack", "vstack", "row_stack", "dstack",
             "column_stack"]


@pytest.mark.parametrize("fname", GEN_FUNCS)
def test_public_functions_refuse_a_generator_for_tensor_list(fname):
    msgs = []
    for t in (ember, torch):
        x = t.ones(2)
        with pytest.raises(TypeError) as info:
            getattr(t, fname)(y for y in [x, x])
        msgs.append(str(info.value))
    assert "must be tuple of Tensors, not generator" in msgs[0], msgs
    assert msgs[0].split("(")[1:] == msgs[1].split("(")[1:]  # same argument, same position


@pytest.mark.parametrize("bad", ["tensor", "map", "list with int", "list with None"])
def test_cat_argument_errors_match_torch(bad):
    msgs = []
    for t in (ember, torch):
        x = t.ones(2)
        arg = {"tensor": x, "map": map(lambda y: y, [x]), "list with int": [x, 1],
               "list with None": [x, None]}[bad]
        with pytest.raises(TypeError) as info:
            t.cat(arg)
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]


def test_index_put_refuses_a_generator_like_torch():
    for t in (ember, torch):
        x = t.zeros(3)
        with pytest.raises(TypeError, match=r"argument 'indices' \(position 1\) must be tuple of "
                                            r"Tensors, not generator"):
            x.index_put((i for i in [t.tensor([0])]), t.tensor(5.0))
        assert x.index_put((t.tensor([0]),), t.tensor(5.0)).tolist() == [5.0, 0.0, 0.0]
