"""Calls met by the interpreter: user functions and methods are inlined, module calls inline
`forward` (ember.nn's own modules run directly on fake tensors, their parameters lifted as graph
inputs), `no_grad`-style contexts become grad-mode nodes, list/dict methods act on the frame's
containers, ember's functions and Tensor methods run on fake tensors and are recorded; anything
else is a graph break.
"""
from __future__ import annotations

import builtins
import itertools
import types

from ember._subclasses.fake_tensor import FakeTensor

from .exc import GraphBreak
from .tracer import PURE, TENSOR_BREAK, V, _plain, attr_src, set_grad_enabled

__all__ = ["call_value", "BoundMethod", "ContainerMethod", "GradCtx"]

# ember functions that change Python-side global state: run in Python, never at capture time
_STATEFUL = {"manual_seed", "seed", "set_rng_state", "set_default_dtype", "set_default_device",
             "set_printoptions", "use_deterministic_algorithms", "set_num_threads",
             "set_float32_matmul_precision", "set_default_tensor_type", "set_flush_denormal",
             "set_num_interop_threads", "set_anomaly_enabled", "fork_rng"}
_MUTATING = {"append", "extend", "insert", "pop", "remove", "clear", "reverse", "sort",
             "update", "setdefault", "popitem", "__setitem__", "__delitem__"}
_CONTAINER_READ = {"index", "count", "copy", "keys", "values", "items", "get", "__len__",
                   "__getitem__", "__contains__"}


class BoundMethod:
    """A user function bound to a V (its source kept for the attribute reads inside)."""

    def __init__(self, fn, self_v):
        self.fn, self.self_v = fn, self_v


class ContainerMethod:
    """`lst.append` etc. on a container V of the frame."""

    def __init__(self, obj, name):
        self.obj, self.name = obj, name


class GradCtx:
    """`ember.no_grad()` / `enable_grad()` / `set_grad_enabled(b)` inside the trace."""

    def __init__(self, mode: bool, prev=None):
        self.mode = mode
        self.prev = prev  # set_grad_enabled(b) switched already: the mode to restore

    def enter(self, tr):
        prev = tr.grad_enabled if self.prev is None else self.prev
        _set_grad(tr, self.mode)
        return _GradExit(prev), V(None)


class _GradExit:
    def __init__(self, prev):
        self.prev = prev


class DeviceCtx:
    """`with ember.device(d):` inside the trace: library calls made in the block run under that
    default device, so the factories they record name it; nothing global changes at capture."""

    def __init__(self, dev):
        self.dev = dev

    def enter(self, tr):
        prev = tr.default_device
        tr.default_device = self.dev
        return DeviceExit(prev), V(self.dev)


class DeviceExit:
    """The block's `__exit__`: the trace's default device goes back to the one before. A graph
    break inside the block is not resumable (the frame then runs as it is)."""

    def __init__(self, prev):
        self.prev = prev


def _set_grad(tr, mode):
    if tr.grad_enabled != mode:
        tr.graph.call_function(set_grad_enabled, (mode,))
        tr.grad_enabled = mode


def call_value(frame, fnv: V, args: list, kwargs: dict) -> V:
    from .interp import LocalFunction, inline_call
    tr = frame.tr
    fn = fnv.val
    if isinstance(fn, BoundMethod):
        return inline_call(tr, fn.fn, [fn.self_v] + args, kwargs, frame.depth + 1)
    if isinstance(fn, LocalFunction):
        return inline_call(tr, fn, args, kwargs, frame.depth + 1)
    if isinstance(fn, ContainerMethod):
        return _container_call(frame, fn, args, kwargs)
    from .resume import GradExit
    if isinstance(fn, (_GradExit, GradExit)):
        _set_grad(tr, fn.prev)
        return V(None)
    if isinstance(fn, DeviceExit):
        tr.default_device = fn.prev
        return V(None)
    from ember.nn import Module
    if isinstance(fn, Module):
        return call_module(frame, fnv, args, kwargs)
    from .eval_frame import _CompiledFn
    if isinstance(fn, _CompiledFn):  # a compiled function called from compiled code: inlined
        return call_value(frame, V(fn._orig, fnv.src and f"{fnv.src}._orig"), args, kwargs)
    if getattr(fn, "_ember_disable", False):
        raise GraphBreak(f"{getattr(fn, '__qualname__', fn)} is ember.compiler.disable'd")
    from .interp import _is_user_fn
    if _is_user_fn(fn):
        from .optim_support import substitute
        sub = substitute(fn)
        if sub is not None:
            return sub(frame, args, kwargs)
        return inline_call(tr, fn, args, kwargs, frame.depth + 1)
    if getattr(fn, "__module__", "") == "ember.utils.checkpoint" and \
            getattr(fn, "__name__", "") == "checkpoint" and args:
        # activation checkpointing: the function's ops are captured inline, tagged so that
        # the partitioner recomputes them in the backward instead of saving them
        kw = {k: v for k, v in kwargs.items() if k not in (
            "use_reentrant", "preserve_rng_state", "context_fn", "determinism_check", "debug")}
        before = set(tr.graph.nodes)
        r = call_value(frame, args[0], list(args[1:]), kw)
        for n in tr.graph.nodes:
            if n not in before and n.op == "call_function":
                n.meta["recompute"] = True
        return r
    special = _SPECIAL.get(fn) if _hashable(fn) else None
    if special is not None:
        return special(frame, args, kwargs)
    if isinstance(fn, type) and issubclass(fn, _grad_classes()):
        return _grad_ctx(fn, tr, args)
    if isinstance(getattr(fn, "__self__", None), FakeTensor) and \
            getattr(fn, "__name__", "") in TENSOR_BREAK:
        raise GraphBreak(f"Tensor.{fn.__name__}() (data-dependent or a side effect)")
    if getattr(fn, "__name__", "") in _STATEFUL and not isinstance(
            getattr(fn, "__self__", None), FakeTensor):
        raise GraphBreak(f"{fn.__name__}() changes global state (run in Python)")
    if _is_library(fn, tr):
        if _hashable(fn) and fn in PURE:
            from .interp import Iter
            # an iterator (a generator expression's) reaches a builtin as the list it yields:
            # sum/any/all/min/max/sorted consume it whole (other library code never sees one)
            args = [V(frame.items(a), None, list) if isinstance(a.val, Iter) else a
                    for a in args]
        # (functions marked `_ember_allow_in_graph` by their package, as ember.distributed's
        # functional collectives, take any argument: they only read it at capture time)
        if getattr(fn, "_ember_allow_in_graph", False) is True:  # (flex_attention's)
            args = [_library_arg(tr, a) for a in args]
            kwargs = {k: _library_arg(tr, a) for k, a in kwargs.items()}
        return tr.call_library(fn, args, kwargs, getattr(fn, "__qualname__", repr(fn)),
                               trusted=_hashable(fn) and fn in PURE
                               or getattr(fn, "_ember_allow_in_graph", False) is True)
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    raise GraphBreak(f"call to {name} is not supported (not inlinable, not an ember op)")


def _library_arg(tr, v: V) -> V:
    """An argument of allow_in_graph library code: a function made in the traced frame (a
    LocalFunction) as a Python function, its cells holding their values now; a BlockMask read
    from a source with its block lists as graph inputs (each call's mask is read, not the
    first one's) and its mask_mod and sizes guarded; anything else as it is."""
    from .interp import Cell, LocalFunction
    lf = v.val
    if type(lf).__name__ == "BlockMask" and v.src is not None and \
            type(lf).__module__ == "ember.nn.attention.flex_attention":
        return _block_mask_arg(tr, v)
    if not isinstance(lf, LocalFunction):
        return v
    cells = tuple(types.CellType(tr.unwrap(c.v)) if isinstance(c, Cell) else c[0]
                  for c in lf.cells)
    fn = types.FunctionType(lf.code, lf.globals, lf.__name__,
                            tuple(tr.unwrap(d) for d in lf.defaults) or None, cells or None)
    return V(fn)


def _block_mask_arg(tr, v: V) -> V:
    bm = v.val
    names = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
             "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices")
    lists = [None if getattr(bm, n) is None else tr.unwrap(tr.wrap(getattr(bm, n),
                                                                   f"{v.src}.{n}"))
             for n in names]
    for n in ("seq_lengths", "BLOCK_SIZE", "mask_mod"):
        tr.wrap(getattr(bm, n), f"{v.src}.{n}")
    return V(type(bm)(bm.seq_lengths, *lists, bm.BLOCK_SIZE, bm.mask_mod))


def _hashable(fn) -> bool:
    try:
        hash(fn)
        return True
    except TypeError:
        return False


def _grad_classes():
    import ember
    return (ember.no_grad, ember.enable_grad, ember.set_grad_enabled)


def _grad_ctx(cls, tr, args):
    import ember
    if issubclass(cls, ember.no_grad):
        return V(GradCtx(False))
    if issubclass(cls, ember.enable_grad):
        return V(GradCtx(True))
    mode = bool(tr.unwrap(args[0]) if args else True)
    ctx = GradCtx(mode, prev=tr.grad_enabled)
    _set_grad(tr, mode)  # set_grad_enabled(b) acts when called, as a function too
    return V(ctx)


def _is_library(fn, tr) -> bool:
    from .eval_frame import _ALLOW_IN_GRAPH
    if fn in _ALLOW_IN_GRAPH if _hashable(fn) else False:
        return True
    if _hashable(fn) and fn in PURE:
        return True
    if isinstance(fn, (types.MethodType, types.BuiltinMethodType)):
        owner = getattr(fn, "__self__", None)
        if isinstance(owner, FakeTensor):
            return True
        if isinstance(owner, types.ModuleType):
            return owner.__name__.startswith("ember") or owner.__name__ in ("math", "operator")
        if owner is not None and type(owner).__module__.startswith("ember") and \
                type(owner).__name__ in ("dtype", "device", "Size"):
            return True
        return False
    mod = getattr(fn, "__module__", None) or ""
    if isinstance(fn, type):
        return mod.startswith("ember") and not _is_module_class(fn)
    return mod.startswith("ember") or mod in ("math", "operator", "_operator")


def _is_module_class(cls) -> bool:
    from ember.nn import Module
    return issubclass(cls, Module)


# ---- containers --------------------------------------------------------------------------------
def _container_call(frame, m: ContainerMethod, args, kwargs) -> V:
    obj, name = m.obj, m.name
    tr = frame.tr
    if obj.ctype is set:
        return _set_call(frame, obj, name, args, kwargs)
    if name in _MUTATING:
        if obj.src is not None:
            raise GraphBreak(f"{obj.ctype.__name__}.{name} on a container from outside the "
                             "frame (side effect)")
        if name in ("sort",):
            raise GraphBreak("list.sort is not modelled")
        tr.mutations += 1
        if name == "extend":
            obj.val.extend(frame.items(args[0]))
            return V(None)
        if name == "update":
            if not args or args[0].ctype is not dict:
                raise GraphBreak("dict.update from a non-dict")
            obj.val.update(args[0].val)
            obj.val.update(kwargs)
            return V(None)
        if name in ("insert", "pop") and args:
            args = [V(tr.unwrap(args[0]))] + list(args[1:])
            args[0] = args[0].val
        if name == "remove":
            raise GraphBreak("list.remove is not modelled")
        r = getattr(obj.val, name)(*args, **kwargs)
        return r if isinstance(r, V) else tr.to_v(r)
    if name in ("keys", "values", "items") and obj.ctype is dict:
        d = obj.val
        if name == "keys":
            return V([V(k) for k in d], None, list)
        if name == "values":
            return V(list(d.values()), None, list)
        return V([V((V(k), x), None, tuple) for k, x in d.items()], None, list)
    if name == "get" and obj.ctype is dict:
        k = tr.unwrap(args[0])
        return obj.val.get(k, args[1] if len(args) > 1 else V(None))
    if name == "copy":
        return V(type(obj.val)(obj.val), None, obj.ctype if obj.ctype in (list, dict) else list)
    if name in ("index", "count"):
        plain = [tr.unwrap(x) for x in obj.val]
        return V(getattr(plain, name)(*[tr.unwrap(a) for a in args]))
    # tuple subclasses (Size, namedtuples): their own methods on the plain value
    return tr.call_library(getattr(tr.unwrap(obj), name), args, kwargs, f".{name}")


_SET_MUTATING = {"add", "discard", "remove", "pop", "clear", "update", "difference_update",
                 "intersection_update", "symmetric_difference_update"}


def _set_call(frame, obj: V, name: str, args, kwargs) -> V:
    """A method of a set of plain values (the frame holds it as a real set)."""
    if kwargs:
        raise GraphBreak(f"set.{name} with keyword arguments")
    if name in _SET_MUTATING:
        if obj.src is not None:
            raise GraphBreak(f"set.{name} on a set from outside the frame (side effect)")
        frame.tr.mutations += 1
    if name in ("add", "discard", "remove", "__contains__"):
        plain = [frame.set_key(a) for a in args]
    else:  # the others take iterables
        plain = [{frame.set_key(x) for x in frame.items(a)} for a in args]
    try:
        r = getattr(obj.val, name)(*plain)
    except (KeyError, AttributeError, TypeError) as e:
        raise GraphBreak(f"set.{name}: {type(e).__name__}: {e}") from None
    return V(r, None, set) if isinstance(r, set) else frame.tr.to_v(r)


# ---- modules -----------------------------------------------------------------------------------
def call_module(frame, modv: V, args, kwargs) -> V:
    from .interp import inline_call
    tr = frame.tr
    mod = modv.val
    from ember.nn.modules import module as M
    if any((M._global_forward_hooks, M._global_forward_pre_hooks,
            M._global_backward_hooks, M._global_backward_pre_hooks)):
        raise GraphBreak("global module hooks are registered")
    if mod._forward_hooks or mod._forward_pre_hooks or mod._backward_hooks or \
            mod._backward_pre_hooks:
        raise GraphBreak(f"{type(mod).__name__} has hooks")
    if modv.src is None:
        raise GraphBreak(f"calling {type(mod).__name__} with no source to guard")
    tr.add_guard(f"___hooks_empty({modv.src})", f"{modv.src} has no hooks")
    if _library_leaf(mod):
        return _call_library_module(tr, modv, args, kwargs)
    fwd = getattr(type(mod), "forward", None)
    if not isinstance(fwd, types.FunctionType):
        raise GraphBreak(f"{type(mod).__name__}.forward is not a Python function")
    return inline_call(tr, fwd, [modv] + args, kwargs, frame.depth + 1)


def _library_leaf(mod) -> bool:
    """ember.nn modules whose whole subtree is ember.nn code (run directly on fakes)."""
    return all(type(m).__module__.startswith("ember.") and not m._forward_hooks
               and not m._forward_pre_hooks for m in mod.modules())


def _call_library_module(tr, modv, args, kwargs) -> V:
    mod, src = modv.val, modv.src
    for name, sub in mod.named_modules():
        ssrc = _path_src(src, name)
        if name:
            tr.add_guard(f"{ssrc} is {tr.obj(sub)}", f"{ssrc} is the module seen at capture")
        tr.add_guard(f"{ssrc}.training == {sub.training!r}", f"{ssrc}.training == {sub.training}")
    for name, t in list(mod.named_parameters()) + list(mod.named_buffers()):
        if t is None:
            continue
        tr.wrap(t, _path_src(src, name))
    for x in (*args, *kwargs.values()):
        if not _plain(tr.unwrap(x)):
            raise GraphBreak(f"{type(mod).__name__} called with a {type(tr.unwrap(x)).__name__}")
    return tr.call_library(type(mod).forward, [V(mod)] + args, kwargs,
                           f"{type(mod).__name__}.forward", trusted=True)


def _path_src(src, dotted):
    for part in dotted.split(".") if dotted else ():
        src = attr_src(src, part)
    return src


# ---- builtins with their own meaning in the frame ----------------------------------------------
def _b_len(frame, args, kwargs):
    v = args[0]
    if v.ctype is not None:
        return V(len(v.val))
    return frame.tr.call_library(len, args, kwargs, "len")


def _b_range(frame, args, kwargs):
    return V(range(*[frame.tr.unwrap(a) for a in args]))


def _b_enumerate(frame, args, kwargs):
    start = frame.tr.unwrap(args[1]) if len(args) > 1 else frame.tr.unwrap(
        kwargs.get("start", V(0)))
    return V([V((V(i + start), x), None, tuple) for i, x in enumerate(frame.items(args[0]))],
             None, list)


def _b_zip(frame, args, kwargs):
    seqs = [frame.items(a) for a in args]
    return V([V(tuple(t), None, tuple) for t in zip(*seqs)], None, list)


def _b_reversed(frame, args, kwargs):
    return V(list(reversed(frame.items(args[0]))), None, list)


def _b_list(frame, args, kwargs):
    return V(list(frame.items(args[0])) if args else [], None, list)


def _b_tuple(frame, args, kwargs):
    return V(tuple(frame.items(args[0])) if args else (), None, tuple)


def _b_dict(frame, args, kwargs):
    d = {}
    if args:
        a = args[0]
        if a.ctype is dict:
            d.update(a.val)
        else:
            for pair in frame.items(a):
                k, v = frame.items(pair)
                d[frame.key(k)] = v
    d.update(kwargs)
    return V(d, None, dict)


def _b_isinstance(frame, args, kwargs):
    v, cls = args
    c = frame.tr.unwrap(cls)
    if v.ctype is not None:
        return V(isinstance(frame.tr.unwrap(v), c))
    return V(isinstance(v.val, c))


def _b_print(frame, args, kwargs):
    raise GraphBreak("print() (a side effect outside the graph)")


def _b_super(frame, args, kwargs):
    raise GraphBreak("super() is not modelled")


def _b_iter(frame, args, kwargs):
    from .interp import Iter
    return V(Iter(frame.items(args[0])))


def _b_next(frame, args, kwargs):
    it = args[0].val
    from .interp import Iter
    if not isinstance(it, Iter) or it.pos >= len(it.items):
        raise GraphBreak("next() on something the frame does not model")
    it.pos += 1
    return it.items[it.pos - 1]


def _b_getattr(frame, args, kwargs):
    obj, name = args[0], frame.tr.unwrap(args[1])
    try:
        return frame.load_attr(obj, name)
    except GraphBreak:
        if len(args) > 2:
            return args[2]
        raise


def _b_hasattr(frame, args, kwargs):
    return V(hasattr(frame.tr.unwrap(args[0]), frame.tr.unwrap(args[1])))


def _b_set(frame, args, kwargs):
    return V({frame.set_key(x) for x in frame.items(args[0])} if args else set(), None, set)


def _b_chain(frame, args, kwargs):
    from .interp import Iter
    return V(Iter([x for a in args for x in frame.items(a)]))


_SPECIAL = {itertools.chain: _b_chain, builtins.len: _b_len, builtins.range: _b_range,
            builtins.enumerate: _b_enumerate,
            builtins.zip: _b_zip, builtins.reversed: _b_reversed, builtins.list: _b_list,
            builtins.tuple: _b_tuple, builtins.dict: _b_dict, builtins.set: _b_set,
            builtins.isinstance: _b_isinstance, builtins.print: _b_print,
            builtins.super: _b_super, builtins.iter: _b_iter, builtins.next: _b_next,
            builtins.getattr: _b_getattr, builtins.hasattr: _b_hasattr}
