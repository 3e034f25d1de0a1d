"""The Python side of the native hit path (ember._C, csrc/fastpath.cpp): what C++ asks on a miss.

C++ replays a plain pointwise CPU call (no out=, no mode or autocast, exact Tensors of one float
dtype, nothing recording, small inputs) from a plan keyed by (op, dtype, each scalar argument's
type and value); everything else goes to `_dispatch.call`, the readable reference. Python says
once per op what C++ needs (`describe`) and builds each plan on a miss (`plan`): the numpy handler
the op's formula calls when it is one handler call on the arguments, else None (C++ then calls
the formula itself). View ops (any device), in-place ops and CPU factories have rules of their
own in C++ (`view_kind` names them: csrc/viewpath.cpp, mutpath.cpp), the Python rules being the
reference. `EMBER_NATIVE=0` in the environment, or `set_enabled(False)`, turns it off.
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["entry_call", "pointwise_entry", "set_enabled", "enabled", "stats",
           "register_autograd", "engine_init", "set_native_grad", "grad_stats", "register_device",
           "device_stats", "clear_device_plans", "view_stats", "mut_stats", "view_kind",
           "set_native_views"]

_C = None


def describe(op):
    """(formula, check, is-tensor flags, promotes to bool, kernel slots) of an op C++ may run,
    else None. A call whose first tensor is on another device runs that device's slot, as
    dispatch's `call` does when nothing records. An op that is not pointwise but has a cpu
    kernel on numpy arrays (or a decomposition: no CPU hit then) is described as (None, its
    dtype-category check or None, is-tensor flags, False, kernel slots): C++ calls the kernel
    and wraps its result as `execute` does."""
    if op.inplace_of is not None or op.view is not None or op.mutated_idx or op.list_idx:
        return None
    is_tensor = tuple(i in op.tensor_idx for i in range(len(op.schema.args)))
    if op.pointwise is not None:
        return op.pointwise, op.check, is_tensor, op.promote == "bool", op.kernels
    # (an op with no cpu kernel but a decomposition, a composite such as linear or layer_norm:
    # C++ runs its device slot or hands autograd's record the call; on the CPU, Python)
    if "cpu" not in op.kernels and (op.decomp is None or view_kind(op)):
        return None  # (reshape, flatten, contiguous: viewpath.cpp's rules)
    if "tensor_kernel" in op.tags or not op.tensor_idx:
        return None
    check = None
    if op.supports != "bifc":  # as dispatch's `call`: float-only kernels (nn ops)
        from ._dispatch import _check_supports
        def check(args, op=op):
            _check_supports(op, args)
    return None, check, is_tensor, False, op.kernels


# The view ops C++ makes itself (csrc/viewpath.cpp; the numbers are its `Kind`s): metadata
# only, on any device, when nothing records them; their rules here in Python stay the reference.
VIEW_KINDS = {"transpose.int": 1, "t": 2, "permute": 3, "unsqueeze": 4, "squeeze.dims": 5,
              "view": 6, "expand": 7, "select.int": 8, "slice.Tensor": 9, "narrow": 10,
              "detach": 11, "alias": 12, "reshape": 13, "flatten": 14, "contiguous": 15}


# ... and the in-place ops and factories it hands to csrc/mutpath.cpp (CPU; a factory given
# another device goes on to that device's plans, csrc/devplan.cpp)
_INPLACE_POINTWISE, _FILLS, _FACTORY = 50, {"zero_": 51, "fill_": 52, "copy_": 53}, 60
_FACTORIES = ("zeros", "ones", "empty", "full", "arange")


def view_kind(op) -> int:
    """The number of op's native rule (csrc/viewpath.cpp, mutpath.cpp), 0 for none. Only
    core's own entries (a library op of the same name is not one of them)."""
    from ._ops import OPS
    if OPS.get(op.qualname) is not op:
        return 0
    if op.inplace_of is not None:  # x.add_(y): the functional op's hit, written into x
        return _INPLACE_POINTWISE if op.inplace_of.pointwise is not None else 0
    if op.qualname in _FILLS:
        return _FILLS[op.qualname]
    if op.name in _FACTORIES and "factory" in op.tags and op.device_idx is not None:
        return _FACTORY + op.device_idx  # (layout just before device, pin_memory after)
    return VIEW_KINDS.get(op.qualname, 0)


class _Param:
    """A tensor argument while a formula is traced: anything but passing it along fails."""

    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i


class _Result:
    __slots__ = ()


class _Recorder:
    """An ops handler that records the calls a formula makes to the numpy handler."""

    def __init__(self, np_ops):
        self._np = np_ops
        self.calls = []

    def __getattr__(self, name):
        fn = getattr(self._np, name)
        if not callable(fn):
            raise AttributeError(name)  # a constant of the handler: not a one-call plan

        def record(*args, **kwargs):
            r = _Result()
            self.calls.append((fn, args, kwargs, r))
            return r
        return record


_CONST_TYPES = (int, float, bool, type(None))


def plan(op, args, arrays):
    """The plan of a call C++ has not seen: (handler, spec, consts) when op's formula is one
    handler call on the arguments (spec: argument positions, or -1 - i for consts[i]), else
    None. Checked once against the formula on this call's arrays before C++ keeps it."""
    from ._dispatch import NP
    try:
        rec = _Recorder(NP)
        params = [_Param(i) if isinstance(a, np.ndarray) else a for i, a in enumerate(arrays)]
        res = op.pointwise(rec, *params)
        if len(rec.calls) != 1:
            return None
        fn, cargs, ckw, ret = rec.calls[0]
        if res is not ret or ckw:
            return None
        spec, consts = [], []
        for c in cargs:
            if c.__class__ is _Param:
                spec.append(c.i)
            elif c.__class__ in _CONST_TYPES:
                spec.append(-1 - len(consts))
                consts.append(c)
            else:
                return None
        want = op.pointwise(NP, *arrays)
        got = fn(*[arrays[s] if s >= 0 else consts[-1 - s] for s in spec])
        if not _same(want, got):
            return None
        return fn, tuple(spec), tuple(consts)
    except Exception:  # noqa: BLE001 - any surprise means "no plan": C++ runs the formula
        return None


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def _load():
    """ember._C with its hit path initialized, or None (not built, or EMBER_NATIVE=0)."""
    if os.environ.get("EMBER_NATIVE", "1") == "0":
        return None
    try:
        from . import _C as C
    except ImportError:
        return None
    if not hasattr(C, "fast_call"):  # an older build of the module
        return None
    from . import _dispatch, _tensor
    from . import _dtype as D
    base = np.zeros((2, 3), np.float32)
    C.fastpath_init(dict(
        c2x3=base, view=base[:, ::2], Tensor=_tensor.Tensor, ndarray=np.ndarray,
        cpu=_dispatch._CPU, special=_dispatch.special, float32=D.float32, float64=D.float64,
        float8_e4m3fn=D.float8_e4m3fn, float8_e5m2=D.float8_e5m2,
        bool=D.bool, dispatch_globals=vars(_dispatch), strides=_tensor._STRIDES,
        c_strides=_tensor.c_strides, state=_dispatch.state,
        call=_dispatch.call, describe=describe, plan=plan, finish=_dispatch._fast_finish,
        wrap=_dispatch._wrap, by_np=D._BY_NP,
        big=min(_dispatch.JIT_MIN, _dispatch.CHUNK_MIN)))
    if hasattr(C, "viewpath_init"):
        C.viewpath_init(dict(Tensor=_tensor.Tensor, Storage=_tensor.Storage, view_kind=view_kind,
                             state=_dispatch.state, dispatch_globals=vars(_dispatch)))
    if hasattr(C, "mutpath_init"):
        C.mutpath_init(dict(Tensor=_tensor.Tensor, Storage=_tensor.Storage, ndarray=np.ndarray,
                            cpu=_dispatch._CPU, state=_dispatch.state,
                            dispatch_globals=vars(_dispatch), copyto=np.copyto,
                            wrap=_dispatch._wrap, float8_e4m3fn=D.float8_e4m3fn,
                            float8_e5m2=D.float8_e5m2))
    return C


def entry_call(py_call):
    """What generated op functions call: ember._C's `fast_call` (which falls back to py_call)
    when the native module is there and enabled, else py_call itself."""
    global _C
    _C = _load()
    return py_call if _C is None else _C.fast_call


def pointwise_entry():
    """ember._C's `fast_pointwise(op, args) -> Tensor | None` (inputs may require grad: the
    caller records), or None without the native module."""
    return None if _C is None else _C.fast_pointwise


def register_autograd(classes: dict) -> bool:
    """ember-autograd's node classes and its per-op description (ember/autograd/_native.py):
    with them a hit whose input requires grad builds its graph node in C++ (csrc/fastpath_grad.cpp)
    instead of going to autograd's `record`. False without the native module."""
    if _C is None or not hasattr(_C, "grad_init"):
        return False
    from ._tensor import Storage, Tensor
    info = classes.pop("TensorInfo", None)
    engine = classes.pop("engine_globals", None)
    _C.grad_init(dict(classes, Tensor=Tensor, Storage=Storage))
    if info is not None and engine is not None and hasattr(_C, "viewpath_grad"):
        from ._dispatch import execute
        try:  # recorded views: made natively too (csrc/viewpath.cpp)
            _C.viewpath_grad(info, engine, execute)
        except TypeError:  # a build of ember._C older than this file: Python records them
            pass
    return True


def engine_init(classes: dict):
    """ember-autograd's node classes for ember._C's backward loop (csrc/engine.cpp): returns its
    `engine_run(roots, grads, keep_graph)`, or None without the native module."""
    if _C is None or not hasattr(_C, "engine_init"):
        return None
    from ._tensor import Storage, Tensor
    _C.engine_init(dict(classes, Tensor=Tensor, Storage=Storage))
    return _C.engine_run


def set_native_grad(on: bool) -> None:
    """Build graph nodes of hits natively (True) or leave all recording to autograd's Python
    `record` (False); the hit path itself stays on."""
    if _C is not None and hasattr(_C, "grad_enable"):
        _C.grad_enable(bool(on))


def set_enabled(on: bool) -> None:
    """Turn the native hit path on or off at run time (tests compare both)."""
    if _C is not None:
        _C.fastpath_enable(bool(on))


def enabled() -> bool:
    return _C is not None


def stats():
    """(hits, misses, ops seen) of the native hit path, or None without it."""
    return None if _C is None else _C.fastpath_stats()


def set_native_views(on: bool) -> None:
    """Views, in-place ops and factories on the native hit path (True) or through Python's
    `call` (False; the rest of the hit path stays on): benchmarks compare the two."""
    if _C is not None and hasattr(_C, "viewpath_enable"):
        _C.viewpath_enable(bool(on))


def view_stats():
    """(views made, of them recorded by autograd) by the native hit path, or None without it."""
    return None if _C is None or not hasattr(_C, "viewpath_stats") else _C.viewpath_stats()


def mut_stats():
    """In-place and factory calls the native hit path finished, or None without it."""
    return None if _C is None or not hasattr(_C, "mutpath_stats") else _C.mutpath_stats()


def grad_stats():
    """How many graph nodes the native path built so far (None without it or ember-autograd's
    registration)."""
    return None if _C is None or not hasattr(_C, "grad_stats") else _C.grad_stats()


def register_device(type: str, builder, special: list, capturing: dict, storage_buffer,
                    native_buffer=None) -> bool:
    """Let a device package (ember.cuda) replay its pointwise launches natively (csrc/devplan.cpp).

    builder(op, args) -> None | (kinds, default dtype, check, check dtype,
    (out shape, out stride, result dtype, device, alloc), (function, gx, gy, gz, block x,
    shared bytes, context), params, fake, None): asked after the device's kernel slot ran a call
    (or, while autograd records, on a miss); kinds: per argument 0 tensor, 1 runtime scalar
    (keyed by type), 2 keyed by value, 3 by identity; alloc() -> Storage of the output;
    params: per kernel parameter (source, C type, constant): source -1 the output's address,
    -2 the constant, i >= 0 argument i (a tensor's address or a scalar). A plan without a
    function calls fake(packed parameter bytes). special[0] != 0 or a non-empty capturing dict
    send every call to the Python path. storage_buffer: the device buffer class (slots `ptr`,
    `block`, `alloc`). With alloc = (malloc, allocator, nbytes, rounded size) and a
    native_buffer class (a subclass of storage_buffer: its `__del__` is set here), the
    allocator's exact-reuse malloc and free run natively (csrc/devalloc.cpp).
    False when ember._C (or this build of it) is not there."""
    if _C is None or not hasattr(_C, "devplan_register"):
        return False
    from . import _dtype, _tensor
    if native_buffer is not None and hasattr(_C, "devalloc_buffer_del"):
        native_buffer.__del__ = _C.devalloc_buffer_del
    else:
        native_buffer = None
    try:
        _C.devplan_register(type, builder, special, capturing, vars(_dtype), _tensor.Storage,
                            storage_buffer, native_buffer)
    except TypeError:  # a build of ember._C older than this file: the Python path
        return False
    return True


def clear_device_plans() -> None:
    """Drop every native device plan (a setting their launches depend on changed)."""
    if _C is not None and hasattr(_C, "devplan_clear"):
        _C.devplan_clear()


def device_stats():
    """(hits, misses, plans built, ops seen) of the native device launch path, or None."""
    if _C is None or not hasattr(_C, "devplan_stats"):
        return None
    return _C.devplan_stats()
