"""The data half of the bytecode interpreter, a mixin of `Frame` (interp.py): names,
attributes, the stack, operators, subscripts, containers and unpacking."""
from __future__ import annotations

import dis
import inspect
import operator
import types

from ember._subclasses.fake_tensor import FakeTensor

from .exc import GraphBreak
from .interp_values import NULL, PY312, Cell, Iter, _is_user_fn
from .tracer import V, attr_src

__all__ = ["DataOps"]

_BINOPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
           "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
           ">>": operator.rshift}
_INPLACE = {"+=": operator.iadd, "-=": operator.isub, "*=": operator.imul,
            "/=": operator.itruediv, "//=": operator.ifloordiv, "%=": operator.imod,
            "**=": operator.ipow, "@=": operator.imatmul, "&=": operator.iand,
            "|=": operator.ior, "^=": operator.ixor, "<<=": operator.ilshift,
            ">>=": operator.irshift}
_CMP = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
        ">": operator.gt, ">=": operator.ge}
_NB = [sym for _, sym in dis._nb_ops]
_UNARY = {"UNARY_NEGATIVE": operator.neg, "UNARY_POSITIVE": operator.pos,
          "UNARY_INVERT": operator.invert}


class DataOps:
    """Opcode handlers over values (they use Frame's push, pop, call and truth)."""

    # ---- no-ops ----------------------------------------------------------------------------
    def op_NOP(self, ins):
        pass

    op_RESUME = op_PRECALL = op_CACHE = op_EXTENDED_ARG = op_NOP

    def op_COPY_FREE_VARS(self, ins):
        pass

    def op_MAKE_CELL(self, ins):
        name = ins.argval
        if name not in self.cells:
            self.cells[name] = Cell(self.locals.pop(name, None))

    # ---- loads and stores ------------------------------------------------------------------
    def op_LOAD_CONST(self, ins):
        self.push(V(ins.argval) if not isinstance(ins.argval, tuple)
                  else self.tr.to_v(ins.argval))

    def op_LOAD_FAST(self, ins):
        v = self.locals.get(ins.argval)
        if v is None:
            raise GraphBreak(f"local {ins.argval!r} read before assignment")
        self.push(v)

    op_LOAD_FAST_CHECK = op_LOAD_FAST

    def op_LOAD_FAST_AND_CLEAR(self, ins):
        self.push(self.locals.pop(ins.argval, V(None)))

    def op_STORE_FAST(self, ins):
        self.locals[ins.argval] = self.pop()

    def op_DELETE_FAST(self, ins):
        self.locals.pop(ins.argval, None)

    def op_LOAD_GLOBAL(self, ins):
        name = ins.argval
        if ins.arg & 1:  # 3.11 and 3.12: NULL below the global
            self.push(NULL)
        if name in self.globals:
            v = self.tr.wrap(self.globals[name], f"{self.gsrc}[{name!r}]")
        else:
            import builtins
            if not hasattr(builtins, name):
                raise GraphBreak(f"name {name!r} is not defined")
            self.tr.add_guard(f"{name!r} not in {self.gsrc}", f"global {name} not defined")
            v = V(getattr(builtins, name))
        self.push(v)

    def op_PUSH_NULL(self, ins):
        self.push(NULL)

    def op_LOAD_DEREF(self, ins):
        c = self.cells.get(ins.argval)
        if isinstance(c, Cell):
            self.push(c.v)
        elif c is not None:
            try:
                val = c[0].cell_contents
            except ValueError:
                raise GraphBreak(f"free variable {ins.argval!r} is empty") from None
            self.push(self.tr.wrap(val, c[1]))
        else:
            raise GraphBreak(f"cell {ins.argval!r} unknown")

    def op_STORE_DEREF(self, ins):
        c = self.cells.get(ins.argval)
        if not isinstance(c, Cell):
            raise GraphBreak(f"assignment to nonlocal {ins.argval!r} of an outer function "
                             "(side effect)")
        self.tr.mutations += 1
        c.v = self.pop()

    def op_LOAD_CLOSURE(self, ins):
        c = self.cells.get(ins.argval)
        if c is None:
            c = self.cells[ins.argval] = Cell(self.locals.pop(ins.argval, None))
        self.push(V(c))

    def op_STORE_GLOBAL(self, ins):
        raise GraphBreak(f"assignment to global {ins.argval!r} (side effect)")

    def op_LOAD_ATTR(self, ins):
        name = ins.argval
        obj = self.pop()
        if PY312 and ins.arg & 1:
            self.push(NULL)
            self.push(self.load_attr(obj, name))
            return
        self.push(self.load_attr(obj, name))

    def op_LOAD_METHOD(self, ins):
        obj = self.pop()
        self.push(NULL)
        self.push(self.load_attr(obj, ins.argval))

    def load_attr(self, obj: V, name: str) -> V:
        from .calls import BoundMethod, ContainerMethod
        tr = self.tr
        val = obj.val
        if obj.ctype is not None:
            return V(ContainerMethod(obj, name))
        hit = tr.attr_overlay.get((id(val), name))
        if hit is not None:
            return V(hit[1])
        if isinstance(val, FakeTensor):
            if name == "grad" and obj.src is not None:
                real = tr.examples[tr.inputs.index(obj.src)] if obj.src in tr.inputs else None
                if real is not None:
                    return tr.wrap(real.grad, attr_src(obj.src, "grad"))
            if name in ("grad", "_base") and obj.src is not None:
                raise GraphBreak(f"reading tensor.{name} of an input is not modelled")
            if name in ("requires_grad", "is_leaf") and obj.src is not None:
                real = tr.examples[tr.inputs.index(obj.src)] if obj.src in tr.inputs else None
                if real is not None:
                    return V(getattr(real, name))
            try:
                r = getattr(val, name)
            except AttributeError as e:
                raise GraphBreak(f"tensor attribute {name!r}: {e}") from None
            return V(r) if callable(r) else tr.call_library(getattr, [obj, V(name)], {},
                                                            f"Tensor.{name}")
        static = inspect.getattr_static(val, name, None)
        if isinstance(static, types.FunctionType) and not isinstance(val, type) and \
                _is_user_fn(static) and name not in getattr(val, "__dict__", {}):
            return V(BoundMethod(static, obj))
        if isinstance(static, property) and isinstance(static.fget, types.FunctionType) and \
                _is_user_fn(static.fget):
            return self.call(V(static.fget), [obj])
        try:
            r = getattr(val, name)
        except AttributeError as e:
            raise GraphBreak(f"AttributeError: {e}") from None
        if obj.src is not None:
            return tr.wrap(r, attr_src(obj.src, name))
        return tr.to_v(r)

    def op_STORE_ATTR(self, ins):
        obj = self.pop()
        val = self.pop()
        c = self.tr.unwrap(val) if val.ctype is None else None
        if obj.src is not None and obj.ctype is None and type(c) in (bool, int, float, str,
                                                                      type(None)) \
                and not isinstance(obj.val, FakeTensor) and \
                attr_src(obj.src, ins.argval) not in self.tr._memo:
            # a constant stored on an object of the guard environment: replayed after the
            # graph runs (each call), seen by later reads in the frame. (Not where the frame
            # read it first, `self.calls += 1`: its guard would fail at every call.)
            self.tr.store_attr(obj, ins.argval, c)
            return
        raise GraphBreak(f"assignment to attribute {ins.argval!r} of "
                         f"{type(obj.val).__name__} (side effect on a Python object)")

    def op_DELETE_ATTR(self, ins):
        raise GraphBreak(f"del of attribute {ins.argval!r} (side effect)")

    # ---- stack shuffling -------------------------------------------------------------------
    def op_POP_TOP(self, ins):
        self.pop()

    def op_COPY(self, ins):
        self.push(self.stack[-ins.arg])

    def op_SWAP(self, ins):
        s = self.stack
        s[-1], s[-ins.arg] = s[-ins.arg], s[-1]

    # ---- arithmetic ------------------------------------------------------------------------
    def op_BINARY_OP(self, ins):
        b, a = self.pop(), self.pop()
        sym = _NB[ins.arg]
        fn = _BINOPS.get(sym) or _INPLACE[sym]
        if sym == "+=" and a.ctype is list and a.src is None:
            self.tr.mutations += 1
            a.val.extend(self.items(b))
            return self.push(a)
        self.push(self.call(V(fn), [a, b]))

    def op_COMPARE_OP(self, ins):
        b, a = self.pop(), self.pop()
        sym = ins.argval if isinstance(ins.argval, str) else dis.cmp_op[ins.arg]
        self.push(self.call(V(_CMP[sym]), [a, b]))

    def op_IS_OP(self, ins):
        b, a = self.pop(), self.pop()
        r = self.tr.unwrap(a) is self.tr.unwrap(b) if a.ctype is None or b.ctype is None \
            else a is b
        self.push(V(r != bool(ins.arg)))

    def op_CONTAINS_OP(self, ins):
        b, a = self.pop(), self.pop()
        if b.ctype is not None and a.ctype is None and not isinstance(a.val, FakeTensor):
            keys = b.val if b.ctype is dict else [self.tr.unwrap(e) for e in b.val]
            r = a.val in keys
        else:
            r = self.call(V(operator.contains), [b, a]).val
        self.push(V(bool(r) != bool(ins.arg)))

    def op_UNARY_NOT(self, ins):
        self.push(V(not self.truth(self.pop())))

    def _unary(self, ins):
        self.push(self.call(V(_UNARY[ins.opname]), [self.pop()]))

    op_UNARY_NEGATIVE = op_UNARY_POSITIVE = op_UNARY_INVERT = _unary

    def op_CALL_INTRINSIC_1(self, ins):
        if ins.argrepr == "INTRINSIC_LIST_TO_TUPLE":
            v = self.pop()
            return self.push(V(tuple(v.val), None, tuple))
        if ins.argrepr == "INTRINSIC_UNARY_POSITIVE":
            return self.push(self.call(V(operator.pos), [self.pop()]))
        raise GraphBreak(f"intrinsic {ins.argrepr} is not supported")

    def op_BINARY_SUBSCR(self, ins):
        idx, obj = self.pop(), self.pop()
        self.push(self.subscr(obj, idx))

    def subscr(self, obj: V, idx: V) -> V:
        from ember.nn import Module
        tr = self.tr
        key = tr.unwrap(idx)
        if obj.ctype is not None:
            if isinstance(key, FakeTensor):
                raise GraphBreak("indexing a Python container with a tensor")
            try:
                r = obj.val[key]
            except (KeyError, IndexError, TypeError) as e:
                raise GraphBreak(f"{type(e).__name__} raised (exceptions are not modelled)") \
                    from None
            if isinstance(key, slice):
                return V(list(r) if obj.ctype is list else tuple(r), None,
                         list if obj.ctype is list else tuple)
            return r
        if isinstance(obj.val, Module) and obj.src is not None and not isinstance(key, slice):
            return tr.wrap(obj.val[key], f"{obj.src}[{key!r}]")
        if isinstance(obj.val, dict) and isinstance(key, FakeTensor):
            return self._tensor_keyed(obj, idx)
        return self.call(V(operator.getitem), [obj, idx])

    def _tensor_keyed(self, obj: V, idx: V) -> V:
        """`optimizer.state[p]`: a dict keyed by an input tensor (by identity), read at capture
        and guarded to hold that key."""
        tr = self.tr
        if obj.src is None or idx.src is None or idx.src not in tr.inputs:
            raise GraphBreak("a dict keyed by a tensor made in the frame")
        real = tr.examples[tr.inputs.index(idx.src)]
        if real not in obj.val.keys():
            # the frame runs in Python this time; once the key exists, a capture again
            tr.add_guard(f"{idx.src} not in {obj.src}.keys()",
                         f"{idx.src} is not a key of {obj.src}")
            raise GraphBreak("a tensor-keyed dict without that key (reading it would add it)")
        tr.add_guard(f"{idx.src} in {obj.src}.keys()", f"{idx.src} is a key of {obj.src}")
        return tr.wrap(obj.val[real], f"{obj.src}[{idx.src}]")

    def op_BINARY_SLICE(self, ins):
        end, start, obj = self.pop(), self.pop(), self.pop()
        self.push(self.subscr(obj, V(slice(self.tr.unwrap(start), self.tr.unwrap(end)))))

    def op_STORE_SUBSCR(self, ins):
        idx, obj, val = self.pop(), self.pop(), self.pop()
        self.store_subscr(obj, idx, val)

    def store_subscr(self, obj, idx, val):
        if obj.ctype in (list, dict) and obj.src is None:
            self.tr.mutations += 1
            obj.val[self.tr.unwrap(idx)] = val
        elif isinstance(obj.val, FakeTensor):
            self.call(V(operator.setitem), [obj, idx, val])
        else:
            raise GraphBreak(f"item assignment on {type(obj.val).__name__} that exists outside "
                             "the frame (side effect)")

    def op_STORE_SLICE(self, ins):
        end, start, obj, val = self.pop(), self.pop(), self.pop(), self.pop()
        self.store_subscr(obj, V(slice(self.tr.unwrap(start), self.tr.unwrap(end))), val)

    def op_DELETE_SUBSCR(self, ins):
        idx, obj = self.pop(), self.pop()
        if obj.ctype in (list, dict) and obj.src is None:
            self.tr.mutations += 1
            del obj.val[self.tr.unwrap(idx)]
        else:
            raise GraphBreak("del of an item outside the frame (side effect)")

    def op_BUILD_SLICE(self, ins):
        parts = [self.tr.unwrap(v) for v in self.popn(ins.arg)]
        self.push(V(slice(*parts)))

    # ---- building containers ---------------------------------------------------------------
    def op_BUILD_TUPLE(self, ins):
        self.push(V(tuple(self.popn(ins.arg)), None, tuple))

    def op_BUILD_LIST(self, ins):
        self.push(V(list(self.popn(ins.arg)), None, list))

    def op_BUILD_SET(self, ins):
        self.push(V({self.set_key(v) for v in self.popn(ins.arg)}, None, set))

    def set_key(self, v):
        """A set element: plain values only (a set of tensors would order by id)."""
        k = self.tr.unwrap(v)
        if isinstance(k, (FakeTensor, list, dict, set)) or type(k).__module__ == __name__:
            raise GraphBreak(f"a {type(k).__name__} in a set is not modelled")
        return k

    def op_SET_ADD(self, ins):
        v = self.pop()
        self._container(ins.arg).val.add(self.set_key(v))

    def op_SET_UPDATE(self, ins):
        v = self.pop()
        self._container(ins.arg).val.update(self.set_key(x) for x in self.items(v))

    def op_BUILD_MAP(self, ins):
        items = self.popn(2 * ins.arg)
        self.push(V({self.key(items[i]): items[i + 1] for i in range(0, len(items), 2)},
                    None, dict))

    def key(self, v):
        k = self.tr.unwrap(v)
        if isinstance(k, FakeTensor):
            raise GraphBreak("a tensor as a dict key")
        return k

    def op_BUILD_CONST_KEY_MAP(self, ins):
        keys = self.pop().val
        vals = self.popn(ins.arg)
        self.push(V({self.key(k): v for k, v in zip(keys, vals)}, None, dict))

    def op_BUILD_STRING(self, ins):
        self.push(V("".join(self.tr.unwrap(v) for v in self.popn(ins.arg))))

    def op_FORMAT_VALUE(self, ins):
        spec = self.pop().val if (ins.arg & 0x04) == 0x04 else ""
        v = self.tr.unwrap(self.pop())
        if isinstance(v, FakeTensor):
            raise GraphBreak("formatting a tensor's value")
        conv = ins.arg & 0x03
        v = {0: v, 1: str(v), 2: repr(v), 3: ascii(v)}[conv]
        self.push(V(format(v, spec)))

    def _container(self, i) -> V:
        c = self.stack[-i]
        if c.src is not None:
            raise GraphBreak("mutating a container from outside the frame")
        self.tr.mutations += 1
        return c

    def op_LIST_APPEND(self, ins):
        v = self.pop()
        self._container(ins.arg).val.append(v)

    def op_LIST_EXTEND(self, ins):
        v = self.pop()
        self._container(ins.arg).val.extend(self.items(v))

    def op_LIST_TO_TUPLE(self, ins):
        self.push(V(tuple(self.pop().val), None, tuple))

    def op_DICT_UPDATE(self, ins):
        v = self.pop()
        if v.ctype is not dict:
            raise GraphBreak("dict update from a non-dict")
        self._container(ins.arg).val.update(v.val)

    op_DICT_MERGE = op_DICT_UPDATE

    def op_MAP_ADD(self, ins):
        val, k = self.pop(), self.pop()
        self._container(ins.arg).val[self.key(k)] = val

    def items(self, v: V) -> list:
        """The V's an iterable yields (for loops, unpacking, *args)."""
        from ember.nn import Module
        tr = self.tr
        if isinstance(v.val, Iter):
            it = v.val
            r = it.items[it.pos:]
            it.pos = len(it.items)
            return r
        if v.ctype is dict or v.ctype is set:
            return [V(k) for k in v.val]
        if v.ctype is not None:
            return list(v.val)
        val = v.val
        if isinstance(val, FakeTensor):
            if val.ndim == 0:
                raise GraphBreak("iterating a 0-d tensor")
            return [tr.call_library(operator.getitem, [v, V(i)], {}, "tensor iteration")
                    for i in range(val.shape[0])]
        if isinstance(val, Module) and hasattr(val, "__iter__"):
            from ember.nn import ModuleDict
            if isinstance(val, ModuleDict):
                return [V(k) for k in val.keys()]
            if v.src is None:
                raise GraphBreak("iterating a module without a source")
            mods = list(val)
            tr.add_guard(f"len({v.src}) == {len(mods)}", f"len({v.src}) == {len(mods)}")
            return [tr.wrap(m, f"{v.src}[{i}]") for i, m in enumerate(mods)]
        if isinstance(val, (range, str, bytes)):
            return [V(x) for x in val]
        raise GraphBreak(f"iterating {type(val).__name__} is not modelled")

    def op_UNPACK_SEQUENCE(self, ins):
        vals = self.items(self.pop())
        if len(vals) != ins.arg:
            raise GraphBreak(f"unpacking {len(vals)} values into {ins.arg}")
        self.stack.extend(reversed(vals))

    def op_UNPACK_EX(self, ins):
        before, after = ins.arg & 0xFF, ins.arg >> 8
        vals = self.items(self.pop())
        if len(vals) < before + after:
            raise GraphBreak("not enough values to unpack")
        mid = vals[before:len(vals) - after]
        out = vals[:before] + [V(list(mid), None, list)] + vals[len(vals) - after:]
        self.stack.extend(reversed(out))
