"""torch.fx programs run unchanged on ember: each program takes the library (`torch` or
`ember`) as its `torch`, runs once on each, and the results (values, graph structure, and
generated code where both print the same) must agree."""
import copy
import math
import operator
import pickle

import numpy as np
import pytest
import torch as _torch

import ember
import ember.fx  # noqa: F401  (binds ember.fx for programs that write torch.fx)

LIBS = [_torch, ember]


def my_prim(x, y):
    """A primitive the tracer must not look into (it uses len() on a traced value)."""
    return x * y + len(x.shape)


_torch.fx.wrap("my_prim")
ember.fx.wrap("my_prim")


def _np(t):
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t)


def _seeded(lib, *shape):
    rng = np.random.default_rng(sum(shape))
    return lib.tensor(rng.standard_normal(shape).astype(np.float32))


def _copy_params(src, dst):
    """The torch module's weights into the ember one (same architecture, same names)."""
    sd = {k: ember.tensor(v.detach().numpy()) for k, v in src.state_dict().items()}
    dst.load_state_dict(sd)


def _structure(gm):
    """(op, target name) per node: what both libraries must record alike."""
    out = []
    for n in gm.graph.nodes:
        t = n.target
        name = t if isinstance(t, str) else getattr(t, "__name__", str(t))
        out.append((n.op, name))
    return out


def _code(gm, lib):
    return gm.code.replace(lib.__name__ + ".", "LIB.")


def both(program):
    """Run program(torch) and program(ember)."""
    return program(_torch), program(ember)


def make_net(torch):
    torch.manual_seed(0)
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin1 = torch.nn.Linear(6, 8)
            self.act = torch.nn.ReLU()
            self.lin2 = torch.nn.Linear(8, 4)
            self.scale = torch.nn.Parameter(torch.ones(4) * 0.5)

        def forward(self, x):
            h = self.act(self.lin1(x))
            h = torch.add(self.lin2(h), self.scale)
            return torch.sigmoid(h) * h.sum(dim=-1, keepdim=True)
    return Net()


def _pair_nets():
    tn, en = make_net(_torch), make_net(ember)
    _copy_params(tn, en)
    return tn, en


# ---- symbolic_trace and the printed code ---------------------------------------------------
def test_trace_code_and_values_match_torch():
    def program(torch):
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.p = torch.nn.Parameter(torch.ones(3))

            def forward(self, x, y=2):
                a = x + self.p
                b = a.relu().sum(dim=0, keepdim=True)
                c = torch.cat([a, b])[0] * y
                return c, c.shape[0], -c
        gm = torch.fx.symbolic_trace(M())
        return gm, gm(_seeded(torch, 4, 3))
    (tg, tr), (eg, er) = both(program)
    assert _code(tg, _torch) == _code(eg, ember)
    assert _structure(tg) == _structure(eg)
    np.testing.assert_allclose(_np(tr[0]), _np(er[0]), rtol=1e-6, atol=1e-7)
    assert tr[1] == er[1] == 3


def test_trace_leaf_modules_and_functions():
    tn, en = _pair_nets()
    tg, eg = _torch.fx.symbolic_trace(tn), ember.fx.symbolic_trace(en)
    assert _structure(tg) == _structure(eg)
    assert [n.op for n in eg.graph.nodes].count("call_module") == 3
    x = _seeded(_torch, 5, 6)
    np.testing.assert_allclose(_np(tg(x)), _np(eg(ember.tensor(x.numpy()))), rtol=1e-5, atol=1e-6)
    eg.graph.lint()


def test_custom_tracer_is_leaf_and_call_module_override():
    calls = {}

    def program(torch):
        class NoLeafTracer(torch.fx.Tracer):
            """Trace into every module but Linear; count the module calls it sees."""

            def is_leaf_module(self, m, qualname):
                return isinstance(m, torch.nn.Linear)

            def call_module(self, m, forward, args, kwargs):
                calls.setdefault(torch.__name__, []).append(type(m).__name__)
                return super().call_module(m, forward, args, kwargs)
        net = make_net(torch)
        graph = NoLeafTracer().trace(net)
        return torch.fx.GraphModule(net, graph), net
    (tg, tn), (eg, en) = both(program)
    assert _structure(tg) == _structure(eg)
    assert ("call_module", "act") not in _structure(eg)  # ReLU traced through
    assert calls["torch"] == calls["ember"] == ["Linear", "ReLU", "Linear"]
    _copy_params(tn, eg)
    x = _seeded(_torch, 2, 6)
    np.testing.assert_allclose(_np(tg(x)), _np(eg(ember.tensor(x.numpy()))), rtol=1e-5, atol=1e-6)


def test_replace_ops_in_traced_module():
    def program(torch):
        def f(x, y):
            return torch.add(x, y).relu() + torch.add(y, 1.0)
        gm = torch.fx.symbolic_trace(f)
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target == torch.add:
                node.target = torch.mul
        gm.recompile()
        return gm, gm(_seeded(torch, 3), _seeded(torch, 4, 3))
    (tg, tr), (eg, er) = both(program)
    assert "LIB.mul(x, y)" in _code(eg, ember)
    assert _code(tg, _torch) == _code(eg, ember)
    np.testing.assert_allclose(_np(tr), _np(er), rtol=1e-6, atol=1e-7)


def test_profiling_interpreter_per_module():
    def program(torch):
        class ModuleCounter(torch.fx.Interpreter):
            """Per-module profiler: how often each submodule ran and its output shape."""

            def __init__(self, gm):
                super().__init__(gm)
                self.stats = {}

            def run_node(self, n):
                result = super().run_node(n)
                if n.op == "call_module":
                    count, _ = self.stats.get(n.target, (0, None))
                    self.stats[n.target] = (count + 1, tuple(result.shape))
                return result
        net = make_net(torch)
        gm = torch.fx.symbolic_trace(net)
        prof = ModuleCounter(gm)
        x = _seeded(torch, 3, 6)
        out = prof.run(x)
        prof.run(x)
        return prof.stats, out, net
    (ts, tout, tn), (es, eout, en) = both(program)
    assert ts == es == {"lin1": (2, (3, 8)), "act": (2, (3, 8)), "lin2": (2, (3, 4))}


def test_graph_inversion():
    def program(torch):
        invert_mapping = {torch.neg: torch.neg, torch.exp: torch.log, torch.log: torch.exp}

        def f(x):
            return torch.exp(torch.neg(torch.log(x)))

        def invert(model):
            fx_model = torch.fx.symbolic_trace(model)
            new_graph = torch.fx.Graph()
            env = {}
            for node in reversed(fx_model.graph.nodes):
                if node.op == "call_function":
                    new_node = new_graph.call_function(invert_mapping[node.target],
                                                       (env[node.name],))
                    env[node.args[0].name] = new_node
                elif node.op == "output":
                    env[node.args[0].name] = new_graph.placeholder(node.args[0].name)
                elif node.op == "placeholder":
                    new_graph.output(env[node.name])
            return torch.fx.GraphModule(fx_model, new_graph)
        x = torch.tensor([0.5, 1.0, 2.0, 3.0])
        inv = invert(f)
        return inv, inv(f(x)), x
    (tg, tr, tx), (eg, er, ex) = both(program)
    assert _code(tg, _torch) == _code(eg, ember)
    np.testing.assert_allclose(_np(er), _np(ex), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(tr), _np(er), rtol=1e-6, atol=1e-7)


def test_wrapped_primitive():
    def program(torch):
        def f(a, b):
            return my_prim(a, b).relu() + 1
        gm = torch.fx.symbolic_trace(f)
        return gm, gm(_seeded(torch, 2, 3), _seeded(torch, 3))
    (tg, tr), (eg, er) = both(program)
    assert ("call_function", "my_prim") in _structure(eg)
    assert _structure(tg) == _structure(eg)
    assert eg.graph.find_nodes(op="call_function", target=my_prim)[0].target is my_prim
    np.testing.assert_allclose(_np(tr), _np(er), rtol=1e-6, atol=1e-7)


def test_concrete_args_specialize():
    def program(torch):
        def f(x, flag):
            return x.relu() if flag else x.neg()
        gm = torch.fx.symbolic_trace(f, concrete_args={"flag": False})
        x = _seeded(torch, 4)
        with pytest.raises(AssertionError):
            gm(x, True)
        return gm(x, False), x
    (tr, tx), (er, ex) = both(program)
    np.testing.assert_allclose(_np(er), -_np(ex))
    np.testing.assert_allclose(_np(tr), _np(er))


def test_varargs():
    def program(torch):
        def f(x, *args):
            return x + args[0] * args[1]

        class M(torch.nn.Module):
            def forward(self, *xs):
                return torch.cat(xs[:2]).sum()
        gf, gm = torch.fx.symbolic_trace(f), torch.fx.symbolic_trace(M())
        return gf, gm, gf(torch.ones(2), torch.ones(2) * 2, torch.ones(2) * 3), \
            gm(torch.ones(2), torch.ones(3), 5)
    (tf, tm, tr1, tr2), (ef, em, er1, er2) = both(program)
    assert _code(tf, _torch) == _code(ef, ember) and _code(tm, _torch) == _code(em, ember)
    assert _np(er1).tolist() == _np(tr1).tolist() == [7.0, 7.0]
    assert float(er2) == float(tr2) == 5.0


def test_control_flow_and_len_raise_as_torch():
    def program(torch):
        def cf(x):
            return x if x.sum() > 0 else -x

        def ln(x):
            return x * len(x)
        with pytest.raises(torch.fx.proxy.TraceError):
            torch.fx.symbolic_trace(cf)
        with pytest.raises(RuntimeError, match="'len' is not supported"):
            torch.fx.symbolic_trace(ln)
    both(program)
    # a failed trace leaves nothing patched behind
    assert type(ember.relu).__name__ == "function" and not hasattr(ember.relu, "__fx_wrapped__")
    assert ember.nn.Module.__call__ is ember.nn.Module._wrapped_call_impl


def test_transformer_swaps_ops():
    def program(torch):
        class NegSigmSwap(torch.fx.Transformer):
            def call_function(self, target, args, kwargs):
                if target == torch.sigmoid:
                    return torch.neg(*args, **kwargs)
                return super().call_function(target, args, kwargs)

            def call_method(self, target, args, kwargs):
                if target == "neg":
                    call_self, *args_tail = args
                    return call_self.sigmoid(*args_tail, **kwargs)
                return super().call_method(target, args, kwargs)

        def fn(x):
            return torch.sigmoid(x).neg()
        gm = torch.fx.symbolic_trace(fn)
        new = NegSigmSwap(gm).transform()
        x = _seeded(torch, 5)
        return new, new(x), torch.neg(x).sigmoid()
    (tg, tr, texp), (eg, er, eexp) = both(program)
    np.testing.assert_allclose(_np(er), _np(eexp), rtol=1e-6, atol=1e-7)
    assert _structure(tg) == _structure(eg)


def test_replace_pattern():
    def program(torch):
        class M(torch.nn.Module):
            def forward(self, x, w1, w2):
                m1 = torch.cat([w1, w2]).sum()
                m2 = torch.cat([w1, w2]).sum()
                return x + torch.max(m1) + torch.max(m2)

        def pattern(w1, w2):
            return torch.cat([w1, w2]).sum()

        def replacement(w1, w2):
            return torch.stack([w1, w2])
        gm = torch.fx.symbolic_trace(M())
        matches = torch.fx.replace_pattern(gm, pattern, replacement)
        args = (_seeded(torch, 2), _seeded(torch, 3), _seeded(torch, 3))
        return gm, matches, gm(*args)
    (tg, tm, tr), (eg, em, er) = both(program)
    assert len(tm) == len(em) == 2
    assert _code(tg, _torch) == _code(eg, ember)
    np.testing.assert_allclose(_np(tr), _np(er), rtol=1e-6, atol=1e-7)
    eg.graph.lint()


def test_shape_prop_and_split_module():
    from ember.fx.passes.shape_prop import ShapeProp

    def program(torch):
        from importlib import import_module
        sp = import_module(f"{torch.__name__}.fx.passes.shape_prop")
        split = import_module(f"{torch.__name__}.fx.passes.split_module")
        net = make_net(torch)
        gm = torch.fx.symbolic_trace(net)
        x = _seeded(torch, 3, 6)
        sp.ShapeProp(gm).propagate(x)
        shapes = {n.name: tuple(n.meta["tensor_meta"].shape) for n in gm.graph.nodes
                  if "tensor_meta" in n.meta}
        parts = split.split_module(gm, net, lambda n: 0 if n.name.startswith("lin1") else 1)
        return shapes, parts, net, x
    (ts, tp, tn, tx), (es, ep, en, ex) = both(program)
    assert ts == es and es["output"] == (3, 4)
    assert _structure(tp) == _structure(ep)
    assert _code(tp, _torch) == _code(ep, ember)
    assert _code(tp.submod_1, _torch) == _code(ep.submod_1, ember)
    np.testing.assert_allclose(_np(ep(ex)), _np(en(ex)), rtol=1e-6, atol=1e-7)
    assert ShapeProp is not None


def test_cnn_block_code_matches_torch():
    def program(torch):
        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
                self.bn = torch.nn.BatchNorm2d(4)
                self.layers = torch.nn.ModuleList([torch.nn.Linear(16, 16) for _ in range(2)])
                self.seq = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Dropout(0.0))
                self.register_buffer("scale", torch.ones(1) * 2)

            def forward(self, x, extra=None):
                b, c, h, w = x.shape
                y = self.seq(self.bn(self.conv(x)))
                y = y.view(x.size(0), -1)[:, :16]
                for layer in self.layers:
                    y = layer(y)
                y += 1
                y = torch.flatten(y.unsqueeze(-1), 1) * self.scale
                y = y.softmax(dim=-1)
                z = torch.where(y > 0.05, y, torch.zeros_like(y))
                return {"out": z, "n": b * h, "mean": z.mean(dim=(0,), keepdim=False)}
        m = Block().eval()
        return m, torch.fx.symbolic_trace(m)
    (tm, tg), (em, eg) = both(program)
    _copy_params(tm, em)
    assert _code(tg, _torch) == _code(eg, ember)
    x = _seeded(_torch, 2, 3, 4, 4)
    rt, re = tg(x), eg(ember.tensor(x.numpy()))
    np.testing.assert_allclose(_np(rt["out"]), _np(re["out"]), rtol=1e-5, atol=1e-7)
    assert rt["n"] == re["n"] == 8


def test_conv_bn_fusion_tutorial():
    """The torch.fx Conv/BN fusion tutorial, unchanged."""
    def program(torch):
        def fuse_conv_bn_eval(conv, bn):
            fused = copy.deepcopy(conv)
            w = fused.weight
            b = fused.bias if fused.bias is not None else torch.zeros_like(bn.running_mean)
            scale = bn.weight * torch.rsqrt(bn.running_var + bn.eps)
            fused.weight = torch.nn.Parameter(w * scale.reshape(-1, 1, 1, 1))
            fused.bias = torch.nn.Parameter((b - bn.running_mean) * scale + bn.bias)
            return fused

        def _parent_name(target):
            *parent, name = target.rsplit('.', 1)
            return parent[0] if parent else '', name

        def replace_node_module(node, modules, new_module):
            parent_name, name = _parent_name(node.target)
            setattr(modules[parent_name], name, new_module)

        def fuse(model):
            model = copy.deepcopy(model)
            fx_model = torch.fx.symbolic_trace(model)
            modules = dict(fx_model.named_modules())
            for node in fx_model.graph.nodes:
                if node.op != 'call_module':
                    continue
                if type(modules[node.target]) is torch.nn.BatchNorm2d and \
                        type(modules[node.args[0].target]) is torch.nn.Conv2d:
                    if len(node.args[0].users) > 1:
                        continue
                    conv, bn = modules[node.args[0].target], modules[node.target]
                    replace_node_module(node.args[0], modules, fuse_conv_bn_eval(conv, bn))
                    node.replace_all_uses_with(node.args[0])
                    fx_model.graph.erase_node(node)
            fx_model.graph.lint()
            fx_model.recompile()
            fx_model.delete_all_unused_submodules()
            return fx_model
        torch.manual_seed(0)

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.block = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                                                 torch.nn.ReLU())
                self.conv2 = torch.nn.Conv2d(4, 2, 1)
                self.bn2 = torch.nn.BatchNorm2d(2)

            def forward(self, x):
                return self.bn2(self.conv2(self.block(x))).mean()
        m = Net()
        with torch.no_grad():
            for bn in (m.block[1], m.bn2):
                bn.running_mean.uniform_(-1, 1)
                bn.running_var.uniform_(0.5, 2)
        m.eval()
        f = fuse(m)
        return m, f
    (tm, tf), (em, ef) = both(program)
    assert _code(tf, _torch) == _code(ef, ember)
    assert [n for n, _ in tf.named_modules()] == [n for n, _ in ef.named_modules()]
    x = ember.tensor(_seeded(_torch, 2, 3, 6, 6).numpy())
    np.testing.assert_allclose(_np(ef(x)), _np(em(x)), rtol=1e-5, atol=1e-6)


# ---- graph building and editing ------------------------------------------------------------
def test_graph_by_hand_and_editing():
    def program(torch):
        g = torch.fx.Graph()
        x = g.placeholder("x")
        y = g.call_function(torch.relu, (x,))
        z = g.call_method("sum", (y,), {"dim": 0})
        dead = g.call_function(operator.mul, (x, 2))
        g.output(z)
        gm = torch.fx.GraphModule(torch.nn.Module(), g)
        with g.inserting_after(y):
            e = g.call_function(torch.exp, (y,))
        y.replace_all_uses_with(e)
        e.replace_input_with(e, y)  # replace_all_uses_with also rewired e itself
        e.args = (y,)
        removed = g.eliminate_dead_code()
        gm.recompile()
        g.lint()
        return gm, removed, dead, gm(torch.tensor([[-1.0, 2.0], [3.0, -4.0]]))
    (tg, tr, td, tv), (eg, er, ed, ev) = both(program)
    assert tr and er
    assert _code(tg, _torch) == _code(eg, ember)
    np.testing.assert_allclose(_np(tv), _np(ev), rtol=1e-6, atol=1e-7)
    assert str(tg.graph).replace("torch.", "") == str(eg.graph).replace("ember.", "")


def test_lint_catches_broken_graphs():
    g = ember.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(ember.relu, (x,))
    g.output(y)
    x.prepend(y)  # use before definition
    with pytest.raises(RuntimeError, match="used before it has been defined"):
        g.lint()
    with pytest.raises(RuntimeError, match="still had 1 users"):
        g.erase_node(x)


def test_graph_module_copy_pickle_readable():
    tn, en = _pair_nets()
    gm = ember.fx.symbolic_trace(en)
    x = ember.tensor(_seeded(_torch, 2, 6).numpy())
    ref = _np(gm(x))
    for clone in (copy.deepcopy(gm), pickle.loads(pickle.dumps(gm)), copy.copy(gm)):
        np.testing.assert_allclose(_np(clone(x)), ref, rtol=1e-6, atol=1e-7)
        assert clone.code == gm.code
    deep = copy.deepcopy(gm)
    deep.lin1.weight.data.zero_()
    np.testing.assert_allclose(_np(gm(x)), ref)  # the deep copy has its own weights
    text = gm.print_readable(print_output=False)
    ttext = _torch.fx.symbolic_trace(tn).print_readable(print_output=False)
    strip = [ln for ln in ttext.replace("torch.", "ember.").splitlines() if "#" not in ln]
    assert text.strip().splitlines() == strip


def test_map_arg_and_node_api():
    from ember.fx.node import map_arg
    g = ember.fx.Graph()
    a, b = g.placeholder("a"), g.placeholder("b")
    c = g.call_function(operator.add, (a, [b, 1]), {"k": a})
    assert map_arg(c.args, lambda n: n.name) == ("a", ["b", 1])
    assert set(a.users) == {c} and c.all_input_nodes == [a, b]
    c.replace_input_with(a, b)
    assert c.args[0] is b and c.kwargs["k"] is b and not a.users
    with pytest.raises(NotImplementedError):
        c.args[1].append(3)
    d = g.call_function(operator.neg, (c,))
    c.prepend(d)
    assert [n.name for n in g.nodes] == ["a", "b", "neg", "add"]
    assert "call_function[target=operator.neg]" in d.format_node()
    assert math.isclose(1.0, 1.0)


def test_ember_fx_import_is_lazy():
    import os
    import subprocess
    import sys
    code = "import ember.fx, sys; print('ember.fx.graph' in sys.modules)"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))  # (Bazel)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env)
    assert out.stdout.strip() == "False"
