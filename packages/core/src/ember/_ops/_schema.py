"""Parsing PyTorch's schema syntax.

    add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

__all__ = ["Arg", "Schema", "parse_schema"]


@dataclass(frozen=True)
class Arg:
    name: str
    type: str            # base type without '?', e.g. "Tensor", "int[]", "Scalar"
    optional: bool
    kwonly: bool
    default: object = None
    has_default: bool = False
    mutable: bool = False  # Tensor(a!)

    @property
    def is_tensor(self) -> bool:
        return self.type == "Tensor"

    @property
    def is_tensor_list(self) -> bool:
        return self.type in ("Tensor[]", "Tensor?[]")

    @property
    def is_int_list(self) -> bool:
        return self.type.startswith(("int[", "SymInt["))


@dataclass(frozen=True)
class Schema:
    name: str
    overload: str
    args: tuple
    returns: tuple        # ((type, name or None), ...)
    text: str = field(compare=False)

    @property
    def mutates(self) -> tuple:
        return tuple(i for i, a in enumerate(self.args) if a.mutable)

    def __str__(self) -> str:
        return self.text


_ARG = re.compile(r"^(?P<type>[\w\[\]\d?]+?)(?P<alias>\([a-z]!?\))?(?P<opt>\?)?(?P<list>\[\d*\])?"
                  r"(?P<opt2>\?)?\s+(?P<name>\w+)(?:\s*=\s*(?P<default>.+))?$")
_CONSTANTS = {"True": True, "False": False, "None": None, "true": True, "false": False,
              "contiguous_format": "contiguous_format", "long": "long", "Mean": 1}


def _split_top(s: str) -> list:
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _default(text: str):
    text = text.strip()
    if text in _CONSTANTS:
        return _CONSTANTS[text]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_schema(text: str) -> Schema:
    head, _, ret = text.partition("->")
    m = re.match(r"^\s*([\w:]+)(?:\.(\w+))?\((.*)\)\s*$", head.strip(), re.S)
    if not m:
        raise ValueError(f"bad schema: {text!r}")
    name, overload, body = m.group(1), m.group(2) or "", m.group(3)
    args, kwonly = [], False
    for part in _split_top(body):
        if part == "*":
            kwonly = True
            continue
        am = _ARG.match(part)
        if not am:
            raise ValueError(f"bad argument {part!r} in schema {text!r}")
        base = am.group("type") + (am.group("list") or "")
        optional = bool(am.group("opt") or am.group("opt2"))
        if base.endswith("?"):
            base, optional = base[:-1], True
        if am.group("list") and am.group("opt"):
            base = base.replace("[", "?[", 1) if base.startswith("Tensor") else base
        d = am.group("default")
        args.append(Arg(am.group("name"), base, optional, kwonly,
                        _default(d) if d is not None else None, d is not None,
                        bool(am.group("alias") and "!" in am.group("alias"))))
    ret = ret.strip()
    if ret.startswith("("):
        rets = []
        for r in _split_top(ret[1:-1]):
            bits = r.split()
            rets.append((re.sub(r"\(.*\)", "", bits[0]), bits[1] if len(bits) > 1 else None))
        returns = tuple(rets)
    elif ret in ("()", ""):
        returns = ()
    else:
        bits = ret.split()
        returns = ((re.sub(r"\(.*\)", "", bits[0]), bits[1] if len(bits) > 1 else None),)
    return Schema(name, overload, tuple(args), returns, text.strip())
