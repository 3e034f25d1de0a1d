"""`Interpreter` runs a GraphModule node by node (`getattr(self, n.op)(...)`), so subclasses can
observe or change each step; `Transformer` re-traces through it into a new GraphModule."""
from __future__ import annotations

from typing import Any

from .graph import Graph
from .graph_module import GraphModule
from .node import Node, map_aggregate, map_arg
from .proxy import Proxy, TracerBase

__all__ = ["Interpreter", "Transformer"]


class Interpreter:
    """Execute a GraphModule one node at a time (torch.fx.Interpreter).

    >>> import ember, ember.fx
    >>> gm = ember.fx.symbolic_trace(lambda x: x * 2)
    >>> ember.fx.Interpreter(gm).run(ember.tensor([1.0])).tolist()
    [2.0]
    """

    def __init__(self, module, garbage_collect_values: bool = True, graph: Graph | None = None):
        self.module = module
        self.submodules = dict(module.named_modules())
        self.graph = graph if graph is not None else module.graph
        self.env: dict[Node, Any] = {}
        self.name = "Interpreter"
        self.garbage_collect_values = garbage_collect_values
        self.extra_traceback = True
        if garbage_collect_values:
            # free each value after its last use
            last: dict = {}
            self.user_to_last_uses: dict = {}
            for node in reversed(self.graph.nodes):
                for n in node.all_input_nodes:
                    if n not in last:
                        last[n] = node
                        self.user_to_last_uses.setdefault(node, []).append(n)

    def run(self, *args, initial_env: dict | None = None, enable_io_processing: bool = True):
        """Run the graph on args; returns what its output node returns."""
        self.env = dict(initial_env) if initial_env is not None else {}
        self.args_iter = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            try:
                self.env[node] = self.run_node(node)
            except Exception as e:
                if self.extra_traceback:
                    msg = f"While executing {node.format_node()}"
                    e.args = (f"{e.args[0]}\n\n{msg}" if e.args and isinstance(e.args[0], str)
                              else msg, *e.args[1:])
                raise
            if self.garbage_collect_values:
                for to_delete in self.user_to_last_uses.get(node, []):
                    self.env.pop(to_delete, None)
            if node.op == "output":
                return self.env[node]
        return None

    def boxed_run(self, args_list: list):
        args_iter = iter(args_list)
        env = {}
        for n in self.graph.nodes:
            if n.op == "placeholder":
                env[n] = next(args_iter)
        args_list.clear()
        return self.run(initial_env=env)

    def run_node(self, n: Node) -> Any:
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        assert isinstance(args, tuple) and isinstance(kwargs, dict)
        return getattr(self, n.op)(n.target, args, kwargs)

    # ---- one method per opcode --------------------------------------------------------------
    def placeholder(self, target: str, args: tuple, kwargs: dict) -> Any:
        if target.startswith("*"):
            return list(self.args_iter)
        try:
            return next(self.args_iter)
        except StopIteration as si:
            if args:
                return args[0]
            raise RuntimeError(f"Expected positional argument for parameter {target}, but one "
                               "was not passed in!") from si

    def get_attr(self, target: str, args: tuple, kwargs: dict) -> Any:
        return self.fetch_attr(target)

    def call_function(self, target, args: tuple, kwargs: dict) -> Any:
        return target(*args, **kwargs)

    def call_method(self, target: str, args: tuple, kwargs: dict) -> Any:
        self_obj, *rest = args
        return getattr(self_obj, target)(*rest, **kwargs)

    def call_module(self, target: str, args: tuple, kwargs: dict) -> Any:
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target, args: tuple, kwargs: dict) -> Any:
        return args[0]

    # ---- helpers ----------------------------------------------------------------------------
    def fetch_attr(self, target: str) -> Any:
        obj = self.module
        for i, atom in enumerate(target.split(".")):
            if not hasattr(obj, atom):
                raise RuntimeError(f"Node referenced nonexistent target "
                                   f"{'.'.join(target.split('.')[:i + 1])}")
            obj = getattr(obj, atom)
        return obj

    def fetch_args_kwargs_from_env(self, n: Node) -> tuple[tuple, dict]:
        return self.map_nodes_to_values(n.args, n), self.map_nodes_to_values(n.kwargs, n)

    def map_nodes_to_values(self, args, n: Node):
        def load(a):
            if a not in self.env:
                raise RuntimeError(f"Node {n} referenced nonexistent value {a}! Run "
                                   "Graph.lint() to diagnose such issues")
            return self.env[a]
        return map_arg(args, load)


class _TransformerTracer(TracerBase):
    def __init__(self, graph: Graph):
        self.graph = graph
        self.tensor_attrs: dict = {}

    def is_leaf_module(self, _, __) -> bool:
        return True


class Transformer(Interpreter):
    """Interpret a GraphModule on Proxies to build a new one; override a method (say
    `call_function`) to rewrite what each node becomes (torch.fx.Transformer)."""

    def __init__(self, module):
        super().__init__(module)
        self.new_graph = Graph()
        self.new_graph._tracer_cls = getattr(module.graph, "_tracer_cls", None)
        self.tracer = _TransformerTracer(self.new_graph)
        self.tracer.root = module

    def placeholder(self, target: str, args: tuple, kwargs: dict) -> Proxy:
        default = next(iter(args), None) if args else None
        args_ = () if not args else (default,)
        return Proxy(self.new_graph.placeholder(target, default_value=args_[0])
                     if args_ else self.new_graph.placeholder(target), self.tracer)

    def get_attr(self, target: str, args: tuple, kwargs: dict) -> Proxy:
        return self.tracer.create_proxy("get_attr", target, args, kwargs)

    def call_module(self, target: str, args: tuple, kwargs: dict) -> Any:
        return self.tracer.create_proxy("call_module", target, args, kwargs)

    def call_function(self, target, args: tuple, kwargs: dict) -> Any:
        return self.tracer.create_proxy("call_function", target, args, kwargs)

    def call_method(self, target: str, args: tuple, kwargs: dict) -> Any:
        return self.tracer.create_proxy("call_method", target, args, kwargs)

    def transform(self) -> GraphModule:
        """The transformed GraphModule."""
        from ._symbolic_trace import proxy_functions
        with proxy_functions():
            result = super().run(enable_io_processing=False)
        if result is not None:
            def strip(a):
                return a.node if isinstance(a, Proxy) else a
            self.new_graph.output(map_aggregate(result, strip))
        return GraphModule(self.module, self.new_graph)
