"""`ember.fx.Proxy`: stands in for a value during symbolic tracing; every operation on it
(operators, methods, attribute reads, ember.* calls) records a Node instead of computing.
"""
from __future__ import annotations

import dis
import inspect
import operator

from .node import map_aggregate

__all__ = ["Proxy", "Attribute", "TraceError", "TracerBase", "GraphAppendingTracer", "find_proxy"]


class TraceError(ValueError):
    pass


class TracerBase:
    """The recording half of a tracer: turn calls on Proxies into graph nodes."""

    graph = None
    record_stack_traces = False

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        return self.graph.create_node(kind, target, args, kwargs, name, type_expr)

    def proxy(self, node) -> Proxy:
        return Proxy(node, self)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None,
                     proxy_factory_fn=None) -> Proxy:
        """Record `kind(target)(*args, **kwargs)` and return a Proxy for its result."""
        args_ = self.create_arg(args)
        kwargs_ = self.create_arg(kwargs)
        assert isinstance(args_, tuple) and isinstance(kwargs_, dict)
        node = self.create_node(kind, target, args_, kwargs_, name, type_expr)
        return self.proxy(node) if proxy_factory_fn is None else proxy_factory_fn(node)

    def create_arg(self, a):
        """A call argument as graph data: Proxies become their Nodes, containers recurse."""
        from .node import Node
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, Node):
            return a
        if isinstance(a, tuple) and hasattr(a, "_fields"):
            return type(a)(*(self.create_arg(x) for x in a))
        if isinstance(a, (tuple, list)):
            return type(a)(self.create_arg(x) for x in a) if type(a) in (tuple, list) else \
                tuple(self.create_arg(x) for x in a)
        if isinstance(a, dict):
            out = {}
            for k, v in a.items():
                k = self.create_arg(k)
                if isinstance(k, Node):
                    raise RuntimeError(f"Keys for dictionaries used as an argument cannot "
                                       f"contain a Node. Got key: {k}")
                out[k] = self.create_arg(v)
            return out
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop),
                         self.create_arg(a.step))
        if isinstance(a, range):
            return range(self.create_arg(a.start), self.create_arg(a.stop),
                         self.create_arg(a.step))
        if a is None or a is Ellipsis or isinstance(a, (str, int, float, bool, complex)):
            return a
        if _is_plain_constant(a):
            return a
        raise NotImplementedError(f"argument of type: {type(a)}")

    def to_bool(self, obj: Proxy) -> bool:
        raise TraceError("symbolically traced variables cannot be used as inputs to control "
                         "flow")

    def iter(self, obj: Proxy):
        raise TraceError("Proxy object cannot be iterated. This can be attempted when the "
                         "Proxy is used in a loop or as a *args or **kwargs function argument. "
                         "See the ember.fx docs on pytorch.org for a more detailed explanation "
                         "of what types of control flow can be traced, and check out the Proxy "
                         "docstring for help troubleshooting Proxy iteration errors")

    def keys(self, obj: Proxy):
        return Attribute(obj, "keys")()


def _is_plain_constant(a) -> bool:
    mod = type(a).__module__
    if mod.startswith("ember") and type(a).__name__ in ("dtype", "device", "Size", "layout",
                                                         "memory_format"):
        return True
    return callable(a) or isinstance(a, type)


class Proxy:
    """A value being traced: `x + 1`, `x.relu()`, `ember.add(x, y)` each record a Node.

    >>> import ember, ember.fx
    >>> gm = ember.fx.symbolic_trace(lambda x: ember.relu(x) * 2)
    >>> [n.op for n in gm.graph.nodes]
    ['placeholder', 'call_function', 'call_function', 'output']
    """

    # ember's dispatcher reads this before anything else: a Proxy never asks autograd to record
    _requires_grad = False

    def __init__(self, node, tracer: TracerBase | None = None):
        if tracer is None:
            tracer = _GraphAppendingTracer(node.graph)
        self.tracer = tracer
        self.node = node

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"

    def __getattr__(self, k: str):
        if k.startswith("__") and k.endswith("__"):
            raise AttributeError(k)  # protocol probes (copy, numpy, pickle) are not methods
        return Attribute(self, k)

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", "__call__", (self, *args), kwargs)

    def __iter__(self):
        frame = inspect.currentframe().f_back
        for inst in dis.get_instructions(frame.f_code):
            if inst.offset == frame.f_lasti:
                if inst.opname == "UNPACK_SEQUENCE":
                    return (self[i] for i in range(inst.argval))
                break
        return self.tracer.iter(self)

    def __bool__(self) -> bool:
        return self.tracer.to_bool(self)

    def __len__(self):
        raise RuntimeError("'len' is not supported in symbolic tracing by default. If you want "
                           "this call to be recorded, please call ember.fx.wrap('len') at "
                           "module scope")

    def __hash__(self) -> int:
        return id(self)

    def keys(self):
        return self.tracer.keys(self)

    def __deepcopy__(self, memo):
        return self  # a traced value has no state of its own to copy


class Attribute(Proxy):
    """`proxy.name`: a getattr node, made only if the attribute is used other than called."""

    def __init__(self, root: Proxy, attr: str):
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node = None

    @property
    def node(self):
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", getattr,
                                                  (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", self.attr, (self.root, *args), kwargs)


class GraphAppendingTracer(TracerBase):
    """A tracer that only appends to an existing graph (for `Proxy(node, tracer)`)."""

    def __init__(self, graph):
        self.graph = graph
        self.tensor_attrs: dict = {}


_GraphAppendingTracer = GraphAppendingTracer


_BINARY = ["add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "lshift", "rshift",
           "and_", "or_", "xor", "matmul"]
_COMPARE = ["eq", "ne", "lt", "gt", "le", "ge", "getitem"]
_UNARY = ["neg", "pos", "invert", "abs"]


def _define(name: str, fn) -> None:
    def impl(*args, **kwargs):
        tracer = args[0].tracer
        return tracer.create_proxy("call_function", fn, args, kwargs)
    impl.__name__ = name
    setattr(Proxy, name, impl)


def _define_reflected(name: str, fn) -> None:
    def impl(self, rhs):
        return self.tracer.create_proxy("call_function", fn, (rhs, self), {})
    impl.__name__ = name
    setattr(Proxy, name, impl)


for _m in _BINARY + _COMPARE + _UNARY:
    _fn = getattr(operator, _m)
    _dunder = f"__{_m.rstrip('_')}__"
    _define(_dunder, _fn)
for _m in _BINARY:
    _define_reflected(f"__r{_m.rstrip('_')}__", getattr(operator, _m))


def find_proxy(args, kwargs=None) -> Proxy | None:
    """The first Proxy inside nested args/kwargs, or None."""
    found: list = []

    def look(x):
        if not found and isinstance(x, Proxy):
            found.append(x)
        return x
    map_aggregate(args, look)
    if kwargs:
        map_aggregate(kwargs, look)
    return found[0] if found else None
