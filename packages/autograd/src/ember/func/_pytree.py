"""A small pytree: flatten nested tuples, lists, dicts and named tuples to leaves and back
(what vmap's in_dims/out_dims and the transforms' argnums walk over)."""
from __future__ import annotations

__all__ = ["tree_flatten", "tree_unflatten", "tree_map", "broadcast_prefix"]


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def tree_flatten(tree):
    """(leaves, spec): spec rebuilds the tree from a list of leaves with tree_unflatten."""
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves):
    if _is_namedtuple(tree):
        return ("namedtuple", type(tree), [_flatten(x, leaves) for x in tree])
    if isinstance(tree, (tuple, list)):
        return (type(tree), None, [_flatten(x, leaves) for x in tree])
    if isinstance(tree, dict):
        keys = list(tree)
        return (dict, keys, [_flatten(tree[k], leaves) for k in keys])
    leaves.append(tree)
    return None


def tree_unflatten(leaves, spec):
    it = iter(leaves)
    return _unflatten(spec, it)


def _unflatten(spec, it):
    if spec is None:
        return next(it)
    kind, extra, children = spec
    vals = [_unflatten(c, it) for c in children]
    if kind == "namedtuple":
        return extra(*vals)
    if kind is dict:
        return dict(zip(extra, vals))
    return kind(vals)


def tree_map(fn, tree):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def broadcast_prefix(prefix, tree, what: str):
    """The leaves of `prefix` repeated over the leaves of `tree` (in_dims=0 for a tuple of
    tensors; in_dims=(0, None) for two arguments, each possibly a nested structure)."""
    if prefix is None or isinstance(prefix, int):
        return [prefix] * len(tree_flatten(tree)[0])
    if isinstance(prefix, (tuple, list)) and isinstance(tree, (tuple, list)):
        if len(prefix) != len(tree):
            raise ValueError(f"{what}: expected {what} to be a tuple/list of length "
                             f"{len(tree)} matching the structure of the inputs, got "
                             f"{len(prefix)}")
        out = []
        for p, t in zip(prefix, tree):
            out += broadcast_prefix(p, t, what)
        return out
    if isinstance(prefix, dict) and isinstance(tree, dict):
        if set(prefix) != set(tree):
            raise ValueError(f"{what}: the dict keys of {what} do not match the inputs")
        out = []
        for k in tree:
            out += broadcast_prefix(prefix[k], tree[k], what)
        return out
    raise ValueError(f"{what}: {what} must be an int, None or a (nested) structure matching "
                     f"the inputs, got {type(prefix).__name__}")
