"""`unflatten(ep)`: the exported graph cut back into the original module hierarchy (as
torch.export.unflatten): each submodule call export saw becomes an InterpreterModule at the
submodule's name, running the slice of the graph that call traced, and its parent's graph
calls it (`call_module`); parameters and buffers sit at their original names.

Export records the calls (`record_module_calls`): each node traced inside a submodule's call
gets `meta["nn_module_stack"]` (outermost first, as PyTorch's) and the call's id; the call's
inputs and outputs are noted as graph nodes.
"""
from __future__ import annotations

import contextlib
import operator

import ember
from ember.fx import GraphModule
from ember.utils import _pytree as pytree

__all__ = ["unflatten", "InterpreterModule", "UnflattenedModule"]


@contextlib.contextmanager
def record_module_calls(mod, calls: list):
    """While tracing mod: note every submodule call (fqn, input/output node names, out spec)
    in calls, and tag the nodes it traced with its id."""
    from ember._higher_order_ops._subtrace import proxy_mode
    open_calls: dict = {}

    def last_node():
        mode = proxy_mode()
        return None if mode is None else mode.graph._root._prev

    def pre(fqn):
        def hook(m, args, kwargs):
            mode = proxy_mode()
            if mode is None:
                return None
            leaves = pytree.tree_leaves((args, kwargs))
            ins = [mode.lookup(t) if isinstance(t, ember.Tensor) else None for t in leaves]
            open_calls.setdefault(fqn, []).append((last_node(), ins))
            return None
        return hook

    def post(fqn):
        def hook(m, args, kwargs, out):
            mode = proxy_mode()
            if mode is None or not open_calls.get(fqn):
                return None
            start, ins = open_calls[fqn].pop()
            leaves, spec = pytree.tree_flatten(out)
            outs = [mode.lookup(t) if isinstance(t, ember.Tensor) else t for t in leaves]
            cid = len(calls)
            calls.append({"fqn": fqn, "ins": ins, "outs": outs, "out_spec": spec})
            node = mode.graph._root._prev
            while node is not start and node is not mode.graph._root:
                node.meta.setdefault("_ember_calls", []).insert(0, cid)
                stack = node.meta.setdefault("nn_module_stack", {})
                node.meta["nn_module_stack"] = {fqn: (fqn, type(m).__qualname__), **stack}
                node = node._prev
            return None
        return hook
    handles = []
    for fqn, sub in mod.named_modules():
        if fqn:
            handles.append(sub.register_forward_pre_hook(pre(fqn), with_kwargs=True))
            handles.append(sub.register_forward_hook(post(fqn), with_kwargs=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def finish_calls(calls: list, renamed: dict) -> list:
    """The calls with node references as names in the exported graph (renamed: old -> new)."""
    def name(n):
        if n is None or not hasattr(n, "name"):
            return n
        return renamed.get(n.name, n.name)
    return [dict(c, ins=[name(n) for n in c["ins"]], outs=[name(n) for n in c["outs"]])
            for c in calls]


class InterpreterModule(GraphModule):
    """A submodule of an unflattened program: runs its own slice of the exported graph."""

    def __init__(self, root, graph):
        super().__init__(root, graph, "InterpreterModule")


class UnflattenedModule(ember.nn.Module):
    """The root of `unflatten(ep)`: the original module tree rebuilt around the graph."""

    def __init__(self, ep):
        super().__init__()
        calls = getattr(ep, "_module_calls", None)
        if calls is None:
            raise NotImplementedError("unflatten needs a program from ember.export.export (its "
                                      "module calls); re-export this one")
        if any(s.kind.name != "USER_OUTPUT" for s in ep.graph_signature.output_specs):
            raise NotImplementedError("unflatten of a functionalized program (mutation "
                                      "outputs) is not supported; unflatten ep before "
                                      "run_decompositions()")
        self._ep = ep
        self._sig = ep.module_call_graph[0].signature
        state = {s.arg.name: s for s in ep.graph_signature.input_specs
                 if s.kind.name in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR")}
        for s in state.values():      # the state at its original names
            value = ep.state_dict.get(s.target, ep.constants.get(s.target))
            _place(self, s.target, value, s.kind, s.persistent)
        b = _Builder(ep, calls, state, self)
        nodes = [n for n in ep.graph.nodes if n.op not in ("placeholder", "output")]
        graph = b.build(nodes, "", [n for n in ep.graph.nodes if n.op == "placeholder"
                                    and n.name not in state], None)
        object.__setattr__(self, "_root_gm", InterpreterModule(self, graph))

    @property
    def graph(self):
        return self._root_gm.graph

    def forward(self, *args, **kwargs):
        flat, _ = pytree.tree_flatten((args, kwargs))
        outs = self._root_gm(*flat)
        return pytree.tree_unflatten(list(outs), self._sig.out_spec)


def _place(root, fqn: str, value, kind, persistent) -> None:
    *path, leaf = fqn.split(".")
    m = root
    for p in path:
        if p not in m._modules:
            m.add_module(p, ember.nn.Module())
        m = m._modules[p]
    if kind.name == "PARAMETER":
        p = value if isinstance(value, ember.nn.Parameter) else ember.nn.Parameter(value)
        m.register_parameter(leaf, p)
    elif kind.name == "BUFFER":
        m.register_buffer(leaf, value, persistent=persistent is not False)
    else:
        setattr(m, leaf, value)


class _Builder:
    """Cuts the exported graph into one graph per module call, innermost first."""

    def __init__(self, ep, calls, state, root):
        self.calls, self.state, self.root = calls, state, root
        self.by_name = {n.name: n for n in ep.graph.nodes}
        self.built: dict = {}   # fqn -> InterpreterModule (first call's)

    def build(self, nodes: list, fqn: str, inputs: list, call):
        """A graph over `nodes` (one scope): inputs become placeholders, each direct child
        call becomes a call_module, the call's outputs (or the program's) are returned."""
        from ember.fx import Graph
        g = Graph()
        env: dict = {}
        for n in inputs:
            env[n] = g.placeholder(n.name)
        depth = len(call["path"]) if call is not None else 0
        region = set(nodes)
        i = 0
        while i < len(nodes):
            n = nodes[i]
            cids = n.meta.get("_ember_calls", [])
            if len(cids) > depth:      # the first node of a direct child call
                cid = cids[depth]
                child = [m for m in nodes[i:] if len(m.meta.get("_ember_calls", [])) > depth
                         and m.meta["_ember_calls"][depth] == cid]
                self._emit_call(g, env, cid, child, fqn, region)
                i += len(child)
                continue
            env[n] = g.node_copy(n, lambda a: self._value(g, env, a, fqn))
            i += 1
        if call is None:
            out = next(n for n in self.by_name.values() if n.op == "output")
            g.output(tuple(self._value(g, env, a, fqn) for a in out.args[0]))
        else:
            outs = [self._value(g, env, self.by_name[o], fqn) if isinstance(o, str) else o
                    for o in call["outs"]]
            g.output(outs[0] if call["out_spec"].is_leaf() else tuple(outs))
        g.lint()
        return g

    def _value(self, g, env, a, fqn: str):
        if a in env:
            return env[a]
        if a.op == "call_function" and _is_size_node(a):   # a size: computed here again
            env[a] = self._size_here(g, env, a) or \
                g.node_copy(a, lambda b: self._value(g, env, b, fqn))
            return env[a]
        spec = self.state.get(a.name) if a.op == "placeholder" else None
        if spec is not None:         # a parameter/buffer: an attribute of this module
            rel = spec.target[len(fqn) + 1:] if fqn and spec.target.startswith(fqn + ".") \
                else spec.target if not fqn else None
            if rel is not None:
                env[a] = g.get_attr(rel)
                return env[a]
        raise NotImplementedError(f"unflatten: {a.name} is used inside the call of "
                                  f"'{fqn}' but defined outside it (not one of its inputs)")

    def _size_here(self, g, env, a):
        """`sym_size(t, d)` of a tensor outside this scope: the same size read from one of
        this scope's inputs that carries it (its symbol in the tensor metadata), if any."""
        from ember.fx.experimental.proxy_tensor import sym_size
        if a.target is not sym_size or a.args[0] in env or "sym" not in a.meta:
            return None
        want = a.meta["sym"][0]
        for src, ph in env.items():
            spec = src.meta.get("tensor_meta") if ph.op == "placeholder" else None
            for d, s in enumerate(getattr(spec, "shape", ()) or ()):
                if not isinstance(s, int) and s == want:
                    return g.call_function(sym_size, (ph, d))
        return None

    def _emit_call(self, g, env, cid: int, nodes: list, parent: str, region: set) -> None:
        call = self.calls[cid]
        fqn = call["fqn"]
        call = dict(call, path=nodes[0].meta["_ember_calls"][:nodes[0].meta[
            "_ember_calls"].index(cid) + 1])
        ins = [self.by_name[x] for x in call["ins"] if isinstance(x, str)]
        sub_graph = self.build(nodes, fqn, ins, call)
        rel = fqn[len(parent) + 1:] if parent else fqn
        mod = self.built.get(fqn)
        if mod is None:
            owner = _owner(self.root, fqn)
            mod = InterpreterModule(owner, sub_graph)
            _attach(self.root, fqn, mod)
            self.built[fqn] = mod
        elif mod.code != InterpreterModule(_owner(self.root, fqn), sub_graph).code:
            raise NotImplementedError(f"unflatten: '{fqn}' is called twice with different "
                                      "graphs")
        node = g.call_module(rel, tuple(env[x] if x in env else self._value(g, env, x, parent)
                                        for x in ins))
        outs = [o for o in call["outs"]]
        if call["out_spec"].is_leaf():
            env[self.by_name[outs[0]]] = node
        else:
            for k, o in enumerate(outs):
                if isinstance(o, str):
                    env[self.by_name[o]] = g.call_function(operator.getitem, (node, k))
        inside = set(nodes)
        for n in nodes:             # sizes the call computed that code after it reads again
            if n not in env and any(u not in inside and u in region for u in n.users):
                if n.op == "call_function" and not isinstance(n.target, ember.fx.GraphModule) \
                        and _is_size_node(n):
                    env[n] = g.node_copy(n, lambda a: self._value(g, env, a, parent))
                else:
                    raise NotImplementedError(f"unflatten: {n.name}, computed inside the call "
                                              f"of '{fqn}', is used after it but is not one "
                                              "of its outputs")


def _is_size_node(n) -> bool:
    from ember.fx.experimental.proxy_tensor import sym_size
    return n.target is sym_size or getattr(n.target, "__module__", "") in ("_operator",
                                                                          "operator")


def _owner(root, fqn: str):
    m = root
    for p in fqn.split("."):
        if p not in m._modules:      # (a module without state: nothing placed it yet)
            m.add_module(p, ember.nn.Module())
        m = m._modules[p]
    return m


def _attach(root, fqn: str, mod) -> None:
    """Put mod at fqn, keeping the parameters/buffers/children already there (moved in)."""
    *path, leaf = fqn.split(".")
    m = root
    for p in path:
        m = m._modules[p]
    old = m._modules.get(leaf)
    if old is not None:
        for k, v in old._parameters.items():
            mod._parameters.setdefault(k, v)
        for k, v in old._buffers.items():
            mod._buffers.setdefault(k, v)
        for k, v in old._modules.items():
            mod._modules.setdefault(k, v)
    m._modules[leaf] = mod


def unflatten(ep, flat_args_adapter=None) -> UnflattenedModule:
    """The exported program as a module tree like the original (torch.export.unflatten).

    >>> import ember
    >>> m = ember.nn.Sequential(ember.nn.Linear(4, 3), ember.nn.ReLU())
    >>> u = unflatten(ember.export.export(m, (ember.ones(2, 4),)))
    >>> sorted(n for n, _ in u.named_parameters())
    ['0.bias', '0.weight']
    """
    return UnflattenedModule(ep)
