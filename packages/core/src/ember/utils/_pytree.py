"""Nested containers as flat leaf lists and back, as torch.utils._pytree: tuples, lists, dicts,
namedtuples and None are nodes (None has no children); everything else is a leaf.

>>> leaves, spec = tree_flatten(((1, 2), {"a": 3}))
>>> leaves
[1, 2, 3]
>>> tree_unflatten([4, 5, 6], spec)
((4, 5), {'a': 6})
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["TreeSpec", "LeafSpec", "tree_flatten", "tree_unflatten", "tree_map", "tree_leaves",
           "register_pytree_node"]

# type -> (flatten: x -> (children, context), unflatten: (children, context) -> x)
_NODES: dict[type, tuple[Callable, Callable]] = {
    tuple: (lambda x: (list(x), None), lambda c, _: tuple(c)),
    list: (lambda x: (list(x), None), lambda c, _: list(c)),
    dict: (lambda x: (list(x.values()), list(x.keys())), lambda c, k: dict(zip(k, c))),
    type(None): (lambda x: ([], None), lambda c, _: None),
}


def register_pytree_node(cls: type, flatten_fn: Callable, unflatten_fn: Callable, **_) -> None:
    """Make cls a node: flatten_fn(x) -> (children, context), unflatten_fn(children, context)."""
    _NODES[cls] = (flatten_fn, unflatten_fn)


def _node(x):
    t = type(x)
    if t in _NODES:
        return t, _NODES[t]
    if isinstance(x, tuple) and hasattr(t, "_fields"):  # namedtuple
        return t, (lambda v: (list(v), None), lambda c, _, t=t: t(*c))
    return None, None


@dataclass
class TreeSpec:
    type: Any
    context: Any
    children_specs: list = field(default_factory=list)

    @property
    def num_leaves(self) -> int:
        return sum(c.num_leaves for c in self.children_specs)

    def is_leaf(self) -> bool:
        return False

    def __repr__(self) -> str:
        name = getattr(self.type, "__name__", str(self.type))
        kids = ", ".join(repr(c) for c in self.children_specs)
        return f"TreeSpec({name}, {self.context}, [{kids}])"


class LeafSpec(TreeSpec):
    def __init__(self):
        super().__init__(None, None, [])

    @property
    def num_leaves(self) -> int:
        return 1

    def is_leaf(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "*"


def tree_flatten(tree) -> tuple[list, TreeSpec]:
    leaves: list = []

    def walk(x) -> TreeSpec:
        t, fns = _node(x)
        if t is None:
            leaves.append(x)
            return LeafSpec()
        children, ctx = fns[0](x)
        return TreeSpec(t, ctx, [walk(c) for c in children])

    return leaves, walk(tree)


def tree_unflatten(leaves, spec: TreeSpec):
    it = iter(leaves)

    def build(s: TreeSpec):
        if s.is_leaf():
            return next(it)
        t = s.type
        unflat = _NODES[t][1] if t in _NODES else (lambda c, _: t(*c))
        return unflat([build(c) for c in s.children_specs], s.context)

    leaves = list(leaves)
    if len(leaves) != spec.num_leaves:
        raise ValueError(f"tree_unflatten: {len(leaves)} leaves for a spec of {spec.num_leaves}")
    return build(spec)


def tree_leaves(tree) -> list:
    return tree_flatten(tree)[0]


def tree_map(fn: Callable, tree, *rest):
    leaves, spec = tree_flatten(tree)
    others = [tree_flatten(r)[0] for r in rest]
    return tree_unflatten([fn(*xs) for xs in zip(leaves, *others)], spec)
