"""`make_fx`: run a function under a dispatch mode that records every op-table call, giving a
GraphModule whose call_function targets are table entries (`ember.ops.aten.mm.default`).

tracing_mode="real" computes on the real inputs while recording; "fake" runs on FakeTensors
(meta storage, each op's meta function) so nothing is computed; "symbolic" also gives the
inputs symbolic sizes (`symbolic_shapes.ShapeEnv`), so the graph computes sizes from its inputs
and runs on other sizes its guards (`gm.shape_env`) allow.

>>> import ember
>>> from ember.fx.experimental.proxy_tensor import make_fx
>>> gm = make_fx(lambda x: (x * 2).relu())(ember.ones(3))
>>> print(gm.code.strip().splitlines()[1].strip())
mul = ember.ops.aten.mul.default(x_1, 2);  x_1 = None
"""
from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable

from ember import Tensor
from ember._dispatch import DispatchMode, call
from ember.nn import Parameter

from .._op_args import split_op_args
from ..graph import Graph
from ..graph_module import GraphModule
from ..node import map_aggregate

__all__ = ["make_fx", "ProxyTorchDispatchMode", "sym_size", "functionalize"]


def functionalize(f: Callable) -> Callable:
    """f, marked so `make_fx(functionalize(f))` gives a graph without in-place ops (mutated
    inputs are copied back at its end); called directly it is just f."""
    def functionalized(*args, **kwargs):
        return f(*args, **kwargs)
    functionalized._ember_functionalize = True
    functionalized.__wrapped__ = f
    return functionalized


def sym_size(t: Tensor, dim: int) -> int:
    """`t.size(dim)` as a graph node (PyTorch's aten.sym_size.int)."""
    return t.size(dim)


class ProxyTorchDispatchMode(DispatchMode):
    """Records each op call into `graph`; tensors are tracked by identity to their nodes."""

    def __init__(self, graph: Graph, decomposition_table: dict | None = None):
        self.graph = graph
        self.decomposition_table = decomposition_table or {}
        self.tracked: dict = {}     # id(tensor) -> (tensor, node)
        self.by_view: dict = {}     # (storage, shape, strides, offset, dtype) -> node
        self.constants: dict = {}   # attribute name -> tensor
        self.sym_nodes: dict = {}   # sympy expression -> node (or constant)
        self.inputs: dict = {}      # input name -> its placeholder
        self.unbacked: dict = {}    # unbacked symbol -> (the tensor it sizes, dim)

    def track(self, t: Tensor, node) -> None:
        self.tracked[id(t)] = (t, node)
        self.by_view[_view_key(t)] = node

    def lookup(self, t: Tensor):
        """The node of a tensor this trace has seen, else None."""
        hit = self.tracked.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        # a detached alias of a traced value (what autograd saves for backward) is that value
        node = self.by_view.get(_view_key(t))
        if node is not None:
            self.tracked[id(t)] = (t, node)
        return node

    def node_of(self, t: Tensor):
        node = self.lookup(t)
        if node is not None:
            return node
        prefix = "_param_constant" if isinstance(t, Parameter) else "_tensor_constant"
        name = f"{prefix}{sum(k.startswith(prefix) for k in self.constants)}"
        self.constants[name] = t
        node = self.graph.get_attr(name)
        self.track(t, node)
        return node

    def _arg(self, a):
        def one(x):
            if isinstance(x, Tensor):
                return self.node_of(x)
            if getattr(type(x), "_sym_kind", None) is not None:  # SymInt/SymFloat/SymBool
                return self.sym_node(x.expr, x.env)
            return x
        return map_aggregate(a, one)

    def record_item(self, t: Tensor, value) -> None:
        """`t.item()` on a fake tensor: a node computing the value the symbol stands for."""
        self.sym_nodes[value.expr] = self.graph.call_method("item", (self.node_of(t),))

    def _bind_unbacked(self, r) -> None:
        """Note which output first carries each new unbacked size (`nonzero`'s rows)."""
        for t in (r if isinstance(r, (tuple, list)) else (r,)):
            if isinstance(t, Tensor):
                for d, n in enumerate(t.shape):
                    e = getattr(n, "expr", None)
                    if e is not None and e.is_Symbol and e not in self.unbacked and \
                            e in n.env.unbacked:
                        self.unbacked[e] = (t, d)

    def sym_node(self, expr, env):
        """A graph value computing a symbolic size from the inputs' sizes."""
        import operator

        import sympy
        hit = self.sym_nodes.get(expr)
        if hit is not None:
            return hit
        if expr.is_Integer:
            return int(expr)
        if expr.is_Float or expr.is_Rational:
            return float(expr)
        if expr.is_Symbol and expr in self.unbacked:  # a size of an op's output
            t, dim = self.unbacked[expr]
            node = self.graph.call_function(sym_size, (self.node_of(t), dim))
        elif expr.is_Symbol:
            name, dim = env.var_to_sources[expr][0]
            node = self.graph.call_function(sym_size, (self.inputs[name], dim))
        elif isinstance(expr, (sympy.Add, sympy.Mul)):
            fn = operator.add if isinstance(expr, sympy.Add) else operator.mul
            args = [self.sym_node(a, env) for a in expr.args]
            node = args[0]
            for b in args[1:]:
                node = self.graph.call_function(fn, (node, b))
        elif isinstance(expr, sympy.Pow):
            node = self.graph.call_function(operator.pow, (self.sym_node(expr.base, env),
                                                           self.sym_node(expr.exp, env)))
        elif isinstance(expr, sympy.floor) and isinstance(expr.args[0], sympy.Mul):
            num, den = sympy.fraction(expr.args[0])
            node = self.graph.call_function(operator.floordiv, (self.sym_node(num, env),
                                                                self.sym_node(den, env)))
        elif isinstance(expr, sympy.Rel) and type(expr) in _RELATIONS:   # a SymBool
            node = self.graph.call_function(_RELATIONS[type(expr)], (
                self.sym_node(expr.lhs, env), self.sym_node(expr.rhs, env)))
        elif isinstance(expr, sympy.Not):
            node = self.graph.call_function(operator.not_, (self.sym_node(expr.args[0], env),))
        elif isinstance(expr, sympy.Mod):
            node = self.graph.call_function(operator.mod, tuple(self.sym_node(a, env)
                                                                for a in expr.args))
        else:
            raise NotImplementedError(f"make_fx(tracing_mode='symbolic'): cannot compute the "
                                      f"size expression {expr} in the graph")
        self.sym_nodes[expr] = node
        return node

    def __ember_dispatch__(self, op, args, out):
        decomp = self.decomposition_table.get(op)
        if decomp is not None:
            with self:  # the decomposition's own op calls are recorded
                return decomp(*args)
        if op.vjp is None and op.decomp is not None and op.inplace_of is None and \
                _records_grad(op, args):
            # autograd differentiates a composite through its decomposition, saving the
            # decomposition's values for backward: those must be graph values too
            r = self._trace_composite(op, args)
            if r is not _DATA_DEPENDENT:
                return r
        r = call(op, args, out)
        if op.device_idx is not None and args[op.device_idx] is None and \
                isinstance(r, Tensor) and not _has_tensor(op, args):
            # a factory's default device (a `with device` block, set_default_device) is read
            # when it runs: the graph names the device it ran on
            args = (*args[:op.device_idx], r.device, *args[op.device_idx + 1:])
        a, kw = split_op_args(op, args)
        self._bind_unbacked(r)
        node = self.graph.call_function(op, self._arg(a), self._arg(kw))
        if op.name == "copy_" and isinstance(args[1], Tensor):  # (read by functionalization)
            src, dst = args[1], args[0]
            node.meta["copy_same_meta"] = src.dtype == dst.dtype and len(src.shape) == len(
                dst.shape) and all(_same_size(p, q) for p, q in zip(src.shape, dst.shape))
            node.meta["copy_dtype"] = dst.dtype
        if isinstance(r, Tensor):
            if not op.mutated_idx and args and isinstance(args[0], Tensor) and \
                    r._storage is args[0]._storage:   # (read by functionalization)
                node.meta["aliases_input"] = True     # a view (`reshape` when it can be one)
                node.meta["same_view"] = _view_key(r) == _view_key(args[0])  # (`contiguous`)
            self.track(r, node)
        elif isinstance(r, (tuple, list)):
            import operator
            for i, x in enumerate(r):
                if isinstance(x, Tensor):
                    item = self.graph.call_function(operator.getitem, (node, i))
                    if args and isinstance(args[0], Tensor) and not op.mutated_idx and \
                            x._storage is args[0]._storage:   # (`unbind`, `split` views)
                        item.meta["aliases_input"] = node.meta["aliases_input"] = True
                    self.track(x, item)
        return r


def _has_tensor(op, args) -> bool:
    """Whether a tensor argument (which places the op's result) is among op's args."""
    return any(isinstance(args[i], Tensor) for i in op.tensor_idx) or any(
        isinstance(a, Tensor) for i in op.list_idx for a in (args[i] or ()))


def _records_grad(op, args) -> bool:
    """Whether autograd records this call (grad mode on and an input requires grad)."""
    from ember._state import state
    if not state.grad_enabled:
        return False
    for i in op.tensor_idx:
        if getattr(args[i], "_requires_grad", False):
            return True
    return any(getattr(x, "_requires_grad", False) for i in op.list_idx for x in args[i])


def _relations() -> dict:
    import operator

    import sympy
    return {sympy.StrictGreaterThan: operator.gt, sympy.GreaterThan: operator.ge,
            sympy.StrictLessThan: operator.lt, sympy.LessThan: operator.le,
            sympy.Equality: operator.eq, sympy.Unequality: operator.ne}


class _LazyRelations(dict):
    """sympy's relation classes -> operator functions, built on first use (sympy loads only
    for symbolic traces)."""

    def __missing__(self, key):
        self.update(_relations())
        if key not in self:
            raise KeyError(key)
        return self[key]

    def __contains__(self, key):
        if not len(self):
            self.update(_relations())
        return dict.__contains__(self, key)


_RELATIONS = _LazyRelations()


def _same_size(p, q) -> bool:
    """Whether two sizes are the same for every input (equal ints or equal expressions)."""
    return getattr(p, "expr", p) == getattr(q, "expr", q)


_DATA_DEPENDENT = object()


def _trace_composite(self, op, args):
    """op's decomposition, recorded; if it reads data (a value check on fake tensors) the
    nodes it added are taken out again and _DATA_DEPENDENT is returned (the op is then
    recorded whole, as without grad)."""
    from ember._subclasses.fake_tensor import DataDependentOutputException
    mark = self.graph._root._prev
    try:
        with self:
            return op.decomp(*args)
    except DataDependentOutputException:
        gone = set()
        node = self.graph._root._prev
        while node is not mark:
            prev = node._prev
            node.args, node.kwargs = (), {}
            gone.add(node)
            node = prev
        for n in [n for n in self.graph.nodes if n in gone][::-1]:
            self.graph.erase_node(n)
        self.sym_nodes = {k: v for k, v in self.sym_nodes.items() if v not in gone}
        self.tracked = {k: v for k, v in self.tracked.items() if v[1] not in gone}
        self.by_view = {k: v for k, v in self.by_view.items() if v not in gone}
        return _DATA_DEPENDENT


ProxyTorchDispatchMode._trace_composite = _trace_composite


def _view_key(t: Tensor) -> tuple:
    st = t._storage
    return (id(st), st, repr(t._shape), repr(t._stride), repr(t._offset), t.dtype)


def _placeholder_names(f: Callable, n: int) -> list:
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(names) < n or any(p.kind == p.VAR_POSITIONAL for p in params):
        return [f"arg{i}_1" for i in range(n)]
    return [f"{nm}_1" for nm in names[:n]]


def _leaf_names(names: list, args) -> tuple[list, list]:
    """Placeholder names per input leaf (`x_1`; `xs_1, xs_2` for the leaves of a nested xs,
    as torch's) and each one's key as a source of symbolic sizes (`x`, `xs_1`, ...)."""
    from ember.utils import _pytree as pytree
    out, keys = [], []
    for name, a in zip(names, args):
        leaves = pytree.tree_leaves(a)
        if not isinstance(a, (tuple, list, dict)):
            out.append(name)
            keys.append(name[:-2])
            continue
        base = name[:-2]
        for j in range(len(leaves)):
            out.append(f"{base}_{j + 1}")
            keys.append(f"{base}_{j + 1}")
    return out, keys


def _take_nested_inputs(gm, in_spec) -> None:
    """gm(*args) with args nested as at trace time: flattened onto the placeholders."""
    from ember.utils import _pytree as pytree
    flat_forward = gm.forward

    def forward(*args):
        flat, spec = pytree.tree_flatten(list(args))
        if str(spec) != str(in_spec):
            raise ValueError(f"the traced function took inputs structured as {in_spec}, "
                             f"got {spec}")
        return flat_forward(*flat)
    gm.forward = forward
    gm._in_spec = in_spec


def make_fx(f: Callable, decomposition_table: dict | None = None, tracing_mode: str = "real",
            _allow_non_fake_inputs: bool = True, **kwargs) -> Callable:
    """Return a function that traces f on its arguments into a GraphModule of table ops.

    decomposition_table: {op: fn} whose ops are traced through fn instead of recorded."""
    if tracing_mode not in ("real", "fake", "symbolic"):
        raise AssertionError(f"Unexpected tracing type: {tracing_mode}")
    def wrapped(*args):
        from ember.utils import _pytree as pytree
        graph = Graph()
        mode = ProxyTorchDispatchMode(graph, decomposition_table)
        from ember._subclasses.fake_tensor import FakeTensor
        # nested inputs (tuples, lists, dicts of tensors): one placeholder per leaf
        flat, in_spec = pytree.tree_flatten(list(args))
        nested = any(not c.is_leaf() for c in in_spec.children_specs)
        names, keys = _leaf_names(_placeholder_names(f, len(args)), args)
        # inputs already fake (export makes its own, symbolic only where asked): their mode
        fake = next((a.fake_mode for a in flat if isinstance(a, FakeTensor)), None)
        if fake is None and tracing_mode != "real":
            from ember._subclasses.fake_tensor import FakeTensorMode
            env = None
            if tracing_mode == "symbolic":
                from .symbolic_shapes import ShapeEnv  # (sympy loads only for symbolic traces)
                env = ShapeEnv()
            fake = FakeTensorMode(allow_non_fake_inputs=_allow_non_fake_inputs, shape_env=env)
            flat = [fake.from_tensor(a, source=k) if isinstance(a, Tensor) else a
                    for k, a in zip(keys, flat)]
        for name, key, a in zip(names, keys, flat):
            ph = graph.placeholder(name)
            mode.inputs[key] = ph
            if isinstance(a, Tensor):
                mode.track(a, ph)
        args = pytree.tree_unflatten(flat, in_spec)
        with (fake if fake is not None else contextlib.nullcontext()), mode:
            result = f(*args)
        graph.output(mode._arg(result))
        gm = GraphModule(dict(mode.constants), graph, "f" if not hasattr(f, "__name__")
                           or f.__name__ == "<lambda>" else f.__name__)
        if getattr(f, "_ember_functionalize", False):
            from ..passes.functionalize import functionalize_graph
            functionalize_graph(gm)
        if fake is not None and fake.shape_env is not None:
            gm.shape_env = fake.shape_env  # its guards: what the graph assumed of the sizes
        if nested:
            _take_nested_inputs(gm, in_spec)
        return gm
    return wrapped
