"""Resuming after a graph break (Dynamo's resume functions).

At a break in the top-level frame the capture keeps the graph up to the breaking instruction;
at call time that graph runs, the frame's stack and locals are rebuilt from its outputs, the one
breaking instruction runs in plain Python (`step`), and the rest of the frame continues in a
generated resume function: the original code object with a prologue that pushes the saved stack
and jumps to the next instruction. The resume function is itself compiled (its own graphs, guards
and breaks), or runs as ordinary Python where that fails.
"""
from __future__ import annotations

import dis
import sys
import types

from .tracer import V

__all__ = ["resume_function", "STEP_OPS", "step", "bind_super", "exit_grad", "GradExit", "NULL"]

PY312 = sys.version_info >= (3, 12)
_OP = dis.opmap
_DEREF = {"LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF", "LOAD_CLOSURE", "MAKE_CELL",
          "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF"}
# instructions `step` runs in plain Python at call time
STEP_OPS = {"CALL", "CALL_FUNCTION_EX", "STORE_ATTR", "STORE_SUBSCR", "STORE_GLOBAL",
            "DELETE_ATTR", "DELETE_SUBSCR", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE",
            "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_TRUE",
            "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE"}
NULL = object()


class GradExit:
    """The `__exit__` of a no_grad-style block entered inside captured code (one per mode)."""

    def __init__(self, prev: bool):
        self.prev = prev

    def __call__(self, *exc):
        from ember._state import state
        state.grad_enabled = self.prev
        return False


_EXITS = {True: GradExit(True), False: GradExit(False)}


def exit_grad(prev: bool) -> GradExit:
    return _EXITS[bool(prev)]


def _varint(v: int, first: bool) -> bytes:
    chunks = [v & 63]
    v >>= 6
    while v:
        chunks.append(v & 63)
        v >>= 6
    chunks.reverse()
    out = bytearray(c | 64 for c in chunks[:-1]) + bytearray([chunks[-1]])
    if first:
        out[0] |= 128
    return bytes(out)


def _shift_exception_table(code, units: int) -> bytes:
    out = bytearray()
    for e in dis._parse_exception_table(code):
        out += _varint(e.start // 2 + units, True)
        out += _varint((e.end - e.start) // 2, False)
        out += _varint(e.target // 2 + units, False)
        out += _varint((e.depth << 1) | int(e.lasti), False)
    return bytes(out)


def _ins(name, arg=0) -> bytes:
    out = bytearray()
    if arg > 255:
        ext = arg >> 8
        if ext > 255:
            out += _ins("EXTENDED_ARG", ext >> 8)[-2:]
        out += bytes([_OP["EXTENDED_ARG"], ext & 255])
    return bytes(out) + bytes([_OP[name], arg & 255])


def _rewrite_derefs(co_code: bytes, shift: int, n_locals: int) -> bytes:
    """Cell/free indices past the locals move by `shift` new locals (a captured parameter's
    cell stays in its parameter's slot)."""
    b = bytearray(co_code)
    for ins in dis._unpack_opargs(co_code) if hasattr(dis, "_unpack_opargs") else ():
        off, op, arg = ins[0], ins[1], ins[2]
        if dis.opname[op] in _DEREF and arg >= n_locals:
            if arg + shift > 255 or arg > 255:
                raise ValueError("resume: cell index over 255")
            b[off + 1] = arg + shift
    return bytes(b)


def own_cells(code) -> list:
    """(name, localsplus index) of the cells the code makes (its leading MAKE_CELLs)."""
    out = []
    for ins in dis.get_instructions(code):
        if ins.opname == "MAKE_CELL":
            out.append((ins.argval, ins.arg))
        elif ins.opname not in ("COPY_FREE_VARS", "NOP", "EXTENDED_ARG"):
            break
    return out


def resume_function(fn, code, target: int, stack_nulls: list):
    """A function that continues `code` at byte offset `target` with a stack of
    len(stack_nulls) values (NULL slots pushed as NULL). Arguments: every local of the
    original code in co_varnames order (a captured parameter: its cell's value), the non-NULL
    stack values, then the values of the other cells the code makes (fresh cells hold them)."""
    n_stack = sum(1 for n in stack_nulls if not n)
    base = len(code.co_varnames)
    cells = [(n, i) for n, i in own_cells(code) if i >= base]
    names = tuple(code.co_varnames) + tuple(f"___stack{base + i}" for i in range(n_stack)) + \
        tuple(f"___cell{base + n_stack + k}" for k in range(len(cells)))
    shift = n_stack + len(cells)
    pro = bytearray()
    if code.co_freevars:
        pro += _ins("COPY_FREE_VARS", len(code.co_freevars))
    for _, i in own_cells(code):
        pro += _ins("MAKE_CELL", i + shift if i >= base else i)
    pro += _ins("RESUME", 0)
    for k, (_, i) in enumerate(cells):
        pro += _ins("LOAD_FAST", base + n_stack + k)
        pro += _ins("STORE_DEREF", i + shift)
    k = 0
    for is_null in stack_nulls:
        if is_null:
            pro += _ins("PUSH_NULL")
        else:
            pro += _ins("LOAD_FAST", len(code.co_varnames) + k)
            k += 1
    # JUMP_FORWARD counts code units from the instruction after it; its own EXTENDED_ARG
    # prefixes sit before it, so the distance is the original offset either way
    pro += _ins("JUMP_FORWARD", target // 2)
    body = code.co_code
    if shift and (code.co_freevars or code.co_cellvars):
        body = _rewrite_derefs(body, shift, base)
    units = len(pro) // 2
    line = bytearray()
    left = units
    while left:
        n = min(left, 8)
        line.append(0x80 | (15 << 3) | (n - 1))
        left -= n
    flags = code.co_flags & ~(0x04 | 0x08)  # CO_VARARGS, CO_VARKEYWORDS: plain params now
    new = code.replace(
        co_code=bytes(pro) + body, co_varnames=names, co_nlocals=len(names),
        co_argcount=len(names), co_posonlyargcount=0, co_kwonlyargcount=0, co_flags=flags,
        co_exceptiontable=_shift_exception_table(code, units),
        co_linetable=bytes(line) + code.co_linetable,
        co_name=f"__resume_at_{target}_{code.co_name}",
        co_stacksize=code.co_stacksize + 2)
    f = types.FunctionType(new, fn.__globals__ if fn is not None else {}, new.co_name, None,
                           fn.__closure__ if fn is not None else None)
    return f


def step(ins, nxt: int, stack: list, kw_names, globs, call):
    """Run one instruction in plain Python on a real stack; the next byte offset."""
    name = ins.opname
    if name == "CALL":
        n = ins.arg
        args = stack[len(stack) - n:]
        del stack[len(stack) - n:]
        kwargs = {}
        if kw_names:
            kwargs = dict(zip(kw_names, args[len(args) - len(kw_names):]))
            args = args[:len(args) - len(kw_names)]
        b, a = stack.pop(), stack.pop()
        if a is NULL:
            fn = b
        else:
            fn, args = a, [b] + args
        stack.append(call(fn, args, kwargs))
    elif name == "CALL_FUNCTION_EX":
        kwargs = stack.pop() if ins.arg & 1 else {}
        args = stack.pop()
        fn = stack.pop()
        if stack and stack[-1] is NULL:
            stack.pop()
        stack.append(call(fn, list(args), dict(kwargs)))
    elif name == "STORE_ATTR":
        obj = stack.pop()
        setattr(obj, ins.argval, stack.pop())
    elif name == "DELETE_ATTR":
        delattr(stack.pop(), ins.argval)
    elif name == "STORE_SUBSCR":
        idx, obj, val = stack.pop(), stack.pop(), stack.pop()
        obj[idx] = val
    elif name == "DELETE_SUBSCR":
        idx, obj = stack.pop(), stack.pop()
        del obj[idx]
    elif name == "STORE_GLOBAL":
        globs[ins.argval] = stack.pop()
    elif name.startswith("POP_JUMP"):
        cond = bool(stack.pop())
        if cond == name.endswith("TRUE"):
            return ins.argval
    else:
        raise AssertionError(name)
    return nxt


def bind_super(call, fn, code, first):
    """`call` with a zero-argument `super()` bound as in the frame: `super(__class__, first
    argument)` (`step` runs the call outside the frame, where super() finds neither)."""
    if fn is None or not fn.__closure__ or "__class__" not in code.co_freevars:
        return call
    cls = fn.__closure__[code.co_freevars.index("__class__")].cell_contents

    def bound(f, args, kwargs):
        if f is super and not args and not kwargs:
            args = [cls, first]
        return call(f, args, kwargs)
    return bound


_ = V


class NotResumable(Exception):
    pass


def state_spec(tr, roots, outs: list, index: dict, callees=()):
    """Specs (see `rebuild`) of the frame values in roots; tensors become graph outputs."""
    from ember._subclasses.fake_tensor import FakeTensor

    from .calls import BoundMethod, ContainerMethod, DeviceExit, GradCtx, _GradExit
    from .interp import NULL as SYM_NULL
    from .interp import Iter, LocalFunction

    def spec(v):
        if v is SYM_NULL:
            return ("null",)
        if not isinstance(v, V):
            return ("k", v)
        val = v.val
        if v.ctype is not None:
            if v.src is not None:
                return ("s", v.src)
            if v.ctype is dict:
                return ("d", {k: spec(x) for k, x in val.items()}, id(val))
            return ("c", v.ctype, [spec(x) for x in val], id(val))
        if isinstance(val, FakeTensor):
            i = index.get(id(val))
            if i is None:
                i = index[id(val)] = len(outs)
                outs.append(tr.proxy.node_of(val))
            return ("t", i)
        if getattr(type(val), "_sym_kind", None) is not None:  # a symbolic size
            outs.append(tr.proxy.sym_node(val.expr, val.env))
            return ("t", len(outs) - 1)
        if isinstance(val, Iter):
            return ("iter", [spec(x) for x in val.items[val.pos:]])
        owner = getattr(val, "__self__", None)
        if isinstance(owner, FakeTensor) and not isinstance(val, type):
            return ("cm", spec(V(owner)), val.__name__)
        if isinstance(val, BoundMethod):
            return ("bm", val.fn, spec(val.self_v))
        if isinstance(val, ContainerMethod):
            return ("cm", spec(val.obj), val.name)
        if isinstance(val, DeviceExit):  # a break inside `with ember.device(...)`
            raise NotResumable("a graph break inside a `with ember.device` block")
        if isinstance(val, _GradExit):
            return ("k", exit_grad(val.prev))
        if isinstance(val, GradCtx):
            return ("grad", val.mode)
        if isinstance(val, LocalFunction) and v in callees:
            # a comprehension or lambda the breaking instruction calls: a real function over
            # fresh cells holding the current values (it runs to completion in that call)
            return ("lf", val.code, val.globals, val.__name__,
                    [spec(x) for x in val.defaults], [_cell_spec(c, spec) for c in val.cells])
        if type(val).__module__ == "ember._dynamo.interp_values":  # LocalFunction, Cell
            raise NotResumable(type(val).__name__)
        if v.src is not None and not isinstance(val, (int, float, str, bool, type(None))):
            return ("s", v.src)
        return ("k", val)
    return [spec(r) for r in roots]


def _cell_spec(c, spec):
    """A rebuilt local function's cell: the traced frame's own cell holds a value (a fresh cell
    at call time); a free variable of the compiled function is (its real cell, source): that
    very cell is shared, as the function made in the frame would."""
    from .interp import Cell
    if isinstance(c, Cell):
        return spec(c.v) if c.v is not None else ("empty",)
    if isinstance(c, tuple) and isinstance(c[0], types.CellType):
        return ("cell", c[0])
    return ("empty",)


def rebuild(spec, outs, A, K, env, memo):
    """The real value of a spec at call time (containers made once per id: aliasing kept)."""
    kind = spec[0]
    if kind == "t":
        return outs[spec[1]]
    if kind == "k":
        return spec[1]
    if kind == "s":
        return eval(spec[1], env, {"A": A, "K": K})  # noqa: S307
    if kind == "null":
        return NULL
    if kind == "iter":
        return iter([rebuild(s, outs, A, K, env, memo) for s in spec[1]])
    if kind == "bm":
        return types.MethodType(spec[1], rebuild(spec[2], outs, A, K, env, memo))
    if kind == "cm":
        return getattr(rebuild(spec[1], outs, A, K, env, memo), spec[2])
    if kind == "grad":
        import ember
        return ember.enable_grad() if spec[1] else ember.no_grad()
    if kind == "empty":
        return types.CellType()
    if kind == "lf":
        cells = tuple(types.CellType() if c[0] == "empty" else c[1] if c[0] == "cell" else
                      types.CellType(rebuild(c, outs, A, K, env, memo)) for c in spec[5])
        defaults = tuple(rebuild(s, outs, A, K, env, memo) for s in spec[4]) or None
        return types.FunctionType(spec[1], spec[2], spec[3], defaults, cells or None)
    key = spec[-1]
    if key in memo:
        return memo[key]
    if kind == "d":
        d = memo[key] = {}
        d.update({k: rebuild(s, outs, A, K, env, memo) for k, s in spec[1].items()})
        return d
    ct = spec[1]
    items = [rebuild(s, outs, A, K, env, memo) for s in spec[2]]
    if ct is list:
        r = items
    elif ct is tuple:
        r = tuple(items)
    else:
        r = ct(*items) if hasattr(ct, "_fields") else ct(items)
    memo[key] = r
    return r
