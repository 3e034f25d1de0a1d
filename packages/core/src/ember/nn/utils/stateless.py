"""`functional_call`: run a module with some parameters and buffers swapped for given tensors
(torch.nn.utils.stateless / torch.func.functional_call).

>>> import ember
>>> lin = ember.nn.Linear(2, 1)
>>> p = {"weight": ember.ones(1, 2), "bias": ember.zeros(1)}
>>> functional_call(lin, p, (ember.tensor([[1., 2.]]),)).tolist()
[[3.0]]
"""
from __future__ import annotations

from contextlib import contextmanager

__all__ = ["functional_call"]


def _resolve(module, name):
    *path, attr = name.split(".")
    mod = module
    for p in path:
        mod = getattr(mod, p)
    return mod, attr


def _tied_names(module):
    """name -> every name that refers to the same tensor (tied weights)."""
    groups: dict = {}
    for n, t in list(module.named_parameters(remove_duplicate=False)) + list(
            module.named_buffers(remove_duplicate=False)):
        groups.setdefault(id(t), []).append(n)
    return {n: g for g in groups.values() for n in g}


@contextmanager
def _reparametrize(module, tensors: dict, tie_weights: bool = True, strict: bool = False):
    if strict:
        names = {n for n, _ in module.named_parameters()} | {n for n, _ in
                                                               module.named_buffers()}
        missing = sorted(names - set(tensors))
        unexpected = sorted(set(tensors) - names)
        if missing or unexpected:
            msg = ""
            if unexpected:
                msg += "Unexpected key(s): " + ", ".join(repr(k) for k in unexpected) + "."
            if missing:
                msg += (" " if msg else "") + "Missing key(s): " + ", ".join(
                    repr(k) for k in missing) + "."
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t"
                               f"{msg}")
    todo = dict(tensors)
    if tie_weights:
        tied = _tied_names(module)
        for n, t in tensors.items():
            for other in tied.get(n, ()):
                if other in tensors and tensors[other] is not t:
                    raise ValueError(f"functional_call got multiple values for keys "
                                     f"['{n}', '{other}'], which are tied. Consider using "
                                     f"tie_weights=False")
                todo.setdefault(other, t)
    saved = []
    try:
        for name, t in todo.items():
            mod, attr = _resolve(module, name)
            d = mod.__dict__
            for slot in ("_parameters", "_buffers"):
                if attr in d.get(slot, {}):
                    saved.append((d[slot], attr, d[slot][attr]))
                    d[slot][attr] = t
                    break
            else:
                had = attr in d
                saved.append((d, attr, d.get(attr) if had else _ABSENT))
                d[attr] = t
        yield
    finally:
        for store, attr, old in reversed(saved):
            if old is _ABSENT:
                store.pop(attr, None)
            else:
                store[attr] = old


_ABSENT = object()


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights: bool = True, strict: bool = False):
    """Call `module(*args, **kwargs)` with the given tensors in place of its parameters and
    buffers (names as in `named_parameters`); the module is unchanged afterwards."""
    if isinstance(parameter_and_buffer_dicts, dict):
        tensors = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, (list, tuple)):
        tensors = {}
        for d in parameter_and_buffer_dicts:
            for k, v in d.items():
                if k in tensors:
                    raise ValueError(f"{k} appeared in multiple dictionaries; behavior of "
                                     f"functional call is ambiguous")
                tensors[k] = v
    else:
        raise ValueError(f"Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of "
                         f"dicts, but got {type(parameter_and_buffer_dicts)}")
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _reparametrize(module, tensors, tie_weights=tie_weights, strict=strict):
        return module(*args, **kwargs)
