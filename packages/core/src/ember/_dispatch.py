"""Dispatch: modes first, then autograd recording, then the device kernel.

    call(op, args, out) ─┬─ a mode is active?        -> mode.__ember_dispatch__(op, args, out)
                         ├─ grad on and an input requires grad -> autograd_hook(op, args, out)
                         └─ execute(op, args, out)   -> view rule | pointwise | kernel | decomp

A device's kernel is the op entry's slot `op.kernels[device type]` (filled by `register_kernel`);
an op without one (or whose kernel declines a call by returning NotImplemented) takes one rule,
`no_kernel`: its decomposition, else the device's host fallback for the ops it lists, else an error.
"""
from __future__ import annotations

import warnings
from collections import namedtuple

import numpy as np

from . import _dtype as D
from ._device import device as Device
from ._device import get_backend
from ._size import broadcast_shapes, contiguous_strides
from ._state import state
from ._tensor import _STRIDES, Tensor, c_strides

__all__ = ["call", "execute", "DispatchMode", "TensorMeta", "autograd_hook", "no_kernel",
           "pointwise_prepare", "DynamicOutputShape"]

_make = Tensor._make
autograd_hook = None  # set by ember-autograd: (op, args, out) -> result, recording a graph node
_CPU = Device("cpu")
_META = Device("meta")

TensorMeta = namedtuple("TensorMeta", "shape dtype stride", defaults=(None,))


class DynamicOutputShape(NotImplementedError):
    """A meta function validated the call, but the output's shape depends on the input's
    values (x[mask]): meta tensors cannot hold it (PyTorch's DynamicOutputShapeException)."""


class DispatchMode:
    """Intercepts every op call while active (`with mode:`). Subclasses implement
    `__ember_dispatch__(op, args, out)`; inside it, the mode is popped so calls go further down."""

    def __enter__(self):
        state.modes.append(self)
        special[0] += 1
        return self

    def __exit__(self, *exc):
        state.modes.remove(self)
        special[0] -= 1

    def __ember_dispatch__(self, op, args, out):
        raise NotImplementedError


# Nonzero while any thread has a dispatch mode or autocast active: the fast path is off.
special = [0]
_F32, _F64 = D.float32, D.float64
_FAST_DTYPES = (D.float32, D.float64)


def call(op, args: tuple, out=None):
    """Run op on args (schema order), through modes and autograd."""
    if subclass_function[0]:
        r = _function_call(op, args, out)
        if r is not NotImplemented:
            return r
    if op.pointwise is not None and out is None and not special[0]:
        # fast path: plain CPU float tensors of one dtype, nothing recording, no promotion
        # (Python int/float/bool scalars never change a float tensor's dtype: `x * 2` is fast)
        # (the numpy views are collected in the same pass: one loop on the hottest path)
        d = acc = None
        arrs = list(args)
        n = 0
        for i in op.tensor_idx:
            a = args[i]
            if a.__class__ is not Tensor:
                c = a.__class__
                if c is float or c is int or c is bool or a is None:
                    continue
                if (getattr(a, "_requires_grad", False) and autograd_hook is not None
                        and state.grad_enabled):
                    return autograd_hook(op, args, None)  # an nn.Parameter: as below
                break
            if a._requires_grad and autograd_hook is not None and state.grad_enabled:
                # straight to autograd (any device: it asks the device's cached launch itself):
                # special[0] == 0 means no mode and no autocast (with grad off, as in a
                # backward pass, it computes like any other tensor). Without ember-autograd
                # nothing records, so requires_grad changes nothing: the plain path.
                return autograd_hook(op, args, None)
            if a.device is not _CPU:
                acc = a.device.type
                break
            if d is None:
                d = a.dtype
            elif a.dtype is not d:
                break
            x = a._npc
            if x is None:
                x = a._np
            arrs[i] = x
            if x.size > n:
                n = x.size
        else:
            if d is _F32 or d is _F64:
                r = _fast_core(op, args, arrs, n, d)
                if r is not None:
                    return r
        if acc is not None:  # a device's kernel (cuda: the cached Triton launch) when nothing
            k = op.kernels.get(acc)  # records: no mode, no autocast, no out=, no grad
            if k is not None:
                if not state.grad_enabled:
                    return k(*args)
                for i in op.tensor_idx:
                    if getattr(args[i], "_requires_grad", False):
                        break
                else:
                    return k(*args)
    if op.supports != "bifc" and op.pointwise is None:  # float-only kernels (nn ops)
        _check_supports(op, args)
    st = state
    if st.modes:
        mode = st.modes.pop()
        try:
            return mode.__ember_dispatch__(op, args, out)
        finally:
            st.modes.append(mode)
    return call_below_modes(op, args, out)


def call_below_modes(op, args: tuple, out=None):
    """call() without its modes: autocast, autograd recording, then execute. A mode that sees
    the calls an op makes inside (the profiler's nested rows) runs the op itself through this
    while it stays active."""
    st = state
    if st.autocast:  # above autograd, so the casts are recorded
        from .amp.autocast_mode import cast_args
        args = cast_args(op, args, st.autocast)
    if st.grad_enabled and autograd_hook is not None:
        for i in op.tensor_idx:
            a = args[i]
            if a.__class__ is not None and getattr(a, "_requires_grad", False):
                return autograd_hook(op, args, out)
        for i in op.list_idx:
            for a in args[i]:
                if getattr(a, "_requires_grad", False):
                    return autograd_hook(op, args, out)
    return execute(op, args, out)


def _check_supports(op, args):
    """An op's `supports` categories, for ops that are not pointwise: the first tensor's dtype."""
    for i in op.tensor_idx:
        a = args[i]
        if isinstance(a, Tensor):
            if _CAT_LETTER[a.dtype._cat] not in op.supports:
                raise NotImplementedError(
                    f"\"{op.name}_cpu\" not implemented for '{_TORCH_NAMES[a.dtype]}'")
            return


def _fast_pointwise(op, args, d):
    """The fast path for args already known to be CPU tensors of float dtype d (or scalars)."""
    a = list(args)
    n = 0
    for i in op.tensor_idx:
        x = a[i]
        if x.__class__ is Tensor:
            x = x._npc
            if x is None:
                x = a[i]._np
            a[i] = x
            if x.size > n:
                n = x.size
    return _fast_core(op, args, a, n, d)


def _fast_core(op, args, a, n, d):
    """a: args with tensors replaced by their numpy views; n: the largest input size."""
    if op.check is not None:
        op.check(d, *args)
    rdt = D.bool if op.promote == "bool" else d
    if n >= JIT_MIN and CPU_JIT is not None:  # a generated C++ kernel (None: numpy runs)
        r = CPU_JIT(op, args, rdt, d)
        if r is not None:
            return Tensor._from_np(r)
    try:
        # numpy's error state is "ignore": see ember/__init__.py; big inputs go in cache-sized
        # chunks so a multi-step formula's temporaries stay in cache
        r = NP_CHUNKED(op.pointwise, a) if n >= CHUNK_MIN else op.pointwise(NP, *a)
    except (ValueError, TypeError, OverflowError):
        return None  # the general path raises PyTorch's error
    for i in op.tensor_idx:
        if r is a[i]:  # a formula that hands back its input (never alias it)
            r = r.copy()
            break
    return _fast_finish(r, rdt)


def _fast_finish(r, rdt):
    """A fast-path formula's result -> a fresh contiguous CPU tensor of dtype rdt, or None
    (the general path decides). Also ember._C's hit path's, for results it does not wrap."""
    if r.__class__ is not np.ndarray:
        r = np.asarray(r)
    npd = rdt.np
    if r.dtype is not npd and r.dtype != npd:  # builtin numpy dtypes are singletons
        if r.dtype.kind != npd.kind:
            return None
        r = r.astype(npd)
    elif r.base is not None:
        r = r.copy()
    shape = r.shape
    if len(shape) > 1 and not r.flags.c_contiguous:  # (a fresh 0/1-d array is contiguous)
        r = np.ascontiguousarray(r)
    st = _STRIDES.get(shape)
    if st is None:
        st = c_strides(shape)
    return _make(None, shape, st, 0, rdt, _CPU, r)  # its Storage is made when first needed


def find_device(op, args):
    """The device an op runs on: its tensor inputs' (checked equal), else its device= argument."""
    dev = None
    for i in op.tensor_idx:
        a = args[i]
        if isinstance(a, Tensor):
            d = a.device
            if dev is None or (d is not dev and dev.type == "cpu" and a.ndim != 0):
                dev = d
    if dev is None:
        for i in op.list_idx:
            for a in args[i]:
                if isinstance(a, Tensor):
                    return a.device
        if op.device_idx is not None and args[op.device_idx] is not None:
            return Device(args[op.device_idx])
        return state.device_stack[-1] if state.device_stack else (state.default_device or _CPU)
    return dev


def execute(op, args: tuple, out=None):
    """Run op below autograd and modes: the device's kernel, view rule or decomposition."""
    if subclass_dispatch[0]:
        r = _subclass_call(op, args, out)
        if r is not NotImplemented:
            return r
    if op.inplace_of is not None:
        return _inplace(op, args)
    if op.view is not None:
        # (shape, strides, offset) or, for view(dtype), (shape, strides, offset, dtype)
        return args[0]._alias(*op.view(*args))
    if op.mutated_idx and op.name not in _OVERLAP_OK:
        for i in op.mutated_idx:
            if isinstance(args[i], Tensor):
                check_no_internal_overlap(args[i])
    if op.pointwise is not None:
        result = run_pointwise(op, args)
    else:
        dev = find_device(op, args)
        kernel = op.kernels.get(dev.type)  # the op's slot for this device (register_kernel)
        if kernel is None:
            result = no_kernel(op, args, dev)
        elif dev is _CPU and "tensor_kernel" not in op.tags:  # user ops take Tensors
            result = _wrap(op, kernel(*_np_args(op, args)), args)
        else:
            result = kernel(*args)
            if result is NotImplemented:  # the kernel declines this call (a dtype, a layout)
                result = no_kernel(op, args, dev, declined=True)
        if result.__class__ is tuple:
            result = _named_result(op, result)   # (values, indices) as on the CPU
    if op.mutated_idx:
        for i in op.mutated_idx:
            if args[i] is not None:  # optional mutated args (batch_norm's running stats)
                args[i]._bump()
        if op.returns_alias:
            result = args[op.mutated_idx[0]]
    if out is not None:
        return write_out(op, result, out)
    return result


# Nonzero once a class that handles the public functions itself was imported (class attribute
# `__ember_function__(op, args, out)`, returning NotImplemented to decline): sparse and nested
# tensors. call() hands it a call with such an argument before modes and autograd, so
# `ember.add(s, s)` runs what `s.add(s)` runs (torch's __torch_function__ on a subclass).
subclass_function = [0]


def _function_call(op, args, out):
    for i in op.tensor_idx:
        a = args[i]
        if a.__class__ is not Tensor:
            h = getattr(a.__class__, "__ember_function__", None)
            if h is not None:
                return h(op, args, out)
    return NotImplemented


# Nonzero once a Tensor subclass that handles its own ops (class attribute
# `__ember_dispatch__(op, args, out)`, as ember-distributed's DTensor) was imported: execute()
# hands a call with such an argument to that class, below autograd (torch's __torch_dispatch__).
subclass_dispatch = [0]


def _subclass_call(op, args, out):
    for i in op.tensor_idx:
        h = getattr(args[i].__class__, "__ember_dispatch__", None)
        if h is not None:
            return h(op, args, out)
    for i in op.list_idx:
        for a in args[i] or ():
            h = getattr(a.__class__, "__ember_dispatch__", None)
            if h is not None:
                return h(op, args, out)
    return NotImplemented


def no_kernel(op, args, dev, declined=False):
    """The one rule for a call its device has no kernel for (or whose kernel declined it):
    the op's decomposition; on meta, its meta function; else the device's host fallback
    (`DeviceBackend.HOST`: the ops it lists, factories, and calls its kernel declined), else
    NotImplementedError as PyTorch raises for a missing backend kernel."""
    if op.decomp is not None:
        return op.decomp(*args)
    if dev.type == "meta":
        if op.meta is not None:
            return _from_meta(op.meta(*args))
        # as PyTorch: no shape function, no meta tensors (nonzero...)
        raise NotImplementedError(
            f"{op.qualname}: attempted to run this operator with Meta tensors, but it has no "
            f"meta function (its output shape may depend on the input's values)")
    if dev is not _CPU:
        backend = get_backend(dev.type)
        if declined or backend.runs_on_host(op):
            return backend.host_call(op, args)
    raise NotImplementedError(
        f"Could not run '{op.qualname}' with arguments from the '{dev.type}' "
        f"backend: ember has no {dev.type} kernel for it")


def _np_args(op, args):
    a = list(args)
    for i in op.tensor_idx:
        t = a[i]
        if t is not None and isinstance(t, Tensor):
            if t.dtype in _F8:
                check_float8(op, args, t.dtype)
            a[i] = t._np
    for i in op.list_idx:
        a[i] = [t._np if isinstance(t, Tensor) else t for t in a[i]]
        for t in args[i]:
            if isinstance(t, Tensor) and t.dtype in _F8:
                check_float8(op, args, t.dtype)
    return a


# float8 on CPU, as PyTorch's kernels take it: copies, concatenation, padding, indexing,
# matmuls, equality, abs, isnan, mul of two tensors, sums to another dtype; else it raises
_F8 = D._FLOAT8
_F8_POINTWISE = {"mul", "eq", "ne", "abs", "where", "isnan", "positive"}
_F8_POINTWISE_E5M2 = {"isinf", "isfinite"}  # (PyTorch has these for e5m2 only)
_F8_KERNELS = {"all", "any", "cat", "stack", "clone", "constant_pad_nd", "diag", "diag_embed",
               "fill_", "zero_", "index", "index_put_", "index_select", "masked_select", "mm",
               "matmul", "ones_like", "zeros_like", "empty_like", "full_like", "repeat", "roll",
               "copy_", "_to_copy", "contiguous", "kron", "outer", "tensordot", "unfold"}
_F8_WITH_DTYPE = {"sum", "mean"}  # (with dtype=: computed in that dtype)


def check_float8(op, args, dt) -> None:
    """NotImplementedError, as PyTorch's, for an op its CPU kernels do not run on float8."""
    name = (op.inplace_of or op).name
    if op.pointwise is not None or op.inplace_of is not None:
        ok = name in _F8_POINTWISE or (dt is D.float8_e5m2 and name in _F8_POINTWISE_E5M2)
        if ok and name == "mul" and not all(isinstance(args[i], Tensor) for i in op.pw_idx):
            ok = False  # PyTorch's float8 mul takes two tensors, not a scalar
    else:
        ok = op.name in _F8_KERNELS or (op.name in _F8_WITH_DTYPE and args[-1] is not None)
    if not ok:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{_TORCH_NAMES[dt]}'")


def _wrap(op, r, args):
    """Kernel results (numpy arrays, tuples of them, or tensors) -> tensors."""
    if r.__class__ is np.ndarray:
        if r.base is not None:  # an input view (np.reshape, astype(copy=False)): never alias
            r = r.copy()
        dt = D._BY_NP.get(r.dtype)
        if dt is not None and r.flags.c_contiguous:  # as _fast_finish: Storage made on demand
            st = _STRIDES.get(r.shape)
            return _make(None, r.shape, st if st is not None else c_strides(r.shape), 0, dt,
                         _CPU, r)
        return Tensor._from_np(r)
    if isinstance(r, np.ndarray):
        return Tensor._from_np(_own(r))
    if isinstance(r, Tensor) or r is None:
        return r
    if isinstance(r, (tuple, list)):
        vals = [_wrap(op, x, args) for x in r]
        if op.ret_names and op.ret_names[0]:
            return _return_type(op)(*vals)
        if op.schema.returns and op.schema.returns[0][0] == "Tensor[]":
            return list(vals) if isinstance(r, list) else tuple(vals)
        return tuple(vals)
    if isinstance(r, (np.generic, int, float, bool, complex)):
        return Tensor._from_np(np.asarray(r))
    return r


def _own(r: np.ndarray) -> np.ndarray:
    # a kernel may hand back an input view (np.reshape, astype(copy=False)): never alias storage
    return r if r.base is None else r.copy()


_RETURN_TYPES: dict = {}


def _named_result(op, r: tuple):
    """A device kernel's tuple as the op's named result type (what the CPU path returns)."""
    return _return_type(op)(*r) if op.ret_names and op.ret_names[0] else r


def _return_type(op):
    rt = _RETURN_TYPES.get(op.name)
    if rt is None:
        rt = namedtuple(op.name, op.ret_names)
        rt.__module__ = "ember.return_types"
        _RETURN_TYPES[op.name] = rt
    return rt


def _from_meta(m):
    if isinstance(m, TensorMeta):
        t = Tensor._empty(m.shape, m.dtype, _META)
        if m.stride is not None:
            t._stride = tuple(m.stride)
        return t
    if m is None:  # an optional output left out (batch norm without running stats)
        return None
    return tuple(_from_meta(x) for x in m)


# ---- pointwise ------------------------------------------------------------------------------
_CAT_LETTER = "bifc"  # bool, int, float, complex (dtype._cat indexes it)


def _opmath(d):
    return D.float32 if d in (D.float16, D.bfloat16, D.float8_e4m3fn, D.float8_e5m2) else d


def pointwise_dtypes(op, inputs, args=()):
    """(common, result, compute) dtypes of a pointwise op, by its promotion kind."""
    common = D.result_type_of(inputs)
    if common is None:
        raise TypeError(f"{op.name}(): expected at least one tensor or number argument")
    if _CAT_LETTER[common._cat] not in op.supports:
        # NotImplementedError (a RuntimeError subclass), as PyTorch 2.x raises for these
        raise NotImplementedError(
            f"\"{op.name}_cpu\" not implemented for '{_TORCH_NAMES[common]}'")
    if common in _F8:
        check_float8(op, args, common)
    kind = op.promote
    if kind.__class__ is not str:  # a function of the call's args (div's rounding_mode)
        kind = kind(*args)
    if kind == "default":
        return common, common, _opmath(common)
    if kind == "int_to_float":
        if common._cat < 2:
            common = D.get_default_dtype()
        return common, common, _opmath(common)
    if kind == "bool":
        return common, D.bool, _opmath(common)
    if kind == "complex_to_float":
        return common, common.to_real(), _opmath(common)
    if kind == "first":
        first = inputs[0].dtype
        return common, first, _opmath(first)
    raise AssertionError(kind)


def pointwise_prepare(op, args):
    """(result dtype, compute dtype) of a pointwise call after PyTorch's checks: dtype
    categories, promotion, the op's argument check, one device. What a device's pointwise
    kernel runs on a call it has not seen (the cpu and meta paths below do the same)."""
    inputs = [args[i] for i in op.pw_idx]
    common, rdt, cdt = pointwise_dtypes(op, inputs, args)
    if op.check is not None:
        op.check(common, *args)
    _check_same_device(op, inputs, find_device(op, args))
    return rdt, cdt


def run_pointwise(op, args):
    dev = find_device(op, args)
    if dev is not _CPU and dev.type != "meta":
        k = op.kernels.get(dev.type)  # the device's kernel checks and promotes (pointwise_prepare)
        if k is not None:
            return k(*args)
        pointwise_prepare(op, args)
        return no_kernel(op, args, dev)
    idx = op.pw_idx
    inputs = [args[i] for i in idx]
    common, rdt, cdt = pointwise_dtypes(op, inputs, args)
    if op.check is not None:  # PyTorch's argument errors (bool sub, integer alpha, ...)
        op.check(common, *args)
    if dev is not _CPU:
        # meta: every tensor arg broadcasts, promoted or not (masked_fill's mask, where's cond)
        shapes = [args[i].shape for i in op.tensor_idx if isinstance(args[i], Tensor)]
        return Tensor._empty(broadcast_shapes(*shapes), rdt, dev)
    if common is not cdt and common in _HALVES and op.name.rstrip("_") not in _OPMATH_SCALAR:
        args = _round_to_half(op, args, common)
    if CPU_JIT is not None:  # large tensors: a generated C++ kernel (None: numpy runs)
        r = CPU_JIT(op, args, rdt, cdt)
        if r is not None:
            return Tensor._from_np(r, rdt)
    a = list(args)
    npd = cdt.np
    for i in idx:
        x = a[i]
        if isinstance(x, Tensor):
            if x.device is not _CPU:
                _check_same_device(op, inputs, dev)
            x = x._np
            a[i] = x if x.dtype == npd else x.astype(npd)
        elif x is not None:
            try:
                a[i] = npd.type(x)
            except OverflowError:  # PyTorch wraps an out-of-range int: uint8 + (-1) is x - 1
                a[i] = np.array(x).astype(npd)
    for i in op.pw_other_idx:
        x = a[i]
        if isinstance(x, Tensor):
            a[i] = x._np
    try:
        with np.errstate(all="ignore"):
            big = any(type(x) is np.ndarray and x.size >= CHUNK_MIN for x in a)
            r = NP_CHUNKED(op.pointwise, a) if big else op.pointwise(NP, *a)
    except ValueError:
        broadcast_shapes(*[x.shape for x in inputs if isinstance(x, Tensor)])  # names the dims
        raise
    if type(r) is not np.ndarray:
        r = np.asarray(r)
    if r.dtype != rdt.np:
        r = r.astype(rdt.np)
    elif r.base is not None or any(r is a[i] for i in idx):
        r = r.copy()
    if r.ndim == 0 or r.flags.c_contiguous:
        return Tensor._from_np(r, rdt)
    return Tensor._from_np(np.ascontiguousarray(r), rdt)


_HALVES = (D.float16, D.bfloat16)
_OPMATH_SCALAR = ("mul", "div", "floor_divide", "lerp")  # PyTorch takes these unrounded


def _round_to_half(op, args, common):
    """float16/bfloat16 math upcasts to float32, but its operands are the common dtype's values
    first, as PyTorch's: a Python scalar or a 0-dim tensor of another dtype is rounded to it
    (`h + 0.1` adds float16(0.1), not float32(0.1); mul and div keep the scalar as it is)."""
    a = list(args)
    for i in op.pw_idx:
        x = a[i]
        c = x.__class__
        if c is float or c is int or c is bool:
            a[i] = float(common.np.type(x))
        elif isinstance(x, Tensor) and x.dtype is not common and x.dtype.is_floating_point:
            a[i] = x.to(common)
    return tuple(a)


def _check_same_device(op, inputs, dev):
    for x in inputs:
        if isinstance(x, Tensor) and x.device != dev and not (x.device.type == "cpu"
                                                               and x.ndim == 0):
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                               f"least two devices, {dev} and {x.device}! ({op.name})")


_TORCH_NAMES = {D.bool: "Bool", D.uint8: "Byte", D.int8: "Char", D.int16: "Short",
                D.int32: "Int", D.int64: "Long", D.float16: "Half", D.bfloat16: "BFloat16",
                D.float32: "Float", D.float64: "Double", D.complex64: "ComplexFloat",
                D.complex128: "ComplexDouble", D.float8_e4m3fn: "Float8_e4m3fn",
                D.float8_e5m2: "Float8_e5m2", D.uint16: "UInt16", D.uint32: "UInt32",
                D.uint64: "UInt64"}


def torch_name(d) -> str:
    """PyTorch's C++ name of a dtype ("Float", "Long"), as its error messages use."""
    return _TORCH_NAMES[d]


# ---- in-place and out= ------------------------------------------------------------------------
_OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a "
            "single memory location. Please clone() the tensor before performing the operation.")
# in-place ops that PyTorch lets write into an expanded tensor (no overlap check in its kernels;
# its addmv_ and baddbmm_ do not check either: their entries write aliased elements in order)
_OVERLAP_OK = frozenset(("fill_", "zero_", "index_fill_", "masked_fill_", "index_put_", "tril_",
                         "triu_", "embedding_renorm_", "threshold_", "native_batch_norm",
                         "addmv_", "baddbmm_"))


def check_no_internal_overlap(t: Tensor) -> None:
    """Refuse to write into t when several of its elements share memory: a stride-0 dim of size
    > 1, as an expand() makes (PyTorch's has_internal_overlap; other overlaps it cannot tell)."""
    if 0 in t._stride and 0 not in t._shape:  # (the common case stops here; empty: no overlap)
        for n, st in zip(t._shape, t._stride):
            if st == 0 and n > 1:
                raise RuntimeError(_OVERLAP)


def _inplace(op, args):
    self = args[0]
    if 0 in self._stride and op.name not in _OVERLAP_OK:
        check_no_internal_overlap(self)
    k = op.kernels.get(self.device.type)  # a device's in-place kernel (cuda: a cached plan
    if k is not None:                     # writing straight into self)
        r = k(*args)
        if r is not NotImplemented:
            return r
    r = execute(op.inplace_of, args)  # the rule for a missing in-place kernel
    copy_into(self, r, op.name)
    return self


def copy_into(dst: Tensor, src: Tensor, opname: str) -> None:
    """Write a computed result into dst (in-place op / out=): shape and cast checks as PyTorch."""
    if tuple(src.shape) != tuple(dst.shape):
        try:
            ok = broadcast_shapes(dst.shape, src.shape) == tuple(dst.shape)
        except RuntimeError:
            ok = False
        if not ok:
            raise RuntimeError(f"output with shape {list(dst.shape)} doesn't match the "
                               f"broadcast shape {list(broadcast_shapes(dst.shape, src.shape))}")
    if not D.can_cast(src.dtype, dst.dtype):
        raise RuntimeError(f"result type {_TORCH_NAMES[src.dtype]} can't be cast to the desired "
                           f"output type {_TORCH_NAMES[dst.dtype]}")
    if dst.device.type == "meta":
        pass
    elif dst.device is _CPU and src.device is _CPU:
        np.copyto(dst._np, src._np, casting="unsafe")
    else:
        get_backend(dst.device.type).copy_(dst, src)
    dst._bump()


def write_out(op, result, out):
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{op.name}(): out= must be a tuple of {len(result)} tensors")
        for o, r in zip(out, result):
            write_out(op, r, o)
        return type(result)(*out) if hasattr(result, "_fields") else tuple(out)
    if not isinstance(out, Tensor):
        raise TypeError(f"{op.name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    check_no_internal_overlap(out)  # (before any resize, as PyTorch)
    if tuple(out.shape) != tuple(result.shape):
        if out.numel() != 0:
            warnings.warn(f"An output with one or more elements was resized since it had shape "
                          f"{list(out.shape)}, which does not match the required output shape "
                          f"{list(result.shape)}. This behavior is deprecated.", UserWarning,
                          stacklevel=3)
        fresh = Tensor._empty(result.shape, out.dtype, out.device)
        out._set_meta(fresh._storage, fresh._shape, fresh._stride, 0)
    if result.dtype != out.dtype and not D.can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"result type {_TORCH_NAMES[result.dtype]} can't be cast to the "
                           f"desired output type {_TORCH_NAMES[out.dtype]}")
    copy_into(out, result, op.name)
    return out


CHUNK_MIN = 1 << 17
NP_CHUNKED = None  # _ops._handlers.chunked: large formulas evaluated in cache-sized chunks
CPU_JIT = None  # _ops._cpujit.run: C++ kernels for large CPU pointwise calls
JIT_MIN = 1 << 16  # (its own threshold on the output size decides; this one skips the call)


class _NumpyOps:
    """The numpy handler for pointwise formulas (filled by ember._ops._handlers)."""


NP = _NumpyOps()
contiguous_strides = contiguous_strides

# What the generated op functions call: ember._C's native hit path in front of `call` when the
# module is built (csrc/fastpath.cpp, ember/_native.py), else `call` itself.
from . import _native  # noqa: E402 - needs this module's names

call_entry = _native.entry_call(call)
native_pointwise = _native.pointwise_entry()  # for autograd's recording: Tensor | None
