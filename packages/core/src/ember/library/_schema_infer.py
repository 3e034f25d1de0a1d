"""Inferring an op schema from a Python function's annotations (`infer_schema`), as PyTorch does.

    def f(x: Tensor, n: int = 2, y: Optional[Tensor] = None) -> Tensor
      -> "(Tensor x, SymInt n=2, Tensor? y=None) -> Tensor"
"""
from __future__ import annotations

import collections.abc
import inspect
import types
import typing

from .._device import device as Device
from .._dtype import dtype as DType
from .._tensor import Tensor

__all__ = ["infer_schema"]

_Number = int | float | bool

# annotation -> schema type; Optional[X] adds "?", list/Sequence[X] adds "[]"
_BASE = {Tensor: "Tensor", int: "SymInt", float: "float", bool: "bool", str: "str",
         _Number: "Scalar", DType: "ScalarType", Device: "Device"}
_LISTS = (list, typing.List, typing.Sequence, collections.abc.Sequence)  # noqa: UP006


def _unwrap_optional(ann):
    args = typing.get_args(ann)
    if typing.get_origin(ann) in (typing.Union, types.UnionType) and type(None) in args:
        rest = tuple(a for a in args if a is not type(None))
        return (rest[0] if len(rest) == 1 else typing.Union[rest]), True  # noqa: UP007
    return ann, False


def _type_of(ann, where: str, error) -> str:
    """Schema type for an annotation (or calls error)."""
    if ann == _Number or (typing.get_origin(ann) in (typing.Union, types.UnionType)
                          and set(typing.get_args(ann)) == {int, float, bool}):
        return "Scalar"
    ann, opt = _unwrap_optional(ann)
    base = _BASE.get(ann)
    if base is None and (typing.get_origin(ann) in _LISTS or ann in _LISTS):
        inner = typing.get_args(ann)
        if len(inner) == 1:
            elem, eopt = _unwrap_optional(inner[0])
            eb = _BASE.get(elem)
            if elem == _Number or set(typing.get_args(elem) or ()) == {int, float, bool}:
                eb = "Scalar"
            if eb in ("Tensor", "SymInt", "float", "bool", "Scalar") and not (
                    eopt and eb != "Tensor"):
                base = eb + ("?" if eopt else "") + "[]"
    if base is None:
        error(f"{where} has unsupported type {ann}.")
    if opt and base.endswith("[]") and base.startswith("Tensor"):
        error(f"{where} has unsupported type {ann}.")
    return base + ("?" if opt else "")


def _default_text(value, where: str, error) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, DType):
        return str(value).split(".")[-1]
    error(f"{where} has an unsupported default value type {type(value)}.")


def infer_schema(prototype_function, /, *, mutates_args, op_name: str | None = None) -> str:
    """The schema of a function from its type annotations (`ember.library.infer_schema`).

    >>> from ember import Tensor
    >>> def f(x: Tensor, n: int = 2) -> Tensor: ...
    >>> infer_schema(f, mutates_args=())
    '(Tensor x, SymInt n=2) -> Tensor'
    """
    sig = inspect.signature(prototype_function)
    try:
        hints = typing.get_type_hints(prototype_function)
    except Exception:  # unresolvable string annotations: use them raw
        hints = {}

    def error(what):
        raise ValueError(f"infer_schema(func): {what} Got func with signature {sig})")

    params, letters = [], iter("abcdefghijklmnopqrstuvwxyz")
    mutated = set()
    seen_kw = False
    names = list(sig.parameters)
    if mutates_args != "unknown":
        if isinstance(mutates_args, str):
            error("mutates_args must be a sequence of parameter names or 'unknown'.")
        for n in mutates_args:
            if n not in names:
                error(f"{mutates_args} in mutates_args were not found in the custom op's "
                      f"signature. mutates_args should contain the names of all args that the "
                      f"custom op mutates, or just the string 'unknown' if you don't know.")
        mutated = set(mutates_args)
    for name, p in sig.parameters.items():
        where = f"Parameter {name}"
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            error(f"{where} has unsupported kind {p.kind}.")
        if p.annotation is inspect.Parameter.empty:
            error(f"{where} must have a type annotation.")
        ann = hints.get(name, p.annotation)
        t = _type_of(ann, where, error)
        if p.kind == p.KEYWORD_ONLY and not seen_kw:
            params.append("*")
            seen_kw = True
        if (name in mutated or (mutates_args == "unknown" and t.startswith("Tensor"))) \
                and t.startswith("Tensor"):
            t = t.replace("Tensor", f"Tensor({next(letters)}!)", 1)
        text = f"{t} {name}"
        if p.default is not inspect.Parameter.empty:
            text += "=" + _default_text(p.default, where, error)
        params.append(text)
    ret = sig.return_annotation
    if ret is inspect.Signature.empty:
        error("No return type annotation was provided. Please add one.")
    ret = hints.get("return", ret)
    return f"({', '.join(params)}) -> {_return_text(ret, error)}"


def _return_text(ret, error) -> str:
    if ret is None or ret is type(None):
        return "()"
    if typing.get_origin(ret) in (tuple, typing.Tuple):  # noqa: UP006
        parts = typing.get_args(ret)
        if not parts or Ellipsis in parts:
            error(f"Return has unsupported type {ret}.")
        return "(" + ", ".join(_one_return(p, error) for p in parts) + ")"
    return _one_return(ret, error)


def _one_return(ann, error) -> str:
    if ann in (Tensor, int, float, bool):
        return _BASE[ann]
    if typing.get_origin(ann) in _LISTS and typing.get_args(ann) == (Tensor,):
        return "Tensor[]"
    error(f"Return has unsupported type {ann}.")
