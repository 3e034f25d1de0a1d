"""`ember.fx.node`: one graph node (op, target, args, kwargs, users, meta) and `map_arg`.

As torch.fx's Node: a node lives in its Graph's doubly linked list, and setting its args records
which nodes it uses, so `users` and `replace_all_uses_with` stay right.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Node", "Argument", "Target", "map_arg", "map_aggregate", "immutable_list",
           "immutable_dict", "has_side_effect"]

Argument = Any
Target = Any
OPCODES = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output")
_SIDE_EFFECTFUL: set = set()


def has_side_effect(fn: Callable) -> Callable:
    """Mark a function whose call nodes dead-code elimination must keep."""
    _SIDE_EFFECTFUL.add(fn)
    return fn


def _immutable(self, *args, **kwargs):
    raise NotImplementedError(f"'{type(self).__name__}' object does not support mutation. "
                              "Use a copy (list(x) / dict(x)) and set node.args instead.")


class immutable_list(list):  # noqa: N801 - PyTorch's name
    """The lists inside node.args: editing them in place would bypass the users bookkeeping."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _immutable
    append = extend = insert = pop = remove = clear = sort = reverse = _immutable

    def __reduce__(self):
        return (immutable_list, (list(self),))

    def __hash__(self):
        return hash(tuple(self))


class immutable_dict(dict):  # noqa: N801 - PyTorch's name
    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _immutable

    def __reduce__(self):
        return (immutable_dict, (dict(self),))

    def __hash__(self):
        return hash(tuple(self.items()))


def map_aggregate(a: Argument, fn: Callable) -> Argument:
    """Apply fn to every leaf of a nested tuple/list/dict/slice structure."""
    if isinstance(a, tuple):
        t = tuple(map_aggregate(x, fn) for x in a)
        return type(a)(*t) if hasattr(a, "_fields") else t  # namedtuples keep their type
    if isinstance(a, list):
        return immutable_list(map_aggregate(x, fn) for x in a)
    if isinstance(a, dict):
        return immutable_dict((k, map_aggregate(v, fn)) for k, v in a.items())
    if isinstance(a, slice):
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn),
                     map_aggregate(a.step, fn))
    return fn(a)


def map_arg(a: Argument, fn: Callable[[Node], Argument]) -> Argument:
    """Apply fn to every Node inside a nested argument structure.

    >>> from ember.fx.node import map_arg
    >>> map_arg((1, [2]), lambda n: n)
    (1, [2])
    """
    assert callable(fn), "ember.fx.map_arg(a, fn): fn must be a callable"
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


class Node:
    """One operation of a Graph: `op` is one of the six opcodes, `target` what it runs."""

    def __init__(self, graph, name: str, op: str, target: Target, args: tuple, kwargs: dict,
                 return_type: Any | None = None) -> None:
        if op not in OPCODES:
            raise ValueError(f"Node: unknown opcode {op!r} (expected one of {OPCODES})")
        if op in ("call_method", "call_module", "get_attr") and not isinstance(target, str):
            raise ValueError(f"Node [{op}] target {target!r} must be a string")
        if op == "call_function" and not callable(target):
            raise ValueError(f"Node [call_function] target {target!r} is not callable")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self._input_nodes: dict[Node, None] = {}
        self.users: dict[Node, None] = {}
        self.type = return_type
        self._prev = self._next = self
        self._erased = False
        self._args: tuple = ()
        self._kwargs: dict = {}
        self.meta: dict = {}
        self._repr_fn: Callable | None = None
        self._update_args_kwargs(args, kwargs)

    # ---- linked list ------------------------------------------------------------------------
    @property
    def next(self) -> Node:
        return self._next

    @property
    def prev(self) -> Node:
        return self._prev

    def prepend(self, x: Node) -> None:
        """Move x to just before this node."""
        assert self.graph is x.graph, "Attempting to move a Node into a different Graph"
        if self is x:
            return
        x._remove_from_list()
        p = self._prev
        p._next, x._prev = x, p
        x._next, self._prev = self, x

    def append(self, x: Node) -> None:
        """Move x to just after this node."""
        self._next.prepend(x)

    def _remove_from_list(self) -> None:
        p, n = self._prev, self._next
        p._next, n._prev = n, p
        self._prev = self._next = self

    # ---- args and uses ----------------------------------------------------------------------
    @property
    def args(self) -> tuple:
        return self._args

    @args.setter
    def args(self, a: tuple) -> None:
        self._update_args_kwargs(a, self._kwargs)

    @property
    def kwargs(self) -> dict:
        return self._kwargs

    @kwargs.setter
    def kwargs(self, k: dict) -> None:
        self._update_args_kwargs(self._args, k)

    @property
    def all_input_nodes(self) -> list:
        return list(self._input_nodes)

    def update_arg(self, idx: int, arg: Argument) -> None:
        a = list(self._args)
        a[idx] = arg
        self.args = tuple(a)

    def insert_arg(self, idx: int, arg: Argument) -> None:
        a = list(self._args)
        a.insert(idx, arg)
        self.args = tuple(a)

    def update_kwarg(self, key: str, arg: Argument) -> None:
        self.kwargs = {**self._kwargs, key: arg}

    def _update_args_kwargs(self, new_args, new_kwargs) -> None:
        for old in self._input_nodes:
            old.users.pop(self, None)
        self._input_nodes = {}
        self._args = map_aggregate(tuple(new_args), self._note_input)
        self._kwargs = map_aggregate(dict(new_kwargs), self._note_input)

    def _note_input(self, x):
        if isinstance(x, Node):
            self._input_nodes.setdefault(x)
            x.users.setdefault(self)
        return x

    def replace_all_uses_with(self, replace_with: Node, delete_user_cb: Callable = lambda u: True,
                              *, propagate_meta: bool = False) -> list:
        """Make every user of this node use replace_with instead; returns the changed users."""
        if propagate_meta:
            assert not replace_with.meta, "replace_all_uses_with(propagate_meta=True) needs " \
                "a node without meta"
            replace_with.meta.update(self.meta)
        changed = [u for u in list(self.users) if delete_user_cb(u)]
        for u in changed:
            u.replace_input_with(self, replace_with)
        return changed

    def replace_input_with(self, old_input: Node, new_input: Node) -> None:
        """Replace old_input by new_input in this node's args and kwargs."""
        def pick(n):
            return new_input if n is old_input else n
        self._update_args_kwargs(map_arg(self._args, pick), map_arg(self._kwargs, pick))

    # ---- properties -------------------------------------------------------------------------
    @property
    def stack_trace(self) -> str | None:
        return self.meta.get("stack_trace")

    @stack_trace.setter
    def stack_trace(self, trace: str | None) -> None:
        self.meta["stack_trace"] = trace

    def is_impure(self) -> bool:
        """Placeholders, outputs, side-effectful functions and in-place table ops are impure."""
        if self.op in ("placeholder", "output"):
            return True
        if self.op == "call_function":
            t = self.target
            if t in _SIDE_EFFECTFUL:
                return True
            tags = getattr(t, "tags", None)  # an op-table entry
            if tags is not None and not isinstance(tags, str) and (
                    "inplace" in tags or getattr(t, "mutated_idx", ())):
                return True
            return getattr(t, "__name__", "") in ("_assert", "_assert_is_none")
        if self.op == "call_module" and self.graph.owning_module is not None:
            try:
                mod = self.graph.owning_module.get_submodule(self.target)
            except AttributeError:
                return False
            return bool(getattr(mod, "_is_impure", False))
        return False

    def __repr__(self) -> str:
        if self._repr_fn is not None:
            return self._repr_fn(self)
        return self.name

    def format_node(self, placeholder_names: list | None = None,
                    maybe_return_typename: list | None = None) -> str | None:
        """One line of the graph's IR form (what `print(graph)` shows)."""
        if self.op == "placeholder":
            if placeholder_names is not None:
                placeholder_names.append(str(self.target))
                return None
            default = f"(default={self.args[0]})" if self.args else ""
            return f"%{self.name} : [num_users={len(self.users)}] = placeholder[" \
                   f"target={self.target}]{default}"
        if self.op == "get_attr":
            return f"%{self.name} : [num_users={len(self.users)}] = get_attr[target={self.target}]"
        if self.op == "output":
            if maybe_return_typename is not None and self.type is not None:
                maybe_return_typename[0] = f" -> {_type_repr(self.type)}"
            return f"return {self.args[0]!r}"
        return (f"%{self.name} : [num_users={len(self.users)}] = {self.op}["
                f"target={_pretty_target(self.target)}](args = {_fmt(self.args)}, "
                f"kwargs = {_fmt(self.kwargs)})")


def _fmt(a) -> str:
    """IR form of an argument: nodes as %name, everything else by str() (as torch.fx)."""
    if isinstance(a, Node):
        return f"%{a.name}"
    if isinstance(a, tuple) and not hasattr(a, "_fields"):
        inner = ", ".join(_fmt(x) for x in a)
        return f"({inner},)" if len(a) == 1 else f"({inner})"
    if isinstance(a, list):
        return "[" + ", ".join(_fmt(x) for x in a) + "]"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in a.items()) + "}"
    return str(a)


def _pretty_target(t) -> str:
    if isinstance(t, str):
        return t
    from ._codegen import is_opdef, qualified_name
    if is_opdef(t):
        return f"aten.{t.name}.{t.overload or 'default'}"
    q = qualified_name(t)
    return q if "." in q else f"builtins.{q}"


def _type_repr(t) -> str:
    if isinstance(t, type):
        return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
    return repr(t)

