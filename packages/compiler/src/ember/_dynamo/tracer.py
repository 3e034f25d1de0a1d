"""The state of one capture: symbolic values with their sources, the guards that every source
read installs, graph inputs lifted from sourced tensors, and library calls run on fake tensors
under make_fx-style recording.

A value on the interpreter's stack is a `V`: `val` is a FakeTensor (a tensor of the graph), a
container of `V`s (tuple/list/dict: built in the frame, or read from a source and unpacked), or
a plain Python object; `src` is the Python expression (over the guard environment: `A` the call's
positional arguments, `K` its keyword arguments, `O<n>` objects the trace holds, `G<n>` globals
dicts) that reads the value again at call time, or None for values computed in the frame.
"""
from __future__ import annotations

import builtins
import contextlib
import math
import operator
import types
from collections import OrderedDict

from ember import Tensor
from ember._dispatch import DispatchMode
from ember._state import state
from ember._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
)
from ember.fx.experimental.proxy_tensor import ProxyTorchDispatchMode
from ember.fx.graph import Graph

from .exc import GraphBreak

__all__ = ["V", "Tracer", "set_grad_enabled"]

_CONST_TYPES = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis))


_LIST_ITER = type(iter([]))


def _iter_rest(it) -> list:
    """The items a list iterator has left, without advancing it."""
    r = it.__reduce__()
    return list(r[1][0][r[2]:]) if len(r) > 2 else []


class V:
    """A symbolic value: `val` (see the module doc) and `src` (None: made in the frame)."""
    __slots__ = ("val", "src", "ctype")

    def __init__(self, val, src=None, ctype=None):
        self.val = val
        self.src = src
        self.ctype = ctype  # for containers: the type to rebuild (tuple subclass, namedtuple)

    def is_container(self):
        return self.ctype is not None

    def __repr__(self):
        return f"V({self.val!r}, src={self.src})"


def set_grad_enabled(mode: bool) -> None:
    """A graph node: grad mode switched where the captured code entered/left `no_grad`."""
    state.grad_enabled = mode


def is_ident(name) -> bool:
    return isinstance(name, str) and name.isidentifier() and not name.startswith("__")


def attr_src(base: str, name: str) -> str:
    return f"{base}.{name}" if is_ident(name) else f"getattr({base}, {name!r})"


def check_tensor(x, meta) -> bool:
    """The TENSOR_MATCH guard: class, dtype, device, sizes, strides and requires_grad."""
    return (type(x) is meta[0] and x.dtype is meta[1] and x.device == meta[2]
            and x._shape == meta[3] and x._stride == meta[4]
            and x._requires_grad == meta[5])


def _hooks_empty(m) -> bool:
    return not (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                or m._backward_pre_hooks)


# builtins and math/operator functions with no side effects: called directly on values
PURE = {builtins.len, builtins.isinstance, builtins.issubclass, builtins.abs, builtins.min,
        builtins.max, builtins.int, builtins.float, builtins.bool, builtins.str,
        builtins.round, builtins.divmod, builtins.pow, builtins.hasattr, builtins.getattr,
        builtins.type, builtins.callable, builtins.hash, builtins.id, builtins.repr,
        builtins.all, builtins.any, builtins.sum, builtins.slice, builtins.format,
        builtins.sorted}
PURE |= {v for v in vars(math).values() if callable(v)}
PURE |= {v for k, v in vars(operator).items() if callable(v) and not k.startswith("i")
         and k not in ("setitem", "delitem")}
# Tensor methods that change Python state outside the graph or read data: graph breaks
TENSOR_BREAK = {"item", "tolist", "numpy", "backward", "register_hook", "retain_grad",
                "requires_grad_", "__bool__", "__int__", "__float__", "__index__", "data_ptr"}


class Tracer:
    """One capture attempt: graph, modes, guards, inputs; `wrap` reads a sourced value."""

    def __init__(self, dyn=None):
        self.graph = Graph()
        self.dyn = dyn              # shapes.DynamicPolicy: which input dims are symbolic
        self.shape_env = None       # made at the first symbolic size
        self.strict: list = []      # (source, dim, symbol) of mark_dynamic dims
        self.fake = FakeTensorMode(allow_non_fake_inputs=True)
        self.proxy = ProxyTorchDispatchMode(self.graph)
        self.env: dict = {"___t": check_tensor, "___hooks_empty": _hooks_empty,
                          "OrderedDict": OrderedDict,
                          "___rest": _iter_rest,
                          "___grad": lambda: state.grad_enabled}
        self._env_ids: dict = {}
        self.guards: list = []        # (python expression, description)
        self._guard_set: set = set()
        self.inputs: list = []        # sources of the graph's placeholders, in order
        self.examples: list = []      # the real tensors at capture time
        self._memo: dict = {}         # src -> V
        self._real_src: dict = {}     # id(real tensor) -> (tensor, src, V)
        self._last_ph = None
        self.grad_enabled = state.grad_enabled
        self.add_guard(f"___grad() == {self.grad_enabled!r}", "grad mode")
        import ember
        self.default_device = None  # a `with ember.device(d)` block of the traced frame
        self.env["___defdev"] = ember.get_default_device
        self.add_guard(f"str(___defdev()) == {str(ember.get_default_device())!r}",
                       f"default device {ember.get_default_device()}")
        self.env["___autocast"] = lambda: state.autocast
        self.env["___det"] = ember.are_deterministic_algorithms_enabled
        self.add_guard(f"___autocast() == {dict(state.autocast)!r}",
                       f"autocast state {dict(state.autocast)}")
        det = ember.are_deterministic_algorithms_enabled()
        self.add_guard(f"___det() == {det!r}", f"deterministic algorithms {det}")
        self.env["___ddt"] = ember.get_default_dtype
        self.env["___ddt0"] = ember.get_default_dtype()
        self.add_guard("___ddt() is ___ddt0", f"default dtype {ember.get_default_dtype()}")
        self.attr_overlay: dict = {}   # (id(obj), name) -> (obj, value) stored in the frame
        self.side_effects: list = []   # (source, name, value): attribute stores to replay
        self.ops = 0
        self.mutations = 0   # writes to the frame's containers and cells (resume checks them)
        self.top = None      # (code, depth) of the frame a break can resume in

    def get_shape_env(self):
        if self.shape_env is None:
            from ember.fx.experimental.symbolic_shapes import ShapeEnv
            self.shape_env = ShapeEnv()
        return self.shape_env

    # ---- guard environment -----------------------------------------------------------------
    def obj(self, o, prefix="O") -> str:
        """A name for `o` in the guard environment (the trace holds a reference)."""
        hit = self._env_ids.get(id(o))
        if hit is not None:
            return hit
        name = f"{prefix}{len(self._env_ids)}"
        self._env_ids[id(o)] = name
        self.env[name] = o
        return name

    def add_guard(self, code: str, what: str) -> None:
        if code not in self._guard_set:
            self._guard_set.add(code)
            self.guards.append((code, what))

    def store_attr(self, obj: V, name: str, value) -> None:
        self.attr_overlay[(id(obj.val), name)] = (obj.val, value)
        self.side_effects.append((obj.src, name, value))
        self.mutations += 1

    # ---- reading sourced values ------------------------------------------------------------
    def wrap(self, val, src: str | None) -> V:
        """The V of a value read at `src`, installing the guards that make the trace valid."""
        if src is None:
            return self.to_v(val)
        hit = self._memo.get(src)
        if hit is not None:
            return hit
        v = self._wrap(val, src)
        self._memo[src] = v
        return v

    def _wrap(self, val, src):
        t = type(val)
        if isinstance(val, Tensor):
            return self._wrap_tensor(val, src)
        if t in _CONST_TYPES:
            if val is None or val is Ellipsis:
                self.add_guard(f"{src} is {val!r}", f"{src} is {val!r}")
            else:
                self.add_guard(f"type({src}) is {t.__name__} and {src} == {val!r}",
                               f"{src} == {val!r}")
            return V(val, src)
        if t is _LIST_ITER:
            from .interp import Iter
            rest = _iter_rest(val)
            self.add_guard(f"type({src}) is {self.obj(t)} and len(___rest({src})) == "
                           f"{len(rest)}", f"{src}: iterator with {len(rest)} items left")
            return V(Iter([self.wrap(e, f"___rest({src})[{i}]") for i, e in enumerate(rest)]),
                     src)
        if t in (tuple, list) or (isinstance(val, tuple) and hasattr(val, "_fields")) or \
                (isinstance(val, tuple) and t.__module__.startswith("ember")):
            self.add_guard(f"type({src}) is {self.obj(t)} and len({src}) == {len(val)}",
                           f"{src}: {t.__name__} of length {len(val)}")
            items = [self.wrap(e, f"{src}[{i}]") for i, e in enumerate(val)]
            return V(list(items) if t is list else tuple(items), src, t)
        if t in (dict, OrderedDict) and all(type(k) in (str, int) for k in val):
            keys = list(val)
            self.add_guard(f"type({src}) is {t.__name__} and list({src}.keys()) == {keys!r}",
                           f"{src}: dict with keys {keys}")
            return V({k: self.wrap(val[k], f"{src}[{k!r}]") for k in keys}, src, dict)
        from ember.nn import Module
        if t.__module__.startswith("ember._dynamo") or \
                isinstance(val, Module) or isinstance(val, (types.FunctionType, types.ModuleType,
                                                       types.BuiltinFunctionType, type)):
            self.add_guard(f"{src} is {self.obj(val)}", f"{src} is the object seen at capture "
                           f"({t.__name__} {getattr(val, '__qualname__', '')})".rstrip())
            return V(val, src)
        if t.__module__.startswith("ember") and t.__name__ in ("dtype", "device"):
            self.add_guard(f"{src} == {self.obj(val)}", f"{src} == {val}")
            return V(val, src)
        self.add_guard(f"type({src}) is {self.obj(t)}", f"type({src}) is {t.__qualname__}")
        return V(val, src)

    def _wrap_tensor(self, t: Tensor, src: str) -> V:
        hit = self._real_src.get(id(t))
        if hit is not None and hit[0] is t:  # the same tensor under another source: aliasing
            self.add_guard(f"{src} is {hit[1]}", f"{src} is {hit[1]}")
            return hit[2]
        dims = self.dyn.dims(t, src) if self.dyn is not None else set()
        meta = (type(t), t.dtype, t.device, tuple(t._shape), tuple(t._stride),
                bool(t._requires_grad))
        name = self.obj(meta, "M")
        # inline (one Python call fewer per tensor): what check_tensor checks
        self.env[name + "c"], self.env[name + "d"], self.env[name + "v"] = meta[:3]
        if dims:
            from ember._size import contiguous_strides
            self.env["___cs"] = contiguous_strides
            sizes = " and ".join([f"len(___x._shape) == {t.ndim}"] + [
                f"___x._shape[{d}] == {n}" for d, n in enumerate(meta[3]) if d not in dims])
            geometry = f"{sizes} and ___x._stride == ___cs(___x._shape)"
            shown = [f"s{d}" if d in dims else n for d, n in enumerate(meta[3])]
            what = f"size={shown} (dims {sorted(dims)} symbolic) contiguous"
        else:
            geometry = f"___x._shape == {meta[3]!r} and ___x._stride == {meta[4]!r}"
            what = f"size={list(meta[3])} stride={list(meta[4])}"
        self.add_guard(f"(___x := {src}).__class__ is {name}c and ___x.dtype is {name}d and "
                       f"{geometry} and "
                       f"___x._requires_grad is {meta[5]!r} and ___x.device == {name}v",
                       f"{src}: {meta[0].__name__} {t.dtype} {t.device} {what} "
                       f"requires_grad={meta[5]}")
        v = V(self.lift(t, src, dims), src)
        self._real_src[id(t)] = (t, src, v)
        return v

    def _placeholder(self, base: str):
        g = self.graph
        used = {n.name for n in g.nodes if n.op == "placeholder"}
        name, k = base, 1
        while name in used or name.lower() in used:
            name, k = f"{base}_{k}", k + 1
        base = name
        if self._last_ph is None:
            first = next(iter(g.nodes), None)
            ctx = g.inserting_before(first) if first is not None else g.inserting_after(None)
        else:
            ctx = g.inserting_after(self._last_ph)
        with ctx:
            ph = g.placeholder(base)
        self._last_ph = ph
        return ph

    def lift(self, t: Tensor, src: str, dims=()) -> FakeTensor:
        """A graph input for the real tensor t (read at call time from src): its fake twin;
        with symbolic dims, each new size symbol is a graph input (`s0`) before it."""
        base = "".join(c if c.isalnum() else "_" for c in src).strip("_")[:40] or "arg"
        if dims:
            from .shapes import size_src, symbolic_fake
            f, syms = symbolic_fake(self, t, src, dims)
            for s, d, new in syms:
                here = size_src(src, d)
                if not new:  # duck shaping: an equal size already has this symbol
                    first = size_src(*self.shape_env.var_to_sources[s][0])
                    self.add_guard(f"{here} == {first}", f"{src}.size()[{d}] == "
                                   f"{first.replace('._shape[', '.size()[')}  (duck-shaped {s})")
                    continue
                if d in getattr(t, "_dynamo_dynamic_indices", ()):
                    self.strict.append((src, d, s))   # mark_dynamic: must stay symbolic
                ph = self._placeholder(str(s))
                ph.meta["val"] = f.shape[d]
                self.proxy.sym_nodes[s] = ph
                self.inputs.append(here)
                self.examples.append(t._shape[d])
                self.add_guard(f"{here} >= 2", f"{src}.size()[{d}] >= 2  (symbolic {s})")
                lo, hi = getattr(t, "_dynamo_dynamic_ranges", {}).get(d, (None, None))
                if lo is not None:
                    self.add_guard(f"{here} >= {lo}", f"{src}.size()[{d}] >= {lo}  (min)")
                if hi is not None:
                    self.add_guard(f"{here} <= {hi}", f"{src}.size()[{d}] <= {hi}  (max)")
                from . import _logs
                _logs.emit("dynamic", f"create_symbol {s} = {t._shape[d]} for "
                           f"{src}.size()[{d}]")
        else:
            f = self.fake.from_tensor(t)
        ph = self._placeholder(base)
        ph.meta["val"] = f
        self.proxy.track(t, ph)
        self.proxy.track(f, ph)
        self.inputs.append(src)
        self.examples.append(t)
        return f

    # ---- values made in the frame ----------------------------------------------------------
    def to_v(self, val) -> V:
        """A V for a value computed in the frame (containers become containers of V)."""
        if isinstance(val, V):
            return val
        t = type(val)
        if t is list:
            return V([self.to_v(e) for e in val], None, list)
        if isinstance(val, tuple) and not isinstance(val, Tensor):
            return V(tuple(self.to_v(e) for e in val), None, t)
        if t is dict:
            return V({k: self.to_v(e) for k, e in val.items()}, None, dict)
        if t is set and not any(isinstance(e, Tensor) for e in val):
            return V(set(val), None, set)
        if isinstance(val, Tensor) and not isinstance(val, FakeTensor):
            raise GraphBreak("a real tensor reached the trace without a source "
                             f"(shape {tuple(val.shape)})")
        return V(val)

    def unwrap(self, v):
        """The plain value of a V (containers rebuilt with their type)."""
        if not isinstance(v, V):
            return v
        ct = v.ctype
        if ct is None:
            return v.val
        if ct is dict:
            return {k: self.unwrap(e) for k, e in v.val.items()}
        items = [self.unwrap(e) for e in v.val]
        if ct is list:
            return items
        if ct is tuple:
            return tuple(items)
        if hasattr(ct, "_fields"):
            return ct(*items)
        return ct(items)

    # ---- running library code on fake tensors ----------------------------------------------
    def call_library(self, fn, args, kwargs, what: str, trusted: bool = False) -> V:
        a = [self.unwrap(x) for x in args]
        kw = {k: self.unwrap(x) for k, x in kwargs.items()}
        if not trusted:
            for x in (*a, *kw.values()):
                if not _plain(x):
                    raise GraphBreak(f"{what} called with a {type(x).__name__} (library code "
                                     "could change it at capture time)")
        saved = state.grad_enabled
        state.grad_enabled = self.grad_enabled
        try:
            with _Modes(self), _device_block(self.default_device):
                r = fn(*a, **kw)
        except (DataDependentOutputException, DynamicOutputShapeException) as e:
            raise GraphBreak(f"data-dependent operation in {what} ({e})") from None
        except GraphBreak:
            raise
        except Exception as e:  # eager raises it again, with the user's traceback
            raise GraphBreak(f"{what} raised {type(e).__name__}: {e}") from None
        finally:
            state.grad_enabled = saved
        self.ops += 1
        return self.to_v(r)


_PLAIN = (int, float, bool, complex, str, bytes, type(None), type(Ellipsis), slice, range)
_EMBER_VALUES = ("dtype", "device", "Size", "memory_format", "layout")


def _plain(x) -> bool:
    """A value library code can only read: numbers, strings, tensors of the trace, ember's
    dtype/device/Size, and tuples/lists/dicts of those."""
    if isinstance(x, _PLAIN) or isinstance(x, FakeTensor):
        return True
    if getattr(type(x), "_sym_kind", None) is not None:  # SymInt / SymFloat / SymBool
        return True
    t = type(x)
    if t in (tuple, list) or (isinstance(x, tuple) and t.__module__.startswith("ember")):
        return all(_plain(e) for e in x)
    if t is dict:
        return all(_plain(e) for e in x.values())
    return t.__module__.startswith("ember") and t.__name__ in _EMBER_VALUES


def _device_block(dev):
    """The traced frame's `with ember.device(dev)` block around one library call."""
    return contextlib.nullcontext() if dev is None else dev


class _Modes:
    """`with fake, proxy:` (proxy innermost, so it records before fake runs the meta)."""

    def __init__(self, tr: Tracer):
        self.tr = tr

    def __enter__(self):
        self.tr.fake.__enter__()
        self.tr.proxy.__enter__()

    def __exit__(self, *exc):
        self.tr.proxy.__exit__(*exc)
        self.tr.fake.__exit__(*exc)


_ = DispatchMode
