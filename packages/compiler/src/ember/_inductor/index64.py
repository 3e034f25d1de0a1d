"""64-bit indexing for generated Triton kernels: where an element index can pass 2**31 - 1.

Triton computes `tl.program_id`, `tl.arange` and 32-bit size arguments in int32, so a kernel
over more elements wraps around. A graph whose buffers all fit keeps int32 indices (cheaper
div/mod); one that does not gets kernels whose program ids, ranges and size arguments are
int64 (`widen`): another text, so another name and another compiled kernel. Kernels compiled
once for every size (dynamic.py) are lowered at small sizes: their wrapper is used only while
every extent fits (`over_int32`, checked per call), larger sizes compile per size.
"""
from __future__ import annotations

import re

import sympy

from ember._tensor import Tensor

from .ir import Buffer, ComputedBuffer, ExternBuffer
from .sizevars import pyexpr

__all__ = ["LIMIT", "extents", "needs_int64", "widen", "over_int32"]

# the most elements a kernel indexes in int32: a block's lanes past the end (up to 2**16 of
# them) must not wrap either, or the mask `index < numel` passes them
LIMIT = 2**31 - 2**16


def extents(g) -> list:
    """Element counts (sympy, in the lowering's size symbols) of every buffer of g and of the
    iteration space of every loop nest."""
    out = [sympy.Mul(*b.shape) for b in g.inputs if isinstance(b, Buffer)]   # (not ints)
    for b in g.buffers:
        if isinstance(b, ComputedBuffer):
            out += [sympy.Mul(*b.shape), sympy.Mul(*b.ranges) * sympy.Mul(*b.rranges)]
        elif isinstance(b, ExternBuffer):
            out += [sympy.Mul(*r[0]) for r in b.results if r]
    return out


def needs_int64(g) -> bool:
    """Whether a kernel of g (at its sizes) may index past LIMIT: a buffer or loop nest that
    large, or an input whose strides reach that far into its storage."""
    for t in g.example_inputs:
        if isinstance(t, Tensor) and t.numel() and t.storage_offset() + 1 + sum(
                (s - 1) * abs(st) for s, st in zip(t.shape, t.stride())) > LIMIT:
            return True
    return any(g.sv.hint(e) > LIMIT for e in extents(g))


_PROGRAM_ID = re.compile(r"tl\.program_id\((\d)\)")
_ARANGE = re.compile(r"tl\.arange\(0, (\w+)\)")


def widen(src: str) -> str:
    """A generated kernel's source with int64 indices: its program ids and ranges, and its size
    arguments cast on entry (a product of two int32 sizes would wrap too)."""
    lines = src.split("\n")
    at = next(i for i, x in enumerate(lines) if x.startswith("def "))
    params = [p.strip() for p in lines[at].split("(", 1)[1].rsplit(")", 1)[0].split(",")]
    sizes = [p for p in params if p and ":" not in p and not re.fullmatch(r"p\d+", p)]
    body = "\n".join(lines[at + 1:])
    body = _ARANGE.sub(r"tl.arange(0, \1).to(tl.int64)",
                       _PROGRAM_ID.sub(r"tl.program_id(\1).to(tl.int64)", body))
    casts = [f"    {p} = {p}.to(tl.int64)" for p in sizes]
    return "\n".join(lines[:at + 1] + casts) + "\n" + body


def over_int32(plan, args) -> bool:
    """Whether these inputs' sizes take a symbolic wrapper's extents (`plan.extents`: sympy in
    the graph's symbols) past LIMIT: its int32 kernels do not serve them."""
    exprs = getattr(plan, "extents", None)
    if not exprs:
        return False
    fn = getattr(plan, "_largest", None)
    if fn is None:   # one Python function of the symbols (sympy's subs per call is slow)
        names = [str(s) for s in plan.sources]
        body = ", ".join(sorted({pyexpr(e) for e in exprs}))
        fn = plan._largest = eval(f"lambda {', '.join(names)}: max({body}, 0)")  # noqa: S307
    vals = [args[i] if d is None else args[i].shape[d] for i, d in plan.sources.values()]
    return fn(*vals) > LIMIT
