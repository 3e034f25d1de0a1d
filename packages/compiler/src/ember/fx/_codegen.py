"""Graph -> runnable Python source (`graph.python_code()`), the names its targets print as.

Ember's own functions print by their public path (`ember.add`, `ember.nn.functional.relu`,
`ember.ops.aten.add.default`) with `ember` in the code's globals; any other callable gets a
global of its own, named from its module and name as torch.fx does (`__main___my_fn`).
"""
from __future__ import annotations

import builtins
import keyword
import math
import operator
import re
from dataclasses import dataclass

from .node import Node

__all__ = ["PythonCode", "Namespace", "qualified_name", "python_code"]


@dataclass
class PythonCode:
    """Source of a `forward` and the globals it runs with."""

    src: str
    globals: dict
    _lineno_map: dict | None = None


_ILLEGAL = set(keyword.kwlist) | set(builtins.__dict__) | {"ember", "self"}
_SUFFIX = re.compile(r"(.*)_(\d+)$")
_BAD_CHARS = re.compile(r"[^0-9a-zA-Z_]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


class Namespace:
    """Unique Python identifiers: `add`, `add_1`, `add_2`; never a keyword or a builtin."""

    def __init__(self):
        self._used: set = set()
        self._base_count: dict = {}
        self._obj_to_name: dict = {}

    def create_name(self, candidate: str, obj=None) -> str:
        if obj is not None and id(obj) in self._obj_to_name:
            return self._obj_to_name[id(obj)]
        candidate = _BAD_CHARS.sub("_", candidate) or "_unnamed"
        if candidate[0].isdigit():
            candidate = f"_{candidate}"
        m = _SUFFIX.match(candidate)
        base, num = (candidate, None) if m is None else (m.group(1), int(m.group(2)))
        if num is None:
            num = self._base_count.get(base, 0)
        while candidate in self._used or candidate in _ILLEGAL:
            num += 1
            candidate = f"{base}_{num}"
        self._used.add(candidate)
        self._base_count[base] = num
        if obj is not None:
            self._obj_to_name[id(obj)] = candidate
        return candidate

    def associate_name_with_obj(self, name: str, obj) -> None:
        self._obj_to_name[id(obj)] = name

    def release(self, name: str) -> None:
        self._used.discard(name)


def snake_case(s: str) -> str:
    return _CAMEL.sub(r"_\1", s).lower()


def target_to_str(target) -> str:
    """The base of a node's name from its target (`ember.add` -> add, `layer.0` -> layer_0)."""
    if isinstance(target, str):
        op = target
    elif getattr(target, "schema", None) is not None and hasattr(target, "qualname"):
        op = target.name.split("::")[-1]  # an op-table entry
    else:
        op = getattr(target, "__name__", None) or type(target).__name__
    if op.startswith("__") and op.endswith("__") and len(op) > 4:
        op = op[2:-2]
    return snake_case(op)


# ---- where ember's functions live -------------------------------------------------------------
_EMBER_PATHS: dict | None = None


def _ember_paths() -> dict:
    """id(function) -> its public dotted path, over ember's function namespaces."""
    global _EMBER_PATHS
    if _EMBER_PATHS is None:
        import ember
        import ember.nn.functional as F
        paths: dict = {}
        # first name wins: ember.cat over its alias ember.concat, ember.* over F.* for one object
        for prefix, mod in (("ember", ember), ("ember.linalg", ember.linalg),
                            ("ember.nn.functional", F)):
            for k, v in vars(mod).items():
                if callable(v) and not isinstance(v, type) and not k.startswith("_"):
                    paths.setdefault(id(v), f"{prefix}.{k}")
        _EMBER_PATHS = paths
    return _EMBER_PATHS


def _resolves(path: str, obj) -> bool:
    import importlib
    parts = path.split(".")
    try:
        cur = importlib.import_module(parts[0])
        for p in parts[1:]:
            cur = getattr(cur, p)
    except (ImportError, AttributeError):
        return False
    return cur is obj


def is_opdef(t) -> bool:
    return getattr(t, "schema", None) is not None and hasattr(t, "qualname") and \
        hasattr(t, "kernels")


def qualified_name(fn) -> str:
    """`ember.add`, `ember.ops.aten.add.default`, `operator.add`, `getattr`, `mod.fn`."""
    if is_opdef(fn):
        ns, _, name = fn.name.rpartition("::")
        return f"ember.ops.{ns or 'aten'}.{name}.{fn.overload or 'default'}"
    name = getattr(fn, "__name__", None)
    if name is not None and getattr(builtins, name, None) is fn:
        return name
    p = _ember_paths().get(id(fn))
    if p is not None:
        return p
    mod = getattr(fn, "__module__", None)
    if mod in ("_operator", "operator"):
        return f"operator.{name}"
    qual = getattr(fn, "__qualname__", name)
    if mod == "math" or (mod or "").startswith("ember"):
        if _resolves(f"{mod}.{qual}", fn):
            return f"{mod}.{qual}"
    return f"{mod}.{qual}" if mod else str(qual)


_BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
           operator.floordiv: "//", operator.mod: "%", operator.pow: "**",
           operator.matmul: "@", operator.and_: "&", operator.or_: "|", operator.xor: "^",
           operator.lshift: "<<", operator.rshift: ">>", operator.eq: "==", operator.ne: "!=",
           operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">="}
_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~", operator.not_: "not "}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Emitter:
    """Formats values and targets for one generated function, collecting its globals."""

    def __init__(self, ns: Namespace):
        import ember
        self.ns = ns
        self.globals: dict = {"ember": ember, "inf": math.inf, "nan": math.nan,
                              "NoneType": type(None)}

    def fn_name(self, fn) -> str:
        q = qualified_name(fn)
        head = q.split(".")[0]
        valid = not any(keyword.iskeyword(p) for p in q.split("."))  # (random_.from)
        if head == "ember" and valid and (is_opdef(fn) or _resolves(q, fn)):
            return q
        if "." not in q and getattr(builtins, q, None) is fn:
            return q
        name = self.ns.create_name(q.replace(".", "_"), fn)
        self.globals[name] = fn
        return name

    def arg(self, a) -> str:
        if isinstance(a, Node):
            return a.name
        if isinstance(a, tuple) and not hasattr(a, "_fields"):
            inner = ", ".join(self.arg(x) for x in a)
            return f"({inner},)" if len(a) == 1 else f"({inner})"
        if isinstance(a, tuple):  # a namedtuple (return types): rebuilt by its type
            return f"{self.fn_name(type(a))}({', '.join(self.arg(x) for x in a)})"
        if isinstance(a, list):
            return "[" + ", ".join(self.arg(x) for x in a) + "]"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{self.arg(k)}: {self.arg(v)}" for k, v in a.items()) + "}"
        if isinstance(a, slice):
            return f"slice({self.arg(a.start)}, {self.arg(a.stop)}, {self.arg(a.step)})"
        if isinstance(a, float) and not math.isfinite(a):
            return repr(a)  # inf / nan are globals
        if a is Ellipsis:
            return "Ellipsis"
        if isinstance(a, (bool, int, float, complex, str, bytes)) or a is None:
            return repr(a)
        cls = type(a).__name__
        if cls == "device" and type(a).__module__.startswith("ember"):
            return f"ember.device({str(a)!r})"
        if cls == "dtype" and type(a).__module__.startswith("ember"):
            return str(a)
        if isinstance(a, type) or callable(a):
            return self.fn_name(a)
        name = self.ns.create_name(f"_{cls.lower()}", a)  # anything else: a global
        self.globals[name] = a
        return name

    def call_args(self, args, kwargs) -> str:
        parts = [self.arg(a) for a in args]
        parts += [f"{k} = {self.arg(v)}" for k, v in kwargs.items()]
        return ", ".join(parts)


def _attr_path(root: str, target: str) -> str:
    out = root
    for p in target.split("."):
        out = f"{out}.{p}" if _IDENT.match(p) and p not in keyword.kwlist else \
            f'getattr({out}, "{p}")'
    return out


def _emit(node: Node, e: _Emitter, root: str) -> str:
    op, t, args, kwargs = node.op, node.target, node.args, node.kwargs
    if op == "get_attr":
        return f"{node.name} = {_attr_path(root, t)}"
    if op == "call_module":
        return f"{node.name} = {_attr_path(root, t)}({e.call_args(args, kwargs)})"
    if op == "call_method":
        return f"{node.name} = {e.arg(args[0])}.{t}({e.call_args(args[1:], kwargs)})"
    assert op == "call_function"
    if not kwargs:
        if t in _BINARY and len(args) == 2:
            return f"{node.name} = {e.arg(args[0])} {_BINARY[t]} {e.arg(args[1])}"
        if t in _UNARY and len(args) == 1:
            return f"{node.name} = {_UNARY[t]}{e.arg(args[0])}"
        if t is operator.getitem and len(args) == 2:
            return f"{node.name} = {e.arg(args[0])}[{e.arg(args[1])}]"
        if t is getattr and len(args) == 2 and isinstance(args[1], str) and \
                _IDENT.match(args[1]) and not keyword.iskeyword(args[1]):
            return f"{node.name} = {e.arg(args[0])}.{args[1]}"
    return f"{node.name} = {e.fn_name(t)}({e.call_args(args, kwargs)})"


def python_code(graph, root_module: str = "self") -> PythonCode:
    """The graph as `def forward(self, ...)`: one line per node, inputs freed after last use."""
    ns = Namespace()
    for n in graph.nodes:
        ns.create_name(n.name)
    e = _Emitter(ns)
    seen: set = set()
    frees: dict = {}  # node -> the inputs whose last use it is, in argument order
    for n in reversed(graph.nodes):
        for i in n.all_input_nodes:
            if i not in seen:
                seen.add(i)
                frees.setdefault(n, []).append(i)
    params, body = [root_module], []
    for n in graph.nodes:
        if n.op == "placeholder":
            t = str(n.target)
            default = f" = {e.arg(n.args[0])}" if n.args else ""
            params.append(f"{t}{default}")
            if t.lstrip("*") != n.name:
                body.append(f"{n.name} = {t.lstrip('*')}")
            continue
        if n.op == "output":
            body.append(f"return {e.arg(n.args[0])}")
            continue
        line = _emit(n, e, root_module)
        dead = [x.name for x in frees.get(n, ()) if x is not n]
        if not n.users and n.op != "output":
            dead.append(n.name)
        if dead:
            line += ";  " + " = ".join(dead) + " = None"
        body.append(line)
    if not body or not body[-1].startswith("return"):
        body.append("pass")
    src = "\n\n\ndef forward(" + ", ".join(params) + "):\n" + \
        "".join(f"    {line}\n" for line in body) + "    "
    return PythonCode(src, e.globals)

