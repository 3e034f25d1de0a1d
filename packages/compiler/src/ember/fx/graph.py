"""`ember.fx.Graph`: an ordered list of Nodes with builders, copying, `lint()` and dead-code
elimination; it prints as IR (`print(graph)`) and as Python (`graph.python_code()`).

>>> import ember.fx as fx
>>> g = fx.Graph()
>>> x = g.placeholder("x")
>>> _ = g.output(g.call_method("relu", (x,)))
>>> print(g.python_code("self").src.strip().splitlines()[1].strip())
relu = x.relu();  x = None
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from ._codegen import Namespace, PythonCode, python_code, target_to_str
from .node import Node, map_arg

__all__ = ["Graph", "PythonCode"]


class _NodeList:
    def __init__(self, graph, reverse: bool = False):
        self._graph = graph
        self._reverse = reverse

    def __len__(self) -> int:
        return self._graph._len

    def __iter__(self):
        root = self._graph._root
        cur = root._prev if self._reverse else root._next
        while cur is not root:
            nxt = cur._prev if self._reverse else cur._next
            if not cur._erased:
                yield cur
            cur = nxt

    def __reversed__(self):
        return iter(_NodeList(self._graph, not self._reverse))


class Graph:
    """The nodes of one function, in execution order (torch.fx.Graph)."""

    def __init__(self, owning_module=None, tracer_cls=None, tracer_extras=None):
        self._root = Node(self, "", "placeholder", "", (), {})
        self._len = 0
        self._graph_namespace = Namespace()
        self._owning_module = owning_module
        self._tracer_cls = tracer_cls
        self._tracer_extras = tracer_extras
        self._insert = self._root.prepend

    @property
    def owning_module(self):
        return self._owning_module

    @owning_module.setter
    def owning_module(self, mod):
        self._owning_module = mod

    @property
    def nodes(self) -> _NodeList:
        return _NodeList(self)

    def find_nodes(self, *, op: str, target=None, sort: bool = True) -> list:
        return [n for n in self.nodes if n.op == op and (target is None or n.target == target)]

    # ---- building ---------------------------------------------------------------------------
    def create_node(self, op: str, target, args: tuple | None = None, kwargs: dict | None = None,
                    name: str | None = None, type_expr: Any | None = None) -> Node:
        candidate = name if name is not None else target_to_str(target)
        name = self._graph_namespace.create_name(candidate)
        n = Node(self, name, op, target, tuple(args or ()), dict(kwargs or {}), type_expr)
        self._graph_namespace.associate_name_with_obj(name, n)
        self._insert(n)
        self._len += 1
        return n

    def placeholder(self, name: str, type_expr: Any | None = None,
                    default_value: Any = inspect.Signature.empty) -> Node:
        args = () if default_value is inspect.Signature.empty else (default_value,)
        return self.create_node("placeholder", name, args, {}, type_expr=type_expr)

    def get_attr(self, qualified_name: str, type_expr: Any | None = None) -> Node:
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_module(self, module_name: str, args=None, kwargs=None, type_expr=None) -> Node:
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name: str, args=None, kwargs=None, type_expr=None) -> Node:
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_function(self, the_function: Callable, args=None, kwargs=None,
                      type_expr=None) -> Node:
        return self.create_node("call_function", the_function, args, kwargs,
                                type_expr=type_expr)

    def output(self, result, type_expr: Any | None = None) -> Node:
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    def erase_node(self, to_erase: Node) -> None:
        """Remove a node that nothing uses any more."""
        if to_erase.users:
            raise RuntimeError(f"Tried to erase Node {to_erase} but it still had "
                               f"{len(to_erase.users)} users in the graph: {to_erase.users}!")
        if to_erase.graph is not self:
            raise RuntimeError(f"Attempting to remove {to_erase} from wrong graph!")
        if to_erase._erased:
            return
        to_erase._remove_from_list()
        to_erase._erased = True
        self._len -= 1
        to_erase._update_args_kwargs((), {})
        self._graph_namespace.release(to_erase.name)

    # ---- insertion point --------------------------------------------------------------------
    @contextmanager
    def _insert_point(self, fn):
        old = self._insert
        self._insert = fn
        try:
            yield
        finally:
            self._insert = old

    def inserting_before(self, n: Node | None = None):
        """`with graph.inserting_before(n):` new nodes go just before n (None: the start)."""
        if n is None:
            return self.inserting_after(self._root)
        assert n.graph is self, "Node to insert before is not in graph."
        return self._insert_point(n.prepend)

    def inserting_after(self, n: Node | None = None):
        """`with graph.inserting_after(n):` new nodes go just after n (None: the end)."""
        if n is None:
            return self.inserting_before(self._root)
        assert n.graph is self, "Node to insert after is not in graph."
        cursor = [n]

        def insert(x):  # each new node after the previous one: a chain keeps its order
            cursor[0].append(x)
            cursor[0] = x
        return self._insert_point(insert)

    # ---- copying ----------------------------------------------------------------------------
    def node_copy(self, node: Node, arg_transform: Callable[[Node], Any] = lambda x: x) -> Node:
        """A copy of a node from another graph, its inputs mapped through arg_transform."""
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        new = self.create_node(node.op, node.target, args, kwargs, node.name, node.type)
        new.meta = dict(node.meta)
        return new

    def graph_copy(self, g: Graph, val_map: dict, return_output_node: bool = False):
        """Copy g's nodes into this graph; val_map maps g's nodes to ours (filled in)."""
        for node in g.nodes:
            if node in val_map:
                continue
            if node.op == "output":
                rv = map_arg(node.args[0], lambda n: val_map[n])
                return (rv, node) if return_output_node else rv
            val_map[node] = self.node_copy(node, lambda n: val_map[n])
        return None

    def __deepcopy__(self, memo=None) -> Graph:
        memo = memo if memo is not None else {}
        g = Graph(tracer_cls=self._tracer_cls)
        out = g.graph_copy(self, {}, return_output_node=True)
        memo[id(self)] = g
        if out is not None:
            rv, node = out
            g.output(rv, type_expr=node.type)
        return g

    # ---- passes -----------------------------------------------------------------------------
    def eliminate_dead_code(self, is_impure_node: Callable[[Node], bool] | None = None) -> bool:
        """Erase nodes without users whose removal changes nothing; True if any was erased."""
        impure = is_impure_node or (lambda n: n.is_impure())
        changed = False
        for node in reversed(self.nodes):
            if not impure(node) and not node.users:
                self.erase_node(node)
                changed = True
        return changed

    def lint(self) -> None:
        """Check the graph's invariants; raise RuntimeError naming the first broken one."""
        seen: set = set()
        names: set = set()
        for node in self.nodes:
            if node.graph is not self:
                raise RuntimeError(f"Node '{node}' does not belong to this Graph!")
            if node.name in names:
                raise RuntimeError(f"Node redefined name {node.name}!")
            names.add(node.name)
            for inp in node.all_input_nodes:
                if inp.graph is not self:
                    raise RuntimeError(f"Argument '{inp}' of Node '{node}' does not belong to "
                                       "this Graph!")
                if inp not in seen:
                    raise RuntimeError(f"Argument '{inp}' of Node '{node}' was used before it "
                                       "has been defined! Please check that Nodes in the graph "
                                       "are topologically ordered")
                if node not in inp.users:
                    raise RuntimeError(f"Node '{node}' uses '{inp}' but is not in its users")
            for u in node.users:
                if u._erased or node not in u._input_nodes:
                    raise RuntimeError(f"Node '{node}' lists user '{u}' that does not use it")
            self._lint_target(node)
            seen.add(node)
        outputs = [n for n in self.nodes if n.op == "output"]
        if len(outputs) > 1:
            raise RuntimeError(f"Graph has {len(outputs)} output nodes; expected at most one")
        if outputs and outputs[0] is not list(reversed(self.nodes))[0]:
            raise RuntimeError("The output node is not the last node of the graph")

    def _lint_target(self, node: Node) -> None:
        mod = self._owning_module
        if mod is None or node.op not in ("get_attr", "call_module"):
            return
        cur = mod
        for i, atom in enumerate(node.target.split(".")):
            if not hasattr(cur, atom):
                seen = ".".join(node.target.split(".")[:i])
                raise RuntimeError(f"Node {node.name} target {node.target} references "
                                   f"nonexistent attribute {atom} of {seen or 'the root'}")
            cur = getattr(cur, atom)
        from ember.nn import Module
        if node.op == "call_module" and not isinstance(cur, Module):
            raise RuntimeError(f"Node {node.name} target {node.target} {atom} is not a Module")

    # ---- printing ---------------------------------------------------------------------------
    def python_code(self, root_module: str = "self", *, verbose: bool = False) -> PythonCode:
        """The graph as a Python function `forward(root_module, ...)` and its globals."""
        return python_code(self, root_module)

    def __str__(self) -> str:
        lines = [n.format_node() for n in self.nodes]
        return "graph():\n" + "\n".join("    " + s for s in lines if s is not None)

    def print_tabular(self) -> None:
        rows = [(n.op, n.name, str(n.target), str(n.args), str(n.kwargs)) for n in self.nodes]
        head = ("opcode", "name", "target", "args", "kwargs")
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(5)]
        for r in [head, tuple("-" * w for w in widths), *rows]:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)))

    def _target_to_str(self, target) -> str:
        return target_to_str(target)
