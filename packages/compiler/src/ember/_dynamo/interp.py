"""A symbolic interpreter of CPython 3.11/3.12 bytecode: one `Frame` per inlined function.

Each instruction pops and pushes `V`s (see tracer.py); its handler is a method of the mixins
DataOps (interp_data.py) or FlowOps (interp_flow.py). Tensor work runs on fake tensors and is
recorded into the tracer's fx graph; Python values are computed for real; anything this file does
not model (data-dependent branches, mutation of objects that exist outside the frame, unknown
calls, exceptions) raises GraphBreak with the reason and the user's file:line.
"""
from __future__ import annotations

import dis
import inspect
import keyword

from ember._subclasses.fake_tensor import FakeTensor

from .calls import call_value
from .exc import GraphBreak
from .interp_data import DataOps
from .interp_flow import FlowOps
from .interp_values import NULL, RETURN, Cell, Iter, LocalFunction, _is_user_fn
from .tracer import V

__all__ = ["Frame", "inline_call", "NULL", "Cell", "LocalFunction", "Iter", "_is_user_fn"]

MAX_DEPTH = 48
MAX_STEPS = 2_000_000


def bind_args(tr, code, name, defaults, kwdefaults, args, kwargs) -> dict:
    """Locals of a new frame from V args (Python's own binding rules, on a signature)."""
    params = []
    n_pos = code.co_argcount
    names = code.co_varnames
    posonly = code.co_posonlyargcount
    ndef = len(defaults)
    P = inspect.Parameter
    real = {}  # parameter name -> local name (names inspect refuses: `.0`, pytest's `@py_*`)

    def pname(n):
        if n.isidentifier() and not keyword.iskeyword(n):
            return n
        alias = f"___p{len(real)}"
        real[alias] = n
        return alias
    names = tuple(pname(n) if j < n_pos + code.co_kwonlyargcount + 2 else n
                  for j, n in enumerate(names))
    for i in range(n_pos):
        kind = P.POSITIONAL_ONLY if i < posonly else P.POSITIONAL_OR_KEYWORD
        d = defaults[i - (n_pos - ndef)] if i >= n_pos - ndef else P.empty
        params.append(P(names[i], kind, default=d))
    i = n_pos
    kwonly = names[i:i + code.co_kwonlyargcount]
    i += code.co_kwonlyargcount
    if code.co_flags & inspect.CO_VARARGS:
        params.append(P(names[i], P.VAR_POSITIONAL))
        i += 1
    for k in kwonly:
        params.append(P(k, P.KEYWORD_ONLY, default=kwdefaults.get(k, P.empty)))
    if code.co_flags & inspect.CO_VARKEYWORDS:
        params.append(P(names[i], P.VAR_KEYWORD))
    try:
        b = inspect.Signature(params).bind(*args, **kwargs)
    except TypeError as e:
        raise GraphBreak(f"calling {name}: {e}") from None
    b.apply_defaults()
    out = {}
    for p in params:
        val = b.arguments[p.name]
        if p.name in real:
            p = _Named(real[p.name], p.kind)
        if p.kind == P.VAR_POSITIONAL:
            out[p.name] = V(tuple(val), None, tuple)
        elif p.kind == P.VAR_KEYWORD:
            out[p.name] = V(dict(val), None, dict)
        else:
            out[p.name] = val if isinstance(val, V) else tr.to_v(val)
    return out


class _Named:
    def __init__(self, name, kind):
        self.name, self.kind = name, kind


def inline_call(tr, fn, args, kwargs, depth):
    """Run a user function (FunctionType or LocalFunction) symbolically; its return V."""
    if depth > MAX_DEPTH:
        raise GraphBreak(f"call depth over {MAX_DEPTH} (recursion?) in {fn.__name__}")
    if isinstance(fn, LocalFunction):
        code, globs, cells = fn.code, fn.globals, fn.cells
        defaults, kwdefaults, fsrc = fn.defaults, fn.kwdefaults, None
    else:
        code, globs = fn.__code__, fn.__globals__
        fsrc = tr.obj(fn)
        cells = [(c, f"{fsrc}.__closure__[{i}].cell_contents")
                 for i, c in enumerate(fn.__closure__ or ())]
        defaults = tuple(tr.to_v(d) for d in (fn.__defaults__ or ()))
        kwdefaults = {k: tr.to_v(d) for k, d in (fn.__kwdefaults__ or {}).items()}
    gen = bool(code.co_flags & inspect.CO_GENERATOR)
    if code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR) or (
            gen and tr.top is None):
        raise GraphBreak(f"generator or coroutine {code.co_name} is not modelled")
    local = bind_args(tr, code, code.co_name, defaults, kwdefaults, args, kwargs)
    f = Frame(tr, code, globs, local, cells, depth)
    if gen:
        # inlined as PyTorch's dynamo does: run to its end at the call, its values handed out
        # by an iterator (a generator expression's body runs before it is consumed)
        f.yielded = []
        f.run()
        return V(Iter(f.yielded))
    if tr.top is None:
        tr.top = f
        f.fn = None if isinstance(fn, LocalFunction) else fn
    return f.run()


class Frame(DataOps, FlowOps):
    """The interpreter of one code object."""

    def __init__(self, tr, code, globs, local, cells, depth):
        self.tr, self.code, self.globals, self.depth = tr, code, globs, depth
        self.locals = local
        self.cells: dict = {}
        for name, c in zip(code.co_freevars, cells):
            self.cells[name] = c  # Cell (ours) or (real cell, its source)
        self.stack: list = []
        self.kw_names = ()
        self.gsrc = tr.obj(globs, "G")
        self.instrs = list(dis.get_instructions(code))
        self.index = {ins.offset: i for i, ins in enumerate(self.instrs)}
        self.line = code.co_firstlineno
        self.fn = None
        self.yielded = None  # a generator's values (see inline_call)

    def where(self) -> str:
        return f"{self.code.co_filename}:{self.line}"

    def run(self):
        pc = 0
        steps = 0
        while True:
            ins = self.instrs[pc]
            if ins.starts_line is not None:
                self.line = ins.starts_line
            steps += 1
            if steps > MAX_STEPS:
                raise GraphBreak("too many instructions (an unbounded loop?)", self.where())
            h = getattr(self, "op_" + ins.opname, None)
            if h is None:
                raise GraphBreak(f"bytecode {ins.opname} is not supported", self.where())
            top = self.tr.top is self
            if top:
                snap = (list(self.stack), self.kw_names, dict(self.locals), self.tr.mutations,
                        self.tr.grad_enabled, self.tr.graph._len - len(self.tr.inputs),
                        [(v.val, v.val.pos) for v in self.stack if isinstance(v.val, Iter)])
            try:
                r = h(ins)
            except GraphBreak as e:
                if not e.where:
                    e.where = self.where()
                if top:
                    e.resume = self.resume_point(pc, ins, snap)
                raise
            if r is None:
                pc += 1
            elif r is RETURN:
                return self.stack.pop()
            else:
                pc = self.index[r]

    def resume_point(self, pc, ins, snap):
        """What a resume after this break needs, or None where it cannot resume here."""
        from .resume import STEP_OPS
        stack, kw_names, local, mutations, grad, n_ops, iters = snap
        tr = self.tr
        if ins.opname not in STEP_OPS or mutations != tr.mutations or grad != tr.grad_enabled \
                or self.fn is None or pc + 1 >= len(self.instrs):
            return None
        for it, pos in iters:  # iterators the partial call advanced: back where they were
            it.pos = pos
        if any(isinstance(v.val, Iter) for v in local.values()):
            return None
        g = tr.graph
        extra = g._len - len(tr.inputs) - n_ops
        drop = []
        for n in reversed(g.nodes):
            if len(drop) >= extra:
                break
            if n.op != "placeholder":
                drop.append(n)
        if any("inplace" in getattr(n.target, "tags", ()) or getattr(n.target, "mutated_idx",
                                                                     None) for n in drop):
            return None  # the partial call wrote a tensor (maybe its shape): not undone
        for n in drop:
            g.erase_node(n)
        from .resume import own_cells
        local = dict(local)
        cellvals = []
        base = len(self.code.co_varnames)
        for name, i in own_cells(self.code):
            c = self.cells.get(name)
            v = c.v if isinstance(c, Cell) and c.v is not None else V(None)
            if i < base:
                local[name] = v   # a captured parameter: its slot passes the cell's value
            else:
                cellvals.append(v)
        return {"ins": ins, "next": self.instrs[pc + 1].offset, "stack": stack,
                "kw_names": kw_names, "locals": local, "code": self.code, "fn": self.fn,
                "globals": self.globals, "cells": cellvals}

    # ---- helpers ---------------------------------------------------------------------------
    def push(self, v):
        self.stack.append(v)

    def pop(self):
        return self.stack.pop()

    def popn(self, n):
        if n == 0:
            return []
        r = self.stack[-n:]
        del self.stack[-n:]
        return r

    def call(self, fn, args, kwargs=None):
        return call_value(self, fn, list(args), kwargs or {})

    def truth(self, v) -> bool:
        if isinstance(v.val, FakeTensor):
            raise GraphBreak("data-dependent branch: `if` on a tensor's value")
        if v.ctype is not None:
            return bool(v.val)
        try:
            return bool(v.val)
        except Exception as e:
            raise GraphBreak(f"truth value of {type(v.val).__name__}: {e}") from None
