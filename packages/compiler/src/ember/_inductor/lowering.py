"""Lowering: an fx graph of op-table calls -> TBoxes and buffers of the loop IR.

Pointwise ops come from their entry's `pointwise=` formula (the one that drives the eager
kernels), views become index arithmetic, reductions and a few composite ops (softmax,
log_softmax, layer norm: `decompositions.py`) become reductions with their pointwise prologue
and epilogue, and every other op is an extern call to the op itself, so every graph runs.
"""
from __future__ import annotations

import operator

import numpy as np
import sympy

import ember
from ember import _dtype as D
from ember._dispatch import pointwise_dtypes
from ember._ops._cppops import CT, CppOps, Var
from ember._tensor import Tensor
from ember.fx.node import Node

from .ir import ComputedBuffer, ExternBuffer, InputBuffer, TBox, kdtype, loop_vars
from .sizevars import SizeVars, contiguous_strides, decompose

__all__ = ["GraphLowering", "LOWERINGS", "register_lowering", "cast", "Fallback"]

LOWERINGS: dict = {}   # op qualname -> fn(g, node, args, kwargs, meta) -> TBox | tuple | None
_RESHAPES = frozenset({"view", "reshape", "_unsafe_view", "flatten", "unflatten", "squeeze",
                       "unsqueeze", "squeeze.dims", "squeeze.dim"})
_DTYPES = frozenset(CT) | {D.bfloat16, D.float16}
_INLINE_LIMIT = 48  # a lazy value whose element costs more lines is computed once, into memory


class Fallback(Exception):
    """The graph cannot be lowered (in-place ops other than write-backs, a device other than
    CPU or CUDA, a dtype without kernels): it runs as captured instead."""


def register_lowering(*names):
    def reg(fn):
        for n in names:
            LOWERINGS[n] = fn
        return fn
    return reg


def cast(h, v, d):
    """v as dtype d inside a kernel (no code when it already is)."""
    v = h.v(v)
    d = kdtype(d)
    if v.dtype is d and not getattr(v, "weak", None):
        return v
    return h.cast(v, d)


class Probe(CppOps):
    """A C++ handler that only checks a loader can be emitted (dtypes, primitives)."""

    def __init__(self, var_ranges=None):
        super().__init__()
        self.var_ranges = var_ranges or {}

    def load(self, buf, index):
        self.nloads = getattr(self, "nloads", 0) + 1
        return Var(f"ld{self.n}", kdtype(buf.dtype))

    def index_expr(self, e):
        self.n += 1
        return Var(f"ix{self.n}", D.int64)

    def philox(self, kind, seed, ctr, flat):   # a random draw (rng.py; Triton kernels only)
        self.n += 4
        return Var(f"rnd{self.n}", D.float32)


class SymVal:
    """A size used as a value (dynamic graphs): `expr` over the lowering's size symbols;
    kernels read it through `index_expr`, extern calls and outputs through the wrapper."""

    def __init__(self, expr):
        self.expr = expr

    def __repr__(self):
        return f"SymVal({self.expr})"


_SYM_ARITH = {operator.add: lambda a, b: a + b, operator.sub: lambda a, b: a - b,
              operator.mul: lambda a, b: a * b}


def _meta_like(shape, stride, offset, dtype):
    extent = 1 + offset + sum((n - 1) * s for n, s in zip(shape, stride) if n > 0)
    base = Tensor._empty((max(extent, 1),), dtype, ember.device("meta"))
    return base._alias(tuple(shape), tuple(stride), offset)


class GraphLowering:
    """Lowers one GraphModule for its example inputs (static sizes, bound as symbols)."""

    def __init__(self, gm, example_inputs, device=None, sym_ints=False, max_autotune=False):
        self.gm, self.example_inputs = gm, list(example_inputs)
        self.max_autotune = max_autotune  # GEMMs as benchmarked Triton templates (gemm.py)
        self.sym_ints = sym_ints        # int inputs are sizes: SymVal values (dynamic.py)
        self.as_device = device         # meta inputs standing for this device's (dynamic.py)
        self.sv = SizeVars()
        self.inputs: list[InputBuffer] = []
        self.constants: list = []       # (InputBuffer, tensor) for get_attr values
        self.buffers: list = []         # ComputedBuffer / ExternBuffer in program order
        self.env: dict = {}
        self.meta: dict = {}
        self.outputs: list = []         # TBox or a Python value, per graph output
        self.mutations: list = []       # (input TBox, new value TBox): written back at the end
        self.grad_mode = [None, None]   # grad mode the graph set last, the one the wrapper set
        self.names = 0
        self.device = "cpu"            # where the graph's tensors live: "cpu" or "cuda"
        self._device_set = False       # (int inputs come before tensors in AOT graphs)

    # ---- helpers ---------------------------------------------------------------------------
    def new_name(self, prefix="buf") -> str:
        self.names += 1
        return f"{prefix}{self.names - 1}"

    def strides_of(self, t) -> tuple:
        """Symbolic strides of a concrete tensor: contiguous ones as products of its sizes."""
        shape = self.sv.shape(t.shape)
        if tuple(t.stride()) == tuple(_c_strides(t.shape)):
            return contiguous_strides(shape)
        return tuple(self.sv.sym(s) if s > 1 else sympy.Integer(s) for s in t.stride())

    def realize(self, tb: TBox, origins=()) -> TBox:
        if not isinstance(tb, TBox) or not tb.lazy:
            return tb
        shape = tb.shape
        keep = [i for i, s in enumerate(shape) if s != 1]
        cst = contiguous_strides(shape)

        def fn(h, vars_, rvars):
            idx = [sympy.Integer(0)] * len(shape)
            for j, i in enumerate(keep):
                idx[i] = vars_[j]
            return tb.load(h, idx)

        def store_index(vars_):
            return sympy.expand(sum((vars_[j] * cst[i] for j, i in enumerate(keep)),
                                    sympy.Integer(0)))
        org = list(getattr(tb, "origins", ()))
        buf = ComputedBuffer(self.new_name(), shape, tb.dtype, [shape[i] for i in keep], fn,
                             store_index, origins=org or origins)
        self.buffers.append(buf)
        return TBox.of(buf)

    # ---- the pass --------------------------------------------------------------------------
    def run(self):
        with ember.no_grad():
            for n in self.gm.graph.nodes:
                self.lower_node(n)
        return self

    def lower_node(self, n: Node):
        if n.op == "placeholder":
            t = self.example_inputs[len(self.inputs)]
            self.meta[n] = self._input_meta(t)
            self.env[n] = self._input(n.name, t, len(self.inputs)) if isinstance(t, Tensor) \
                else t
            if self.sym_ints and type(t) is int and t >= 2:
                self.env[n] = SymVal(self.sv.sym(t))
            self.inputs.append(self.env[n] if isinstance(t, Tensor) else t)
        elif n.op == "get_attr":
            obj = self.gm
            for part in n.target.split("."):
                obj = getattr(obj, part)
            self.meta[n] = self._input_meta(obj)
            if isinstance(obj, Tensor):
                tb = self._input(f"const{len(self.constants)}", obj, None)
                self.constants.append((tb.buf, n.target))
                self.env[n] = tb
            else:
                self.env[n] = obj
        elif n.op == "call_function" and _is_grad_toggle(n):
            self.grad_mode[0] = n.args[0]   # set lazily: only extern calls see grad mode
        elif n.op == "call_function":
            self.meta[n] = self._run_meta(n)
            self._check_factory_device(n)
            first = len(self.buffers)
            self.env[n] = self.lower_call(n)
            self._origins(n, first)
            tb = self.env[n]
            if isinstance(tb, TBox) and tb.lazy:
                lines, loads = self.cost(tb, loads=True)
                # constants (no loads, a line or two) are recomputed by every reader
                many = len(n.users) > 1 and not getattr(tb, "recompute", False)
                if (many and (loads or lines > 2)) or lines > _INLINE_LIMIT:
                    self.env[n] = self.realize(tb, [n.name])
        elif n.op == "output":
            self._sync_grad_mode()
            outs = n.args[0]
            outs = outs if isinstance(outs, (tuple, list)) else (outs,)
            done: dict = {}   # a node returned twice (an output also saved for backward)
            for o in outs:    # is stored once
                if isinstance(o, Node) and o not in done:
                    done[o] = self.realize(self.env[o], [o.name])
            self.outputs = [done[o] if isinstance(o, Node) else o for o in outs]
        else:
            raise Fallback(f"{n.op} nodes")

    def _check_factory_device(self, n):
        """A factory naming its device (`device=`, or a `with ember.device` block's, which the
        trace records) makes its tensor there: a graph whose tensors would span two devices
        runs as captured."""
        dev = n.kwargs.get("device")
        if dev is None:
            return
        t = dev.type if isinstance(dev, ember.device) else ember.device(dev).type
        if t == "meta" and self.as_device:
            return   # (the symbolic lowering's stand-ins)
        if t == "cpu" and getattr(self.meta[n], "ndim", None) == 0:
            return   # a CPU scalar tensor mixes with any device's, as in eager
        if t not in ("cpu", "cuda") or (self._device_set and t != self.device):
            raise Fallback(f"a factory on {t} in a graph on {self.device}")
        self.device, self._device_set = t, True

    def _origins(self, n, first):
        """Name the ops each new buffer and lazy value computes (kernel comments)."""
        org = []
        for a in n.all_input_nodes:
            for tb in _leaves(self.env.get(a)):
                if tb.lazy:
                    org += [o for o in getattr(tb, "origins", ()) if o not in org]
        name = getattr(n.target, "name", getattr(n.target, "__name__", str(n.target)))
        name = name() if callable(name) else name   # (a higher-order op's name())
        if name not in org:
            org.append(name)
        for b in self.buffers[first:]:
            if not isinstance(b, ExternBuffer):
                b.origins = list(org)
        for tb in _leaves(self.env[n]):
            if tb.lazy:
                tb.origins = org

    def _input(self, name, t, index):
        dev = self.as_device if t.device.type == "meta" and self.as_device else t.device.type
        if dev not in ("cpu", "cuda") or (self._device_set and dev != self.device):
            raise Fallback(f"tensors on {dev} (and {self.device})")
        self.device, self._device_set = dev, True
        if t.dtype not in _DTYPES:
            raise Fallback(f"dtype {t.dtype}")
        buf = InputBuffer(name, self.sv.shape(t.shape), t.dtype, index)
        return TBox.of(buf, stride=self.strides_of(t))

    @staticmethod
    def _input_meta(t):
        if isinstance(t, Tensor):
            return _meta_like(t.shape, t.stride(), 0, t.dtype)
        return t

    def _run_meta(self, n: Node):
        args = _map(n.args, lambda a: self.meta[a])
        kwargs = _map(n.kwargs, lambda a: self.meta[a])
        if kwargs.get("device") is not None and ("random" in getattr(n.target, "tags", ()) or
                                                  not n.all_input_nodes):
            # no draw (nor memory) at compile time; and a factory's value on its device
            # would meet meta tensors in the next op's run here: a CUDA kernel reading a meta
            # tensor's (no) memory, an illegal memory access
            kwargs["device"] = ember.device("meta")
        try:
            return n.target(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - an op without a meta rule: the graph runs as is
            raise Fallback(f"{_name(n.target)} on meta tensors: {e}") from e

    def lower_call(self, n: Node):
        op = n.target
        meta = self.meta[n]
        if op is operator.getitem:
            return self.env[n.args[0]][n.args[1]]
        if op in _SYM_ARITH and len(n.args) == 2 and not n.kwargs:
            a, b = (self.env[x] if isinstance(x, Node) else x for x in n.args)
            if any(isinstance(x, SymVal) for x in (a, b)) and \
                    all(isinstance(x, (SymVal, int)) for x in (a, b)):
                a, b = (x.expr if isinstance(x, SymVal) else sympy.Integer(x) for x in (a, b))
                return SymVal(sympy.expand(_SYM_ARITH[op](a, b)))
        if getattr(op, "qualname", None) == "copy_" and _is_writeback(n):
            return self.lower_writeback(n)
        if "inplace" in getattr(op, "tags", ()) or getattr(op, "mutated_idx", None):
            raise Fallback(f"{_name(op)} mutates its input")
        args = _map(n.args, lambda a: self.env[a])
        kwargs = _map(n.kwargs, lambda a: self.env[a])
        if hasattr(op, "schema") and _tensor_outs_ok(meta):
            try:
                bound = op.bind(tuple(args), dict(kwargs))
                mbound = op.bind(tuple(_map(n.args, lambda a: self.meta[a])),
                                 dict(_map(n.kwargs, lambda a: self.meta[a])))
            except TypeError:
                bound = None
            if bound is not None:
                r = None
                fn = LOWERINGS.get(op.qualname)
                if op.view is not None and isinstance(bound[0], TBox):
                    r = self.lower_view(op, bound, mbound, meta)
                elif fn is not None:
                    r = fn(self, op, bound, mbound, meta)
                elif op.pointwise is not None and op.nret == 1:
                    r = self.lower_pointwise(op, bound, mbound, meta)
                if r is not None:
                    return r
        return self.extern(n, op, args, kwargs, meta)

    def lower_writeback(self, n: Node):
        """Functionalization's `copy_(input, new)` at the end of a graph: the new value is
        computed into a buffer by the kernels; the wrapper copies it into the input last."""
        dst, src = self.env[n.args[0]], self.env[n.args[1]]
        if not isinstance(src, TBox) or tuple(src.shape) != tuple(dst.shape) or \
                src.dtype != dst.dtype:
            raise Fallback("a write-back of another shape or dtype")
        if any(d is dst for d, _ in self.mutations):
            raise Fallback("an input written back twice")
        if src.buf is dst.buf and src.stride == dst.stride and src.offset == dst.offset:
            return dst   # unchanged
        self.mutations.append((dst, self.realize(src, [n.name])))
        return dst

    # ---- pointwise -------------------------------------------------------------------------
    def lower_pointwise(self, op, args, margs, meta):
        if not isinstance(meta, Tensor) or meta.dtype not in _DTYPES:
            return None
        inputs = [margs[i] for i in op.pw_idx]
        try:
            _, rdt, cdt = pointwise_dtypes(op, inputs, margs)
        except Exception:  # noqa: BLE001 - eager raises it: the extern call raises it too
            return None
        if cdt not in CT or any(isinstance(margs[i], Tensor) and margs[i].dtype not in _DTYPES
                                for i in op.tensor_idx):
            return None
        shape = self.sv.shape(meta.shape)
        pw = set(op.pw_idx)

        def loader(h, idx):
            a = list(args)
            for i in op.tensor_idx:
                x = a[i]
                if isinstance(x, TBox):
                    v = bcast_load(h, x, idx)
                    a[i] = cast(h, v, cdt) if i in pw else v
            for i in op.pw_idx:
                x = args[i]
                if isinstance(x, SymVal):
                    a[i] = cast(h, h.index_expr(x.expr), cdt)
                elif x is not None and not isinstance(x, TBox):
                    a[i] = cdt.np.type(x)
            return cast(h, op.pointwise(h, *a), rdt)
        if not self.probe(loader, shape):
            return None
        return TBox(shape, rdt, loader)

    def cost(self, tb, loads=False):
        """Lines of code one element of a lazy value inlines (its whole producer chain);
        with loads=True, (lines, memory loads)."""
        vars_ = loop_vars("p", len(tb.shape))
        h = Probe(dict(zip(vars_, tb.shape)))
        try:
            tb.load(h, vars_)
        except Exception:  # noqa: BLE001
            return (0, 1) if loads else 0
        return (h.n, getattr(h, "nloads", 0)) if loads else h.n

    def probe(self, loader, shape) -> bool:
        """Whether C++ can be emitted for the loader (else the op runs as an extern call)."""
        vars_ = loop_vars("p", len(shape))
        h = Probe(dict(zip(vars_, shape)))
        try:
            loader(h, vars_)
        except Exception:  # noqa: BLE001 - NeedsConstant, Unsupported, numpy-only formulas
            return False
        # integer division: eager raises on a zero divisor, so it runs as an extern call
        return not h.divides

    # ---- views -----------------------------------------------------------------------------
    def lower_view(self, op, args, margs, meta):
        src = args[0]
        if not isinstance(meta, Tensor) or isinstance(meta, tuple):
            return None
        shape = self.sv.shape(meta.shape)
        hint = self.sv.hint
        if src.lazy or (tuple(src.stride) == contiguous_strides(src.shape) and src.offset == 0):
            if op.qualname in _RESHAPES or op.name in _RESHAPES:
                stride, offset = contiguous_strides(shape), sympy.Integer(0)
                return self._view_of(src, shape, stride, offset)
        sstride = src.stride if not src.lazy else contiguous_strides(src.shape)
        soffset = src.offset if not src.lazy else 0
        m = _meta_like([hint(s) for s in src.shape], [hint(s) for s in sstride], hint(soffset),
                       src.dtype)
        try:
            out = op(m, *margs[1:])
        except Exception:  # noqa: BLE001
            return None
        known = {}
        for s in reversed(sstride):
            known.setdefault(hint(s), s)
        for s in shape:
            known.setdefault(hint(s), s)
        stride = tuple(known.get(s) if s in known else (sympy.Integer(s) if s <= 1
                       else self.sv.sym(s)) for s in out.stride())
        return self._view_of(src, shape, stride, sympy.Integer(out.storage_offset()))

    def _view_of(self, src, shape, stride, offset):
        if not src.lazy:
            return TBox(shape, src.dtype, buf=src.buf, stride=stride,
                        offset=sympy.expand(offset if src.lazy else offset))

        def loader(h, idx):
            flat = offset + sum((i * s for i, s in zip(idx, stride)), sympy.Integer(0))
            return src.load(h, decompose(flat, src.shape, h.var_ranges, self.sv))
        return TBox(shape, src.dtype, loader)

    # ---- extern calls ----------------------------------------------------------------------
    def _sync_grad_mode(self):
        """One grad-mode switch where the graph's mode differs from the wrapper's last one
        (the graph toggles it around each write; only extern calls and the caller see it)."""
        want, have = self.grad_mode
        if want is not None and want != have:
            from ember._dynamo.tracer import set_grad_enabled
            ext = ExternBuffer(self.new_name("ext"), set_grad_enabled, (want,), {}, [None])
            ext.outputs, ext.grad_toggle = [None], True
            self.buffers.append(ext)
            self.grad_mode[1] = want

    def extern(self, n, op, args, kwargs, meta):
        self._sync_grad_mode()
        args = _tree(args, lambda a: self.realize(a, [n.name]))
        kwargs = _tree(kwargs, lambda a: self.realize(a, [n.name]))
        flat, rebuild = _flatten(meta)
        results = []
        for t in flat:
            if isinstance(t, Tensor):
                if t.dtype not in _DTYPES:
                    raise Fallback(f"{_name(op)} returns {t.dtype}")
                results.append((self.sv.shape(t.shape), self.strides_of(t), t.dtype))
            else:
                results.append(None)
        ext = ExternBuffer(self.new_name("ext"), op, args, kwargs, results, origins=[n.name])
        ext.outputs = []
        for k, r in enumerate(results):
            if r is None:
                ext.outputs.append(None)
                continue
            from .ir import Buffer
            b = Buffer(f"{ext.name}_{k}", r[0], r[2], [n.name])
            b.extern, b.stride = ext, r[1]
            ext.outputs.append(b)
        self.buffers.append(ext)
        vals = [TBox.of(b, stride=b.stride) if b is not None else v
                for b, v in zip(ext.outputs, flat)]
        return rebuild(vals)


def _is_grad_toggle(n: Node) -> bool:
    from ember._dynamo.tracer import set_grad_enabled
    return n.target is set_grad_enabled and len(n.args) == 1 and not n.kwargs


def _is_writeback(n: Node) -> bool:
    """`copy_(placeholder, value)` with no later reader: functionalization's write-back."""
    dst = n.args[0] if n.args else None
    return (len(n.args) == 2 and not n.kwargs and isinstance(dst, Node) and
            dst.op == "placeholder" and not n.users)


def bcast_load(h, tb: TBox, idx):
    """tb's element at the output index idx (broadcast: leading dims dropped, size-1 dims 0)."""
    off = len(idx) - len(tb.shape)
    return tb.load(h, [sympy.Integer(0) if s == 1 else idx[off + j]
                       for j, s in enumerate(tb.shape)])


def _c_strides(shape):
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(st))


def _tensor_outs_ok(meta) -> bool:
    flat, _ = _flatten(meta)
    return all(not isinstance(t, Tensor) or t.dtype in _DTYPES for t in flat)


def _flatten(v):
    """(leaves, rebuild) of a result: a tensor, or a tuple / list of them."""
    if isinstance(v, (tuple, list)):
        kind = type(v)

        def rebuild(vals):
            vals = list(vals)
            if hasattr(kind, "_fields"):
                return kind(*vals)
            return kind(vals) if kind in (tuple, list) else tuple(vals)
        return list(v), rebuild
    return [v], lambda vals: vals[0]


def _map(a, fn):
    if isinstance(a, Node):
        return fn(a)
    if isinstance(a, tuple) and not hasattr(a, "_fields"):
        return tuple(_map(x, fn) for x in a)
    if isinstance(a, list):
        return [_map(x, fn) for x in a]
    if isinstance(a, dict):
        return {k: _map(v, fn) for k, v in a.items()}
    return a


def _leaves(v):
    if isinstance(v, TBox):
        yield v
    elif isinstance(v, (tuple, list)):
        for x in v:
            yield from _leaves(x)


def _tree(a, fn):
    """a with fn applied to every TBox in it."""
    if isinstance(a, TBox):
        return fn(a)
    if isinstance(a, tuple) and not hasattr(a, "_fields"):
        return tuple(_tree(x, fn) for x in a)
    if isinstance(a, list):
        return [_tree(x, fn) for x in a]
    if isinstance(a, dict):
        return {k: _tree(v, fn) for k, v in a.items()}
    return a


def _name(op) -> str:
    return getattr(op, "qualname", getattr(op, "__name__", str(op)))


_ = np
