"""ember.compile: compiled == eager across a zoo of Python constructs, guards per source kind
recompiling, graph breaks (eager fallback, side effects once, fullgraph errors, explain), stances,
backends (training: test_compile_train.py; the op database: test_compile_opdb.py)."""
import dataclasses
import logging
import warnings

import pytest
from compile_helpers import Counter, _reset, close, entries  # noqa: F401  (_reset: autouse)

import ember
import ember._dynamo as dynamo
import ember._logging
import ember.nn as nn
import ember.nn.functional as F
from ember._dynamo.exc import RecompileError, Unsupported

X = ember.randn(3, 4)
Y = ember.randn(3, 4)


# ---- API ---------------------------------------------------------------------------------------
def test_decorator_forms_and_backend_names():
    @ember.compile
    def f(x):
        return x.sin() + 1

    @ember.compile(backend="eager", fullgraph=True)
    def g(x):
        return x.cos() * 2
    close(f(X), X.sin() + 1)
    close(g(X), X.cos() * 2)
    assert "aot_eager" in dynamo.list_backends() and "eager" in dynamo.list_backends()
    with pytest.raises(Unsupported, match="invalid backend"):
        ember.compile(lambda x: x, backend="nope")
    with pytest.raises(RuntimeError, match="Either mode or options"):
        ember.compile(lambda x: x, mode="default", options={})
    assert ember.compile(f, disable=True) is f


def test_default_backend_is_inductor_generating_code(caplog):
    from ember._inductor import codecache
    before = sum(codecache.stats.values())
    with caplog.at_level(logging.WARNING, logger="ember._dynamo"):
        close(ember.compile(lambda x: x + 1)(X), X + 1)
    assert not [r for r in caplog.records if "aot_eager" in r.getMessage()]
    assert sum(codecache.stats.values()) == before + 1  # one graph through the FX-graph cache


def test_custom_backend_protocol_and_register():
    seen = []

    @dynamo.register_backend(name="mine_test")
    def mine(gm, example_inputs):
        seen.append((gm, [tuple(t.shape) for t in example_inputs]))
        return gm.forward
    r = ember.compile(lambda x, y: x @ y.t(), backend="mine_test")(X, Y)
    close(r, X @ Y.t())
    assert seen[0][1] == [(3, 4), (3, 4)]
    assert "call_function" in {n.op for n in seen[0][0].graph.nodes}
    assert dynamo.lookup_backend("mine_test") is mine


def test_module_compile_method_and_optimized_module():
    m = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
    ref = m(X)
    om = ember.compile(m, backend="eager")
    close(om(X), ref)
    assert [k.replace("_orig_mod.", "") for k in om.state_dict()] == list(m.state_dict())
    assert om._orig_mod is m and isinstance(om, nn.Module) and om.training
    assert om.weight is None if False else om._orig_mod[0].weight is m[0].weight
    m.compile(backend="eager")
    close(m(X), ref)
    assert len(m._compiled_call_impl._entries) == 1


# ---- the zoo: compiled == eager ----------------------------------------------------------------
SCALE = 3.0


def helper(a, b=2, *rest, k=1, **kw):
    return a * b + sum(rest) + k + kw.get("z", 0)


def zoo_closure():
    w = ember.randn(4)

    def f(x):
        return x * w + SCALE
    return f


def zoo_kwargs(x, y, *, alpha=0.5, **extra):
    return x + alpha * y + extra.get("beta", 0.0)


def zoo_star_args(*xs):
    out = xs[0]
    for t in xs[1:]:
        out = out + t
    a, *mid, b = xs
    return out, len(mid), helper(b, 3, 1, 2, k=4, z=5)


def zoo_containers(x, y):
    d = {"x": x, "y": y}
    lst = [d[k] * i for i, k in enumerate(sorted(d))] if False else [d["x"], d["y"]]
    lst.append(x - y)
    t = tuple(lst)
    a, b, c = t
    out = {k: v.sum(dim=0) for k, v in zip(["a", "b", "c"], t)}
    return out, [a + b + c], t[1:]


def zoo_control(x, n):
    acc = x
    i = 0
    while i < n:
        if i % 2 == 0:
            acc = acc + i
        else:
            acc = acc * 0.5
        i += 1
    acc = acc if n > 2 else -acc
    return acc.relu() if x.shape[0] == 3 else acc


def zoo_no_grad(x, w):
    h = x @ w
    with ember.no_grad():
        s = h.abs().mean()
    return h * s


def zoo_methods_and_views(x):
    B, C = x.shape
    y = x.view(B, 2, C // 2).transpose(1, 2).contiguous().reshape(-1)
    z = ember.cat([y, y.flip(0)], dim=0)
    q, k = x.split(2, dim=1)
    return z[::2], (q * k).softmax(-1), x[1:, :2], x.T.float().to(ember.float64)


@pytest.mark.parametrize("fn,args", [
    (zoo_closure(), (X,)),
    (zoo_kwargs, (X, Y)),
    (zoo_star_args, (X, Y, X * 2)),
    (zoo_containers, (X, Y)),
    (zoo_control, (X, 5)),
    (zoo_control, (X, 1)),
    (zoo_no_grad, (X, ember.randn(4, 4, requires_grad=True))),
    (zoo_methods_and_views, (X,)),
])
def test_zoo_equals_eager_in_one_graph(fn, args):
    be = Counter()
    c = ember.compile(fn, backend=be, fullgraph=True)
    close(c(*args), fn(*args))
    close(c(*args), fn(*args))  # the cached entry
    assert len(entries(c)) == 1 and entries(c)[0].eager_reason is None


def test_kwargs_call():
    c = ember.compile(zoo_kwargs, backend="eager", fullgraph=True)
    close(c(X, Y, alpha=2.0, beta=1.0), zoo_kwargs(X, Y, alpha=2.0, beta=1.0))


class Block(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.norm = nn.LayerNorm(n)
        self.scale = 0.5

    def forward(self, x, *, residual=True):
        h = F.gelu(self.fc(self.norm(x)))
        return x + self.scale * h if residual else h


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(4) for _ in range(3)])
        self.head = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.0), nn.Linear(8, 2))
        self.register_buffer("offset", ember.ones(2))

    def forward(self, x):
        for i, b in enumerate(self.blocks):
            x = b(x, residual=i > 0)
        if self.training:
            x = x * 1.0
        return self.head(x) + self.offset


def test_nested_modules_modulelist_loop():
    net = Net()
    c = ember.compile(net, backend="eager", fullgraph=True)
    close(c(X), net(X))
    net.eval()  # training flag guard: recompiles
    close(c(X), net(X))
    assert len(entries(c)) == 2


# ---- guards per source kind ---------------------------------------------------------------------
FLAG = True
GT = ember.ones(4)


def uses_global(x):
    return x + 1 if FLAG else x - 1


def uses_global_tensor(x):
    return x * GT


def test_guards_recompile_per_source_kind():
    global FLAG, GT
    c = ember.compile(uses_global, backend="eager")
    close(c(X), X + 1)
    FLAG = False
    try:
        close(c(X), X - 1)  # global constant
    finally:
        FLAG = True
    assert len(entries(c)) == 2
    c(ember.randn(5, 4))            # size
    c(X.double())                   # dtype
    c(X.t())                        # strides
    c(X.clone().requires_grad_())   # requires_grad
    assert len(entries(c)) == 6
    with ember.no_grad():           # grad mode
        c(X)
    assert len(entries(c)) == 7
    c2 = ember.compile(uses_global_tensor, backend="eager")
    close(c2(X), X * GT)
    old = GT
    GT = ember.full((4,), 2.0)      # a new global tensor of the same shape: read at call time
    try:
        close(c2(X), X * 2.0)
    finally:
        GT = old
    assert len(entries(c2)) == 1
    k = ember.compile(lambda x, n: x * n, backend="eager")
    close(k(X, 2), X * 2)
    close(k(X, 3), X * 3)           # argument constant
    assert len(entries(k)) == 2


def test_closure_cell_and_attribute_guards():
    scale = [2.0]

    def make(s):
        def f(x):
            return x * s
        return f
    f = make(2.0)
    c = ember.compile(f, backend="eager")
    close(c(X), X * 2.0)
    f.__closure__[0].cell_contents = 5.0
    close(c(X), X * 5.0)
    assert len(entries(c)) == 2
    lin = nn.Linear(4, 4)
    cm = ember.compile(lin, backend="eager")
    close(cm(X), lin(X))
    lin.weight = nn.Parameter(ember.randn(4, 4))  # a new parameter: read at call time
    close(cm(X), lin(X))
    lin.weight = nn.Parameter(ember.randn(4, 4).t())  # new strides: recompile
    close(cm(X), lin(X))
    assert len(entries(cm)) == 2
    assert scale


def test_global_state_guards_autocast_and_deterministic():
    c = ember.compile(lambda x: x * 2, backend="eager")
    c(X)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        c(X)
    old = ember.are_deterministic_algorithms_enabled()
    ember.use_deterministic_algorithms(not old)
    try:
        c(X)
    finally:
        ember.use_deterministic_algorithms(old)
    assert len(entries(c)) == 3
    f = ember.compile(lambda x: x + ember.ones(4), backend="eager")
    f(X)
    ember.set_default_dtype(ember.float64)
    try:
        close(f(X), X + ember.ones(4))  # a float64 constant: the trace's dtypes differ
    finally:
        ember.set_default_dtype(ember.float32)
    assert len(entries(f)) == 2


@dataclasses.dataclass
class Pair:
    a: object
    b: object


def uses_dataclass(x, p):
    q = Pair(x * p.a, x + p.b)       # a user class: the call breaks, the rest resumes
    return q.a - q.b, dataclasses.asdict(p)["a"]


def test_dataclasses_in_and_out():
    p = Pair(ember.randn(4), 2.0)
    c = ember.compile(uses_dataclass, backend="eager")
    close(c(X, p), uses_dataclass(X, p))
    close(c(X, p), uses_dataclass(X, p))


def test_cache_size_limit_falls_back_to_eager_with_the_guard():
    c = ember.compile(lambda x, n: x + n, backend="eager")
    old = dynamo.config.cache_size_limit
    dynamo.config.cache_size_limit = 3
    try:
        for n in range(3):
            c(X, n)
        with pytest.warns(UserWarning, match=r"cache_size_limit.*A\[1\] == 2"):
            close(c(X, 7), X + 7)
        assert len(entries(c)) == 3
    finally:
        dynamo.config.cache_size_limit = old
    assert dynamo.config.cache_size_limit == 8


# ---- graph breaks -------------------------------------------------------------------------------
def data_dependent(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def uses_item(x):
    return x * x.mean().item()


def prints(x):
    print("hello")
    return x * 2


@pytest.mark.parametrize("fn,reason", [(data_dependent, "data-dependent branch"),
                                       (uses_item, "item"), (prints, "print")])
def test_graph_breaks_resume_and_fullgraph_raises(fn, reason, capsys):
    be = Counter()
    c = ember.compile(fn, backend=be)
    close(c(X), fn(X))
    close(c(-X.abs()), fn(-X.abs()))
    e = entries(c)[0]
    assert e.eager_reason is None and e.spec[0] == "resume"  # graph, Python step, resume
    assert len(be.graphs) >= (1 if fn is prints else 2)
    with pytest.raises(Unsupported, match=rf"test_compile\.py:\d+: .*{reason}"):
        ember.compile(fn, backend="eager", fullgraph=True)(X)
    if fn is prints:
        assert capsys.readouterr().out.count("hello") == 4  # once a call, compiled or not


def test_side_effects_happen_once_and_in_order():
    log = []

    class Obj:
        count = 0

    o = Obj()

    def f(x, sink):
        y = x * 2
        sink.append(("a", o.count))
        o.count += 1
        sink.append(("b", o.count))
        return y + o.count
    c = ember.compile(f, backend="eager")
    close(c(X, log), X * 2 + 1)
    close(c(X, log), X * 2 + 2)
    assert log == [("a", 0), ("b", 1), ("a", 1), ("b", 2)] and o.count == 2
    assert "side effect" in dynamo.explain(f)(X, []).break_reasons[0].reason


class Chatty(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        h = self.fc(x).relu()
        self.calls += 1          # a side effect inside a nested module: breaks the caller
        return h * 2


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre, self.mid, self.post = nn.Linear(4, 4), Chatty(), nn.Linear(4, 2)

    def forward(self, x):
        x = self.pre(x)
        with ember.no_grad():
            s = x.abs().max()
        for i in range(2):
            x = self.mid(x) + i
            if x.mean() > 100:   # data-dependent, inside the loop
                x = x / s
        return self.post(x)


def test_breaks_in_nested_modules_loops_and_no_grad():
    m = Outer()
    be = Counter()
    c = ember.compile(m, backend=be)
    ref = m(X)
    out = c(X)
    close(out, ref)
    assert m.mid.calls == 4  # two calls each, eager and compiled
    close(c(X), m(X))
    assert m.mid.calls == 8
    assert len(be.graphs) >= 3


def test_break_inside_no_grad_block_keeps_grad_mode():
    w = ember.randn(4, 4, requires_grad=True)

    def f(x, w):
        h = x @ w
        with ember.no_grad():
            print("inside")
            s = h.sum()
        return h * s
    c = ember.compile(f, backend="eager")
    r = c(X, w)
    close(r, f(X, w))
    assert ember.is_grad_enabled() and r.requires_grad


def test_item_value_used_after_the_break():
    def f(x):
        m = x.abs().max().item()
        k = int(m * 10) % 3
        return x * k + m
    c = ember.compile(f, backend="eager")
    close(c(X), f(X))
    close(c(X * 3), f(X * 3))


def test_local_list_mutation_stays_in_graph():
    def f(x):
        acc = []
        for i in range(3):
            acc.append(x * i)
        acc.extend([x])
        acc += [x + 1]
        return ember.stack(acc).sum(0), len(acc)
    c = ember.compile(f, backend="eager", fullgraph=True)
    close(c(X), f(X))


def test_explain_and_logs(caplog):
    ex = dynamo.explain(data_dependent)(X)
    assert ex.graph_break_count == 1 and ex.graph_count == 2
    assert "data-dependent" in str(ex.break_reasons[0])
    ex = dynamo.explain(zoo_no_grad)(X, ember.randn(4, 4))
    assert ex.graph_count == 1 and ex.graph_break_count == 0 and ex.op_count >= 4
    assert "Graph Count: 1" in str(ex)
    ember._logging.set_logs(graph_breaks=True, recompiles=True, guards=True, graph_code=True)
    try:
        with caplog.at_level(logging.INFO, logger="ember._dynamo"):
            k = ember.compile(lambda x, n: x * n, backend="eager")
            k(X, 2)
            k(X, 3)
            ember.compile(prints, backend="eager")(X)
    finally:
        ember._logging.set_logs()
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "Recompiling" in text and "A[1] == 2" in text
    assert "Graph break" in text and "print" in text
    assert "GUARDS" in text and "TRACED GRAPH" in text


# ---- stances, disable, is_compiling ------------------------------------------------------------
def test_stances():
    seen = []

    def f(x, n):
        seen.append(ember.compiler.is_compiling())
        return x + n
    be = Counter()
    c = ember.compile(lambda x, n: x + n, backend=be)
    with ember.compiler.set_stance("force_eager"):
        close(c(X, 1), X + 1)
    assert len(entries(c)) == 0
    c(X, 1)
    ember.compiler.set_stance("fail_on_recompile")
    c(X, 1)
    with pytest.raises(RecompileError, match="A\\[1\\] == 1"):
        c(X, 2)
    ember.compiler.set_stance("eager_on_recompile")
    close(c(X, 3), X + 3)
    assert len(entries(c)) == 1
    ember.compiler.set_stance("default")
    with pytest.raises(ValueError):
        ember.compiler.set_stance("bogus")
    assert not ember.compiler.is_compiling()


def test_disable_and_allow_in_graph():
    @ember.compiler.disable
    def eager_only(x):
        return x + 100
    ex = dynamo.explain(lambda x: eager_only(x) * 2)(X)
    assert "disable" in ex.break_reasons[0].reason
    c = ember.compile(lambda x: eager_only(x) * 2, backend="eager")
    close(c(X), (X + 100) * 2)

    def opaque(x):
        return x.exp() - 1
    dynamo.allow_in_graph(opaque)
    be = Counter()
    close(ember.compile(lambda x: opaque(x) + 1, backend=be, fullgraph=True)(X), X.exp())
    assert len(be.graphs) == 1


def test_mark_dynamic_records_marks():
    t = ember.randn(3, 4)
    dynamo.mark_dynamic(t, 0)
    assert t._dynamo_dynamic_indices == {0}
    dynamo.mark_static(t, 0)
    assert t._dynamo_dynamic_indices == set()


def test_warnings_clean_for_supported_code():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.compile(zoo_no_grad, backend="eager")(X, ember.randn(4, 4))


def test_ember_logs_environment_variable():
    import os
    import subprocess
    import sys
    code = ("import ember\n"
            "def f(x):\n    print('p')\n    return x + 1\n"
            "ember.compile(f, backend='eager')(ember.ones(2))\n")
    env = dict(os.environ, EMBER_LOGS="graph_breaks")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Graph break" in r.stderr and "print()" in r.stderr
    assert r.stdout.count("p") == 1


class WithCompiledMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @ember.compile(backend="eager", fullgraph=True)
    def forward(self, x):
        return self.fc(x).relu()


def test_compile_as_method_decorator():
    a, b = WithCompiledMethod(), WithCompiledMethod()
    close(a(X), a.fc(X).relu())
    close(b(X), b.fc(X).relu())  # another instance: its own guards (module identity)


def test_break_inside_a_comprehension_resumes():
    def f(xs, k):
        vals = [float(x.sum().item()) * k for x in xs]   # .item() inside the comprehension
        return xs[0] * sum(vals), len(vals)
    xs = [X, Y, X * 2]
    be = Counter()
    c = ember.compile(f, backend=be)
    close(c(xs, 2.0), f(xs, 2.0))
    e = entries(c)[0]
    assert e.eager_reason is None and e.spec[0] == "resume"


def test_break_after_an_inplace_write_in_a_callee():
    def inner(t):
        t.add_(1)                        # a write, then a break: the write happens once
        print("inner")
        return t

    def f(x):
        y = x * 1
        z = inner(y)
        return z + 1, y
    c = ember.compile(f, backend="eager")
    r, e = c(X), f(X)
    close(r, e)


def test_global_state_calls_run_in_python():
    def f(x):
        ember.manual_seed(123)
        return x + ember.rand(3, 4)
    c = ember.compile(f, backend="eager")
    close(c(X), f(X))
    close(c(X), f(X))
    assert "manual_seed" in dynamo.explain(f)(X).break_reasons[0].reason


def test_set_grad_enabled_block_and_call():
    w = ember.randn(4, 4, requires_grad=True)

    def f(x, w):
        with ember.set_grad_enabled(False):
            a = x @ w
        b = x @ w
        return a, b
    c = ember.compile(f, backend="eager", fullgraph=True)
    a, b = c(X, w)
    assert not a.requires_grad and b.requires_grad and ember.is_grad_enabled()
    close((a, b), f(X, w))


def test_library_calls_never_see_mutable_python_objects():
    m = nn.Linear(4, 4)
    opt = ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def f(x):
        loss = m(x).pow(2).sum()
        return loss, type(m).__name__

    def g(x):
        for p in m.parameters():
            p.grad = None
        loss = m(x).pow(2).sum()
        loss.backward()
        opt.step()                       # library code mutating the optimizer's state
        return loss
    close(ember.compile(f, backend="eager", fullgraph=True)(X), f(X))
    m2 = nn.Linear(4, 4)
    m2.load_state_dict(m.state_dict())
    c = ember.compile(g, backend="eager")
    for _ in range(2):
        c(X)
    opt2 = ember.optim.SGD(m2.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        m2.zero_grad()
        m2(X).pow(2).sum().backward()
        opt2.step()
    close(m.weight, m2.weight)
    assert all(isinstance(v, ember.Tensor) and not type(v).__name__.startswith("Fake")
               for s in opt.state.values() for v in s.values())

    def h(x):
        return ember.nn.utils.clip_grad_norm_(iter([x]), 1.0)  # an iterator: not a value
    assert "could change it" in dynamo.explain(h)(X).break_reasons[0].reason
