"""Native launch plans of pointwise calls: what ember._C (core's csrc/devplan.cpp) replays.

After the backend's Python slot ran a call and cached its launch plan (`CudaBackend._plans`),
`build(op, args)` turns that plan into a description C++ keeps: how each argument is keyed,
the output's layout and allocator (its `malloc`: C++ makes the buffer and Storage objects),
and each kernel parameter's source and C type, read from
Triton's compiled signature (constexprs skipped, two null scratch pointers last, as Triton 3.6's
launcher packs them). A later call with the same key then runs op.check, allocates and calls
cuLaunchKernel from C++ with no Python in between but the allocator's `malloc`.

On the fake device the same description is built: under EMBER_CUDA_FAKE=nolaunch the packed
parameters are dropped (host-cost profiling), with EMBER_CUDA_FAKE_PLANS=1 (and
TRITON_INTERPRET=1) they are decoded here and the kernel runs in Triton's interpreter, so the
packing is checked in CI against the Python path's launch arguments.
"""
from __future__ import annotations

import struct

from ember import _dtype as D
from ember._tensor import Storage, Tensor

from . import driver as rt
from .allocator import round_size
from .launcher import SIGNATURES, FakeRun, _nop, fake_plans

__all__ = ["install", "build", "describe_params", "storage_maker"]

_I31 = 2**31
# Triton signature type -> the C type code csrc/devplan.cpp packs (fp16/bf16 scalars: none)
_CTYPE = {"i1": "?", "i8": "b", "i16": "h", "i32": "i", "i64": "q", "u1": "?", "u8": "B",
          "u16": "H", "u32": "I", "u64": "Q", "fp32": "f", "f32": "f", "fp64": "d"}
_STRUCT = {"p": "Q", "?": "b", "b": "b", "h": "h", "i": "i", "q": "q", "B": "B", "H": "H",
           "I": "I", "Q": "Q", "f": "f", "d": "d"}


def install(backend) -> bool:
    """Register `build` with ember._C for cuda tensors (False: no native module)."""
    from ember import _native

    from .._backend import CudaBuffer
    from . import capture, streams

    class NativeBuffer(CudaBuffer):
        """The buffers C++ makes: freed into the allocator natively (its __del__ is set by
        register_device), the same bookkeeping as CudaBuffer's."""
        __slots__ = ()
    from ember import _flags
    if _native.clear_device_plans not in _flags.on_precision_change:  # (f32 GEMM plans)
        _flags.on_precision_change.append(_native.clear_device_plans)
    return _native.register_device("cuda", lambda op, args: build(backend, op, args),
                                   streams.PUSHED, capture.capturing, CudaBuffer, NativeBuffer)


def _value_type(v) -> str:
    """Triton's type of a Python scalar passed at run time."""
    if v.__class__ is bool:
        return "i1"
    if v.__class__ is int:
        return "i32" if -_I31 <= v < _I31 else "i64"
    return "fp32"


def describe_params(sources, types):
    """(src, C type, constant) per kernel parameter: sources (src, value) of every launch
    argument in order, types their Triton types ("constexpr" ones are not parameters).
    None when a type has no packing here."""
    params = []
    for (src, v), ty in zip(sources, types):
        if ty == "constexpr":
            continue
        c = "p" if ty.startswith("*") else _CTYPE.get(ty)
        if c is None:
            return None
        params.append((src, c, v))
    return tuple(params)


def build(backend, op, args):
    """The native description of a call whose Python launch plan is cached, else None
    (calls of ops that are not pointwise: runtime/native_ops.py)."""
    if rt.FAKE:
        fake_plans()  # (a change of the fake device's switch drops what was planned before)
    if op.pointwise is None:
        from . import native_ops
        return native_ops.build(backend, op, args)
    sig = backend._signature(op, args)
    plan = backend._plan(sig) if sig is not None else None
    if plan is None:
        return None
    (shape, stride, nbytes, dev, alloc, tens, scal, run, prefix, cvals, grid, tail, rdt,
     common) = plan
    kinds = []
    for i, a in enumerate(args):
        c = a.__class__
        if c is Tensor or (isinstance(a, Tensor) and not hasattr(c, "__ember_dispatch__")
                           and not hasattr(c, "__ember_function__")):
            kinds.append(0)  # (a plain subclass, Parameter: keyed by its exact class)
        elif isinstance(a, Tensor) or c is list:
            return None  # a subclass with its own dispatch, a list: the Python path
        elif i in scal:
            kinds.append(1)
        elif c in (float, int, bool, str) or a is None:
            kinds.append(2)
        else:
            kinds.append(3)
    sources = [(-1, None)] + [(i, None) for i in tens] + [(i, None) for i in scal]
    sources += [(-2, v) for v in tail] + [(-2, v) for v in cvals]
    fake = None
    if run is _nop or isinstance(run, FakeRun):
        types = (["*"] * (1 + len(tens)) + [_value_type(args[i]) for i in scal]
                 + [_value_type(v) for v in tail] + ["constexpr"] * len(cvals))
        launch = (0, grid[0], 1, 1, 32, 0, 0)
        params = describe_params(sources, types)
        if params is not None and isinstance(run, FakeRun):
            fake = _fake_launcher(run, params, grid[0], cvals, dev)
    else:
        info = SIGNATURES.get(prefix[0]) if len(prefix) == 9 else None
        if info is None:
            return None
        types, meta, attrs = info
        num_warps, num_ctas, shared = meta[:3]
        if attrs or num_ctas != 1 or len(types) != len(sources):
            return None
        params = describe_params(sources, types)
        if params is not None:  # Triton's global and profile scratch pointers (unused: null)
            params += ((-2, "p", 0), (-2, "p", 0))
        ctx = rt._ctx.get(dev.index)
        if ctx is None:
            return None
        launch = (int(prefix[0]), grid[0], 1, 1, 32 * num_warps, shared, int(ctx))
    if params is None:
        return None
    return (tuple(kinds), D.get_default_dtype(), op.check, common,
            (shape, stride, rdt, dev, (alloc.malloc, alloc, nbytes, round_size(nbytes))), launch,
            params, fake, None)


def storage_maker(alloc, nbytes, dev):
    """What C++ does with (malloc, allocator, nbytes), as one Python callable (it also takes
    one in that slot): the output's Storage on the default stream (csrc/devplan.cpp replays
    only while no stream is pushed)."""
    from .._backend import CudaBuffer

    def new_storage():
        return Storage(CudaBuffer(alloc, alloc.malloc(nbytes, 0)), dev, nbytes)
    return new_storage


def _fake_launcher(run, params, gx, cvals, dev):
    """Decode the parameters C++ packed (8-byte cells) and launch them in the interpreter."""
    fmt = "<" + "".join(_STRUCT[c] + "x" * (8 - struct.calcsize(_STRUCT[c])) for _, c, _ in params)
    bools = [c == "?" for _, c, _ in params]

    def launch(raw: bytes):
        vals = struct.unpack(fmt, raw)
        vals = [bool(v) if b else v for v, b in zip(vals, bools)]
        rt.context(dev.index)
        run(gx, 1, 1, 0, *vals, *cvals)
    return launch
