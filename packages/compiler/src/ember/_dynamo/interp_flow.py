"""The control half of the bytecode interpreter, a mixin of `Frame` (interp.py): returns and
yields, jumps and loops, calls and the functions made in the trace, imports, `with`, `raise`."""
from __future__ import annotations

from .exc import GraphBreak
from .interp_values import NULL, PY312, RETURN, Iter, LocalFunction
from .tracer import V

__all__ = ["FlowOps"]

MAX_YIELDS = 10_000


class FlowOps:
    """Opcode handlers that move the program counter or call out (they use Frame's helpers)."""

    # ---- returns and yields --------------------------------------------------------------
    def op_RETURN_VALUE(self, ins):
        return RETURN

    def op_RETURN_GENERATOR(self, ins):
        self.push(V(None))  # (what the first resume sends: popped by the next POP_TOP)

    def op_YIELD_VALUE(self, ins):
        if self.yielded is None:
            raise GraphBreak("yield outside a generator the frame inlines")
        if len(self.yielded) >= MAX_YIELDS:  # (run whole at its call: an endless one must stop)
            raise GraphBreak(f"a generator yielded over {MAX_YIELDS} values (endless?)")
        self.yielded.append(self.pop())
        self.push(V(None))  # the value sent back by next()

    def op_RETURN_CONST(self, ins):
        self.push(self.tr.to_v(ins.argval))
        return RETURN

    # ---- control flow ----------------------------------------------------------------------
    def op_GET_ITER(self, ins):
        self.push(V(Iter(self.items(self.pop()))))

    def op_FOR_ITER(self, ins):
        it = self.stack[-1].val
        if it.pos < len(it.items):
            self.push(it.items[it.pos])
            it.pos += 1
            return None
        self.pop()
        target = ins.argval
        if PY312 and self.instrs[self.index[target]].opname == "END_FOR":
            return self.instrs[self.index[target] + 1].offset
        return target

    def op_END_FOR(self, ins):
        self.pop()
        self.pop()

    def _jump(self, ins):
        return ins.argval

    op_JUMP_FORWARD = op_JUMP_BACKWARD = op_JUMP_BACKWARD_NO_INTERRUPT = op_JUMP = _jump
    op_JUMP_ABSOLUTE = _jump

    def _jump_if(self, ins):
        v = self.pop()
        name = ins.opname
        if name.endswith("_NONE"):
            cond = self.tr.unwrap(v) is None if v.ctype is None else False
            if "NOT_NONE" in name:
                cond = not cond
        else:
            cond = self.truth(v)
            if name.endswith("FALSE"):
                cond = not cond
        return ins.argval if cond else None

    op_POP_JUMP_IF_FALSE = op_POP_JUMP_IF_TRUE = _jump_if
    op_POP_JUMP_IF_NONE = op_POP_JUMP_IF_NOT_NONE = _jump_if
    op_POP_JUMP_FORWARD_IF_FALSE = op_POP_JUMP_FORWARD_IF_TRUE = _jump_if
    op_POP_JUMP_BACKWARD_IF_FALSE = op_POP_JUMP_BACKWARD_IF_TRUE = _jump_if
    op_POP_JUMP_FORWARD_IF_NONE = op_POP_JUMP_FORWARD_IF_NOT_NONE = _jump_if
    op_POP_JUMP_BACKWARD_IF_NONE = op_POP_JUMP_BACKWARD_IF_NOT_NONE = _jump_if

    def _jump_or_pop(self, ins):
        v = self.stack[-1]
        cond = self.truth(v)
        if cond == ins.opname.startswith("JUMP_IF_TRUE"):
            return ins.argval
        self.pop()
        return None

    op_JUMP_IF_TRUE_OR_POP = op_JUMP_IF_FALSE_OR_POP = _jump_or_pop

    # ---- calls -----------------------------------------------------------------------------
    def op_KW_NAMES(self, ins):
        self.kw_names = self.code.co_consts[ins.arg] if not PY312 or not isinstance(
            ins.argval, tuple) else ins.argval

    def op_CALL(self, ins):
        n = ins.arg
        args = self.popn(n)
        names = self.kw_names
        self.kw_names = ()
        kwargs = {}
        if names:
            kwargs = dict(zip(names, args[len(args) - len(names):]))
            args = args[:len(args) - len(names)]
        b, a = self.pop(), self.pop()
        if a is NULL:
            fn = b
        else:
            fn, args = a, [b] + args
        self.push(self.call(fn, args, kwargs))

    def op_CALL_FUNCTION_EX(self, ins):
        kwargs = self.pop() if ins.arg & 1 else V({}, None, dict)
        args = self.pop()
        fn = self.pop()
        if self.stack and self.stack[-1] is NULL:
            self.pop()
        if kwargs.ctype is not dict:
            raise GraphBreak("**kwargs from a non-dict")
        self.push(self.call(fn, self.items(args), dict(kwargs.val)))

    def op_MAKE_FUNCTION(self, ins):
        code = self.pop().val
        cells = self.pop().val if ins.arg & 0x08 else ()
        if ins.arg & 0x04:
            self.pop()
        kwd = self.pop().val if ins.arg & 0x02 else {}
        defaults = self.pop().val if ins.arg & 0x01 else ()
        cells = [c.val for c in cells]
        self.push(V(LocalFunction(code, self.globals, tuple(defaults), dict(kwd), cells,
                                  code.co_name)))

    # ---- imports (run for real: importing twice changes nothing) -----------------------------
    def op_IMPORT_NAME(self, ins):
        fromlist, level = self.pop(), self.pop()
        try:
            mod = __import__(ins.argval, self.globals, None, self.tr.unwrap(fromlist),
                             self.tr.unwrap(level))
        except ImportError as e:
            raise GraphBreak(f"import failed: {e}") from None
        self.push(V(mod))

    def op_IMPORT_FROM(self, ins):
        mod = self.stack[-1].val
        try:
            self.push(self.tr.to_v(getattr(mod, ins.argval)))
        except AttributeError as e:
            raise GraphBreak(f"import failed: {e}") from None

    # ---- with blocks -----------------------------------------------------------------------
    def op_BEFORE_WITH(self, ins):
        from ember import device

        from .calls import DeviceCtx, GradCtx
        ctx = self.pop()
        if isinstance(ctx.val, device):
            ctx = V(DeviceCtx(ctx.val))
        if not isinstance(ctx.val, (GradCtx, DeviceCtx)):
            raise GraphBreak(f"`with` on {type(ctx.val).__name__} is not modelled")
        exit_fn, entered = ctx.val.enter(self.tr)
        self.push(V(exit_fn))
        self.push(entered)

    def op_LOAD_ASSERTION_ERROR(self, ins):
        raise GraphBreak("assert statement failed at trace time or raises")

    def op_RAISE_VARARGS(self, ins):
        raise GraphBreak("raise statement")
