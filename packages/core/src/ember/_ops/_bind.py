"""Binding a call of an op by schema (`ember.ops.<ns>.<name>(...)`, `ember.library` ops) to its
positional tuple, checked as PyTorch's `torch.ops` checks it: too many arguments, unknown or
repeated keywords, missing ones and values of the wrong type raise RuntimeError with PyTorch's
messages; an iterable passed for a list argument (a generator) is read once into a list.

The generated public functions (`ember.add`) do not come here: Python's own signature checks
them. Values of types this module does not know (symbolic sizes, tracer objects) pass: only
values of a known wrong type are refused. ember's own code calls core ops (not custom ones) with
what PyTorch's Python layer would have resolved first, so core ops also take: keyword-only
arguments by position, a lone value or None sizes for an int list (`adaptive_avg_pool2d(x,
(5, None))`), and Python numbers for tensors (as aten's scalar-wrapping ops do).
"""
from __future__ import annotations

import numbers

import numpy as np

__all__ = ["bind_checked"]

_T = None  # ember.Tensor, imported on first use (the op table is built before _tensor loads)


def _tensor_cls():
    global _T
    if _T is None:
        from .._tensor import Tensor
        _T = Tensor
    return _T


def _known(v) -> bool:
    """A value whose type we can judge: builtins, numpy values, tensors."""
    return type(v).__module__ == "builtins" or isinstance(v, (np.generic, np.ndarray,
                                                              _tensor_cls()))


def _is_int(v) -> bool:
    if isinstance(v, (float, complex, np.floating, np.complexfloating)):
        return False
    return isinstance(v, (numbers.Integral, np.integer, _tensor_cls())) or not _known(v)


def _is_number(v) -> bool:
    return isinstance(v, (numbers.Number, np.number, np.bool_)) or not _known(v)


def _is_float(v) -> bool:
    return (not isinstance(v, (complex, np.complexfloating)) and _is_number(v)) or isinstance(
        v, _tensor_cls())


def _is_tensor(v, lenient: bool) -> bool:
    # core ops take Python numbers where a Tensor goes (ember.ops.aten.add(x, 2.0), as aten's);
    # custom ops do not (PyTorch refuses a float for a custom op's Tensor argument)
    # values of unknown types pass (tracers: fx Proxy and Node objects stand for tensors)
    return isinstance(v, _tensor_cls()) or not _known(v) or (
        lenient and isinstance(v, (numbers.Number, np.number, np.bool_)))


def _is_dtype(v) -> bool:
    from .._dtype import dtype
    return isinstance(v, (dtype, int)) or not _known(v)


def _is_device(v, lenient: bool) -> bool:
    from .._device import device
    return isinstance(v, (device, str)) or (lenient and isinstance(v, int)) or not _known(v)


def _elem_check(base: str, lenient: bool):
    if base == "int" or base == "SymInt":
        return _is_int
    if base == "float":
        return _is_float
    if base == "bool":
        return lambda v: v is None or _is_number(v)  # PyTorch takes numbers (and None) for bool
    if base == "Scalar":
        return lambda v: _is_number(v) or (lenient and isinstance(v, _tensor_cls()))
    if base == "str":
        return lambda v: isinstance(v, str) or not _known(v)
    if base == "ScalarType":
        return _is_dtype
    if base == "Device":
        return lambda v: _is_device(v, lenient)
    return lambda v: True  # Layout, MemoryFormat, Generator, ...: not judged


def _type_name(arg) -> str:
    t = arg.type
    base, lst, rest = t.partition("[")
    names = {"SymInt": "int", "Scalar": "number", "ScalarType": "int", "Layout": "int",
             "MemoryFormat": "int"}
    if lst:
        opt_elem = base.endswith("?")
        elem = names.get(base.rstrip("?"), base.rstrip("?"))
        name = f"List[Optional[{elem}]]" if opt_elem else f"List[{elem}]"
    else:
        name = names.get(base, base)
    return f"Optional[{name}]" if arg.optional else name


def _checker(arg, lenient: bool):
    """(value) -> the value to pass (a list read from an iterable), or raise _Bad."""
    t = arg.type
    base, lst, rest = t.partition("[")
    if not lst:
        if base == "Tensor":
            ok = (lambda v: v is None or _is_tensor(v, lenient)) if arg.optional else (
                lambda v: _is_tensor(v, lenient))
        else:
            elem = _elem_check(base, lenient)
            ok = (lambda v: v is None or elem(v)) if arg.optional else elem

        def check(v):
            if not ok(v):
                raise _Bad
            return v
        return check
    fixed = rest[:-1]  # "int[2]": a single int stands for the whole list
    opt_elem = base.endswith("?")
    base = base.rstrip("?")
    if base == "Tensor":
        elem = (lambda v: v is None or isinstance(v, _tensor_cls()) or not _known(v)) \
            if opt_elem else (lambda v: isinstance(v, _tensor_cls()) or not _known(v))
    else:
        elem = _elem_check(base, lenient)
        if lenient and base in ("int", "SymInt"):
            elem = (lambda e: lambda v: v is None or e(v))(elem)
    Tensor = _tensor_cls()

    def check_list(v):
        if v is None and arg.optional:
            return v
        # ember's own schemas fold PyTorch's int/list overloads into one (hsplit's
        # `int[] indices_or_sections` takes an int too): core ops take a lone value for any list
        if (fixed or lenient) and base != "Tensor" and not isinstance(v, (list, tuple)) and elem(
                v) and (not isinstance(v, Tensor) or v.ndim == 0):
            return v
        if not isinstance(v, (list, tuple)):
            if isinstance(v, (str, bytes, dict, Tensor, np.ndarray)) or not hasattr(
                    v, "__iter__"):
                raise _Bad
            v = list(v)  # a generator: read it once, here
        if not all(elem(x) for x in v):
            raise _Bad
        return v
    return check_list


class _Bad(Exception):
    pass


def _plan(op) -> tuple:
    plan = op.__dict__.get("_bind_plan")
    if plan is None:
        lenient = "custom" not in op.tags
        name = op.name if "::" in op.name else f"aten::{op.name}"
        decl = op.schema.text if "::" in op.schema.text.split("(")[0] else f"aten::{op.schema.text}"
        npos = len(op.schema.args) if lenient else sum(1 for a in op.schema.args
                                                        if not a.kwonly)
        checks = tuple(_checker(a, lenient) for a in op.schema.args)
        lists = frozenset(i for i, a in enumerate(op.schema.args) if "[" in a.type)
        plan = (name, decl, npos, checks, lists, {})  # ({classes: defaults} of passed calls)
        op._bind_plan = plan
    return plan


def _classes(args, plan):
    """What the checks' verdict on positional args depends on: each value's class (a list's or
    tuple's: with its items' classes); None when it depends on more (a tensor given for a list
    argument: its ndim)."""
    lists = plan[4]
    sig = []
    for i, v in enumerate(args):
        c = v.__class__
        if c is list or c is tuple:
            sig.append((c, tuple(x.__class__ for x in v)))
        elif i in lists and isinstance(v, _tensor_cls()):
            return None
        else:
            sig.append(c)
    return tuple(sig)


def bind_checked(op, args: tuple, kwargs: dict) -> tuple:
    """Positional + keyword arguments -> the full positional tuple in schema order, checked.
    Positional calls whose values' classes passed before take the defaults without the checks
    (every check judges a value by its class; decompositions call ops this way on each step)."""
    plan = _plan(op)
    if not kwargs:
        sig = _classes(args, plan)
        tail = plan[5].get(sig) if sig is not None else None
        if tail is not None:
            return tuple(args) + tail
    r = _bind_checked(op, args, kwargs, plan)
    if not kwargs and sig is not None and len(plan[5]) < 64 and all(
            r[i] is v for i, v in enumerate(args)):  # (nothing converted: a generator read)
        plan[5][sig] = r[len(args):]
    return r


def _bind_checked(op, args: tuple, kwargs: dict, plan) -> tuple:
    name, decl, npos, checks = plan[:4]
    sargs = op.schema.args
    if len(args) > len(sargs):
        raise RuntimeError(f"{name}() expected at most {len(sargs)} argument(s) but received "
                           f"{len(args)} argument(s). Declaration: {decl}")
    if len(args) > npos:
        raise RuntimeError(f"{name}() takes {npos} positional argument(s) but {len(args)} "
                           f"was/were given.  Declaration: {decl}")
    if kwargs:
        for k in kwargs:
            i = next((j for j, a in enumerate(sargs) if a.name == k), None)
            if i is None:
                if k == "out" and getattr(op, "has_out", False):
                    continue
                raise RuntimeError(f"Unknown keyword argument '{k}' for operator '{name}'. "
                                   f"Schema: {decl}")
            if i < len(args):
                raise RuntimeError(f"Argument '{k}' specified both as positional and keyword "
                                   f"argument. Schema: {decl}")
    out = []
    for i, a in enumerate(sargs):
        if i < len(args):
            v = args[i]
        elif a.name in kwargs:
            v = kwargs[a.name]
        elif a.has_default:
            out.append(a.default)
            continue
        else:
            raise RuntimeError(f"{name}() is missing value for argument '{a.name}'. "
                               f"Declaration: {decl}")
        try:
            out.append(checks[i](v))
        except _Bad:
            tn = _type_name(a)
            raise RuntimeError(
                f"{name}() Expected a value of type '{tn}' for argument '{a.name}' but instead "
                f"found type '{type(v).__name__}'.\nPosition: {i}\nValue: {v!r}\n"
                f"Declaration: {decl}\nCast error details: Unable to cast {v!r} to {tn}"
            ) from None
    return tuple(out)
