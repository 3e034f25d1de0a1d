"""The cuda DeviceBackend: storage from the caching allocator, copies, and kernels.

Kernels live in the op entries' cuda slots (`register_kernel`, see `kernels.register`): pointwise
ops from their formulas (Triton, `kernels.pointwise`, a cached launch plan per call signature here),
hand-written kernels for the rest. The ops listed in HOST run their CPU kernel on host copies
(correct but slow: `fallback_ops` counts which ops took that path, so the gaps are visible).
"""
from __future__ import annotations

import functools

import numpy as np

from ember._ops.registry import DeviceBackend, Storage, Tensor, c_strides, pointwise_prepare
from ember._ops.registry import device as Device
from ember._ops.registry import dtypes as D

from .kernels.pointwise import Operand, PointwiseCache, Unsupported, run_op
from .kernels.triton_handler import InterpreterLimit
from .runtime import driver as rt
from .runtime.allocator import CachingAllocator
from .runtime.device_errors import raise_pending

_allocators: dict = {}


class _StreamEvent:
    """An event recorded on a stream at free time (allocator: stream-use safety)."""

    def __init__(self, stream):
        self.ev = rt.event_create()
        rt.event_record(self.ev, stream)

    def query(self):
        return rt.event_query(self.ev)

    def synchronize(self):
        rt.event_sync(self.ev)

    def __del__(self):
        try:
            rt.event_destroy(self.ev)
        except Exception:  # interpreter shutdown
            pass


def allocator(index: int) -> CachingAllocator:
    a = _allocators.get(index)
    if a is None:
        a = _allocators[index] = CachingAllocator(
            lambda n: rt.raw_alloc(n, index), lambda p: rt.raw_free(p, index), index,
            _StreamEvent, lambda: rt.mem_get_info(index))
    return a


class CudaBuffer:
    """A Storage's device memory: one allocator block, returned when the storage dies."""

    __slots__ = ("ptr", "block", "alloc", "__weakref__")

    def __init__(self, alloc, block):
        self.alloc, self.block, self.ptr = alloc, block, block.ptr

    def __del__(self):
        try:
            self.alloc.free(self.block)
        except Exception:  # interpreter shutdown
            pass


def _index(dev) -> int:
    return rt.current_device() if dev is None or dev.index is None else dev.index


def _stream(index=None) -> int:
    from .runtime.streams import current_stream_handle
    return current_stream_handle(index)


def _bind_stream():
    global _stream
    from .runtime.streams import current_stream_handle
    _stream = current_stream_handle


_bind_stream()


class _CopyOp:
    """The identity formula: copies (with dtype conversion) reuse the pointwise machinery."""

    qualname = "copy"
    pw_idx = (0,)
    pointwise = staticmethod(lambda o, x: x)


class _FillOp:
    qualname = "fill"
    pw_idx = (0,)
    pointwise = staticmethod(lambda o, v: v)


class CudaBackend(DeviceBackend):
    type = "cuda"
    is_accelerator = True

    def __init__(self):
        self._pw = None
        self.fallback_ops: dict = {}    # op qualname -> calls that ran on the host
        self._plans: dict = {}
        self._pinned: dict = {}             # page-locked host blocks: address -> bytes
        self._pinned_inflight: list = []    # (event, host array) of async copies from them

    # ---- runtime ------------------------------------------------------------------------------
    def is_available(self) -> bool:
        return rt.device_count() > 0

    def device_count(self) -> int:
        return rt.device_count()

    def current_device(self) -> int:
        return rt.current_device()

    def synchronize(self, index=None) -> None:
        rt.synchronize(index)
        raise_pending()

    def _dev(self, dev) -> Device:
        return Device("cuda", _index(dev))

    # ---- storage ------------------------------------------------------------------------------
    def empty(self, nbytes, dev):
        i = _index(dev)
        rt.ensure_context(i)
        a = _allocators.get(i) or allocator(i)
        return CudaBuffer(a, a.malloc(nbytes, _stream(i)))

    def _new(self, shape, dtype, dev) -> Tensor:
        """A new contiguous tensor on dev (kernels' outputs: the most frequent call here)."""
        if dev.__class__ is not Device or dev.index is None:
            dev = self._dev(dev)
        shape = tuple(shape)
        n = dtype.itemsize
        for s in shape:
            n *= s
        st = Storage(self.empty(n, dev), dev, n)
        return Tensor._make(st, shape, c_strides(shape), 0, dtype, dev)

    def from_host(self, host_bytes, dev, non_blocking=False):
        dev = self._dev(dev)
        buf = self.empty(host_bytes.nbytes, dev)
        rt.memcpy_htod(buf.ptr, host_bytes.ctypes.data, host_bytes.nbytes, _stream(dev.index))
        if not non_blocking:
            rt.stream_sync(_stream(dev.index))
        return buf

    def from_tensor(self, src, dev, non_blocking=False):
        a = _c(src._np)
        t = self._new(tuple(a.shape), src.dtype, dev)
        rt.ensure_context(t.device.index)
        s = _stream(t.device.index)
        # pageable host memory: the driver stages it before returning, so `a` may die after;
        # page-locked memory is read by the copy engine later, asynchronously
        rt.memcpy_htod(t.data_ptr(), a.ctypes.data, a.nbytes, s)
        if a.nbytes and self.host_is_pinned(a.ctypes.data):
            if non_blocking:  # `a` lives until the copy is done (PyTorch's host allocator too)
                self._reap_pinned()
                self._pinned_inflight.append((_StreamEvent(s), a))
            else:
                rt.stream_sync(s)
        return t

    # ---- page-locked host memory (Tensor.pin_memory) ---------------------------------------
    def pinned_host_empty(self, nbytes):
        import ctypes
        import weakref
        rt.ensure_context()
        self._reap_pinned()
        ptr = rt.host_alloc_pinned(nbytes)
        buf = (ctypes.c_char * max(nbytes, 1)).from_address(ptr)
        self._pinned[ptr] = max(nbytes, 1)
        weakref.finalize(buf, self._free_pinned, ptr)
        return np.frombuffer(buf, np.uint8)[:nbytes]

    def _free_pinned(self, ptr):
        self._pinned.pop(ptr, None)
        try:
            rt.host_free_pinned(ptr)
        except Exception:  # interpreter shutdown
            pass

    def host_is_pinned(self, ptr):
        for p, n in self._pinned.items():
            if p <= ptr < p + n:
                return True
        return False

    def _reap_pinned(self):
        """Drop the keep-alive references of asynchronous copies from pinned memory that are
        done."""
        self._pinned_inflight = [(e, a) for e, a in self._pinned_inflight if not e.query()]

    def to_host(self, t):
        if not t.is_contiguous():
            if t.dtype not in _TL_OK:   # complex/fp8 views: no copy kernel; read the storage
                flat = self.storage_to_host(t._storage).view(t.dtype.np)
                item = t.dtype.itemsize
                return np.ascontiguousarray(np.lib.stride_tricks.as_strided(
                    flat[t.storage_offset():], tuple(t.shape),
                    tuple(s * item for s in t.stride())))
            t = self._copy_new(t, t.dtype)
        out = np.empty(tuple(t.shape), t.dtype.np)
        i = t.device.index or 0
        rt.ensure_context(i)
        s = _stream(i)
        rt.memcpy_dtoh(out.ctypes.data, t.data_ptr(), out.nbytes, s)
        rt.stream_sync(s)
        raise_pending()  # (an error a kernel found: raised when the host waits for it)
        return out

    def storage_to_host(self, storage):
        out = np.empty(storage.nbytes, np.uint8)
        i = storage.device.index or 0
        rt.ensure_context(i)
        rt.memcpy_dtoh(out.ctypes.data, storage.data.ptr, storage.nbytes, _stream(i))
        rt.stream_sync(_stream(i))
        raise_pending()
        return out

    def storage_from_host(self, host_bytes, dev):
        dev = self._dev(dev)
        a = _c(host_bytes)
        return Storage(self.from_host(a, dev), dev, a.nbytes)

    # ---- copies -------------------------------------------------------------------------------
    def _operand(self, t) -> Operand:
        a = t.data_ptr()
        return Operand(None, a, tuple(t.shape), t.stride(), t.dtype)

    def _copy_into(self, dst, src):
        """dst[...] = src (both on this device; src broadcastable; dtype converted)."""
        if dst.numel() == 0:
            return
        rt.context(dst.device.index)   # launch in dst's device (its context, stream, kernels)
        if (src.dtype is dst.dtype and tuple(src.shape) == tuple(dst.shape)
                and src.is_contiguous() and dst.is_contiguous()):
            rt.memcpy_dtod(dst.data_ptr(), src.data_ptr(), dst.nbytes, _stream(dst.device.index))
            return
        if dst.dtype.is_complex or src.dtype.is_complex:
            return self._copy_complex(dst, src)
        if dst.dtype not in _TL_OK or src.dtype not in _TL_OK:
            raise Unsupported("fp8 copy")
        self.pw.run(_CopyOp, [self._operand(src)], lambda i: True, self._operand(dst),
                    dst.dtype, src.dtype)

    def _copy_complex(self, dst, src):
        """A copy with a complex side, through the (re, im) float views (Triton has no complex
        dtypes): real into complex writes a zero imaginary part, complex into real keeps the
        real part (PyTorch's copy_)."""
        if dst.dtype.is_complex and src.dtype.is_complex:
            return self._copy_into(as_real(dst), as_real(src))
        if dst.dtype.is_complex:
            self.fill_(part(dst, 1), 0)
            return self._copy_into(part(dst, 0), src)
        return self._copy_into(dst, part(src, 0))

    def _copy_new(self, t, dtype):
        out = self._new(tuple(t.shape), dtype, t.device)
        self._copy_into(out, t)
        return out

    def copy_(self, dst, src, non_blocking=False):
        if src.device.type != "cuda":
            src = Tensor._from_np(_c(src._np), src.dtype)
            src = self.from_tensor(src, dst.device, non_blocking)
        elif src.device != dst.device:
            src = self.to_copy(src, src.dtype, dst.device)
        try:
            self._copy_into(dst, src)
        except Unsupported:
            host = Tensor._from_np(self.to_host(src), src.dtype)
            full = np.empty(tuple(dst.shape), dst.dtype.np)
            np.copyto(full, host._np, casting="unsafe")
            self._copy_into(dst, self.from_tensor(Tensor._from_np(full, dst.dtype), dst.device))

    def to_copy(self, tensor, dtype, dev, non_blocking=False):
        dev = self._dev(dev)
        if dev != tensor.device:  # device to device: through a same-dtype contiguous copy
            src = tensor if tensor.is_contiguous() else self._copy_new(tensor, tensor.dtype)
            out = self._new(tuple(src.shape), src.dtype, dev)
            rt.ensure_context(dev.index)
            rt.memcpy_peer(out.data_ptr(), dev.index, src.data_ptr(), src.device.index,
                           src.nbytes, _stream(dev.index))
            return out if dtype is out.dtype else self._copy_new(out, dtype)
        try:
            return self._copy_new(tensor, dtype)
        except Unsupported:
            return self.from_tensor(tensor.cpu().to(dtype), dev, non_blocking)

    # ---- kernels ------------------------------------------------------------------------------
    @property
    def pw(self) -> PointwiseCache:
        if self._pw is None:
            from .runtime.launcher import FastLauncher
            self._pw = PointwiseCache(FastLauncher())
        return self._pw

    def pointwise(self, op, args, result_dtype, compute_dtype):
        sig = self._signature(op, args)
        plan = self._plan(sig) if sig is not None else None
        if plan is not None:  # the eager hot path: one allocation and one launch
            return self._launch_plan(plan, args)
        out = self._pointwise_slow(op, args, result_dtype, compute_dtype)
        pw = self._pw
        if sig is not None:  # again: the first trace may have found the scalars must be baked
            sig = self._signature(op, args)
        if sig is not None and pw is not None and pw.last_plan is not None:
            launcher = pw.launch
            if getattr(launcher, "last", None) is not None:
                from ember._ops.registry import pointwise_dtypes
                grid, tail = pw.last_plan
                run, prefix, cvals = launcher.last
                pws = set(op.pw_idx)
                const = op in pw.consts or compute_dtype is D.float64
                tens = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
                scal = () if const else tuple(
                    i for i, a in enumerate(args)
                    if i in pws and a.__class__ in (bool, int, float))
                common = pointwise_dtypes(op, [args[i] for i in op.pw_idx], args)[0]
                try:
                    hash(sig)
                except TypeError:  # never looked up (see _plan)
                    return out
                if len(self._plans) > 20000:
                    self._plans.clear()
                self._plans[sig] = (out._shape, out._stride, out._storage.nbytes, out.device,
                                    allocator(out.device.index), tens, scal, run, prefix,
                                    cvals, grid, tuple(tail), result_dtype, common)
        return out

    def _launch_plan(self, plan, args, into=None):
        (shape, stride, nbytes, dev, alloc, tens, scal, run, prefix, cvals, grid, tail, rdt,
         _) = plan
        rt.context(dev.index)  # the plan's kernel was loaded in dev's context: launch there
        stream = _stream(dev.index)
        if into is not None:  # an in-place op: the output is the first argument's memory
            out = None
            call = [into]
        else:
            buf = CudaBuffer(alloc, alloc.malloc(nbytes, stream))
            out = Tensor._make(Storage(buf, dev, nbytes), shape, stride, 0, rdt, dev)
            call = [buf.ptr]
        for i in tens:
            a = args[i]
            call.append(a._st.data.ptr + a._offset * a.dtype.itemsize)
        for i in scal:
            call.append(args[i])
        run(grid[0], 1, 1, stream, *prefix, *call, *tail, *cvals)
        return out

    def pointwise_kernel(self, op):
        """The cuda slot of a pointwise op: a call seen before (same dtypes, shapes, strides,
        scalar types) launches its cached plan; a new one is checked and promoted by core
        (pointwise_prepare), traced, launched, and its plan cached."""
        return functools.partial(self._pointwise_call, op)

    def _pointwise_call(self, op, *args):
        sig = self._signature(op, args) if self._pw is not None else None
        plan = self._plan(sig) if sig is not None else None
        if plan is not None:  # the eager hot path: one allocation and one launch
            if op.check is not None:  # PyTorch's argument errors (negative int powers, ...)
                op.check(plan[13], *args)
            return self._launch_plan(plan, args)
        rdt, cdt = pointwise_prepare(op, args)
        return self.pointwise(op, args, rdt, cdt)

    def inplace_kernel(self, op):
        """The cuda slot of an in-place pointwise op (x.add_(y)): the plan of its functional op
        writing straight into x when x is laid out as that plan's output; NotImplemented
        otherwise (the dispatcher then computes the functional op and copies it into x)."""
        def kernel(*args):
            r = self._cached_launch(op, args)
            return NotImplemented if r is None else r
        kernel.__qualname__ = f"cuda_pointwise[{op.qualname}]"
        return kernel

    def _cached_launch(self, op, args):
        """Launch the cached plan of a call seen before; None: no plan."""
        if self._pw is None:
            return None
        base = op.inplace_of
        sig = self._signature(base or op, args)
        plan = self._plan(sig) if sig is not None else None
        if plan is None:
            return None
        chk = (base or op).check
        if base is not None:
            x = args[0]
            if (plan[12] is not x.dtype or plan[0] != x._shape or plan[1] != x._stride
                    or plan[3] != x.device):
                return None
            ptr = x._storage.data.ptr + x._offset * x.dtype.itemsize
            if ptr & 15:
                return None  # the kernel was compiled for an aligned output
            st = x._storage
            for i in plan[5]:
                a = args[i]
                if i and a._storage is st and (a._offset != x._offset or a._stride != x._stride):
                    return None  # an overlapping view read while x is written
            if chk is not None:
                chk(plan[13], *args)
            self._launch_plan(plan, args, ptr)
            x._bump()
            return x
        if chk is not None:  # PyTorch's argument errors (negative int powers, ...)
            chk(plan[13], *args)
        return self._launch_plan(plan, args)

    def _signature(self, op, args):
        """A key for everything the launch and the result dtype depend on: shapes, strides,
        dtypes, alignment, scalar types or, where they are baked in, values; None: no plan."""
        pw = self._pw
        if pw is None:
            return None
        dflt = D.get_default_dtype()
        const = op in pw.consts or dflt is D.float64
        sig = [op, dflt]
        pws = op.pw_idx
        scalars = []   # (position in sig, value) of runtime kernel scalars
        for i, a in enumerate(args):
            c = a.__class__
            if c is Tensor or (c is not float and c is not int and isinstance(a, Tensor)):
                if a.device.type != "cuda" or a.dtype not in _TL_OK:
                    return None
                d = a.dtype
                if d is D.float64:
                    const = True
                p = a._st.data.ptr + a._offset * d.itemsize  # a cuda tensor always has _st
                sig.append((d, a._shape, a._stride, a.device.index, p & 15 == 0))
            elif c is float or c is int or c is bool:
                # runtime kernel scalars by type; the rest (alpha, decimals, eps) by value
                if i in pws:
                    scalars.append((len(sig), a))
                    # Triton passes an int as i32 or i64 by its value: part of the key
                    sig.append(c if c is not int or -_I31 <= a < _I31 else "i64")
                else:
                    sig.append((c, a))
            elif c is list:
                sig.append(tuple(a))
            else:
                sig.append(a)
        if const:  # scalars baked into the kernel: their values are part of the key
            for k, v in scalars:
                sig[k] = (sig[k], v)
        return tuple(sig)  # callers look it up with _plan(): unhashable parts mean no plan

    def _plan(self, sig):
        """The cached launch plan of a signature (None: none, or a signature not hashable)."""
        try:
            return self._plans.get(sig)
        except TypeError:  # a list or other unhashable argument: no plan for such calls
            return None

    def _pointwise_slow(self, op, args, result_dtype, compute_dtype):
        if self._pw is not None:
            self._pw.last_plan = None
        dev = None
        for i in op.tensor_idx:
            a = args[i]
            if isinstance(a, Tensor) and a.device.type == "cuda":
                dev = a.device
                break
        rt.ensure_context(_index(dev))
        try:
            return run_op(self.pw, op, args, result_dtype, compute_dtype, self._operand,
                          lambda shape, dt: self._out(shape, dt, dev))
        except Unsupported as e:
            self.pw.last_plan = None
            if result_dtype.is_complex:  # Triton has no complex dtypes: on the float parts
                from .kernels.logical import complex_pointwise
                r = complex_pointwise(self, op, args, result_dtype)
                if r is not NotImplemented:
                    return r
            return self._host_call(op, args, not isinstance(e, InterpreterLimit))

    def _out(self, shape, dt, dev):
        t = self._new(shape, dt, dev)
        return t, self._operand(t)

    def fill_(self, t, value):
        if hasattr(value, "item"):
            value = value.item()
        if t.dtype.is_complex:  # each part of the (re, im) view on its own
            value = complex(value)
            self.fill_(part(t, 0), value.real)
            return self.fill_(part(t, 1), value.imag)
        if t.dtype not in _TL_OK or isinstance(value, complex):
            raise Unsupported("fill")
        if t.numel():
            rt.context(t.device.index)
            self.pw.run(_FillOp, [value], lambda i: False, self._operand(t), t.dtype, t.dtype)
        return t

    def fused_optim(self, kind, tensors, hyper) -> bool:
        """ember.optim's fused update (one kernel per parameter); False: take the op path."""
        from .kernels.optim import fused_optim
        return fused_optim(self, kind, tensors, hyper)

    def foreach_optim(self, kind, lists, hyper) -> bool:
        """ember.optim's multi-tensor update (a few launches for all parameters); False: take
        the per-parameter path."""
        from .kernels.foreach_optim import foreach_optim
        return foreach_optim(self, kind, lists, hyper)

    def _host_call(self, op, args, count=True):
        return self.host_call(op, args, count)

    def flex_attention(self, query, key, value, score_mod, block_mask, scale, return_lse):
        """FlexAttention's fused forward (core's flex_attention asks); NotImplemented: run the
        eager reference."""
        from ._flex import flex_forward
        return flex_forward(self, query, key, value, score_mod, block_mask, scale, return_lse)

    def launch_user_triton(self, kernel, grid, args, kwargs):
        """`ember.library.wrap_triton(kernel)[grid](*args, **kwargs)` on cuda tensors."""
        from ._user_triton import launch_user_triton
        return launch_user_triton(kernel, grid, args, kwargs)


_I31 = 2**31
_TL_OK = {D.bool, D.uint8, D.int8, D.int16, D.int32, D.int64, D.float16, D.bfloat16, D.float32,
          D.float64}


def as_real(t) -> Tensor:
    """A complex tensor's interleaved float view, shape (..., 2) (PyTorch's view_as_real), with
    no autograd link: what kernels use to copy, fill and compute complex values as real pairs."""
    return Tensor._make(t._storage, tuple(t._shape) + (2,), tuple(2 * s for s in t._stride) + (1,),
                        2 * t._offset, t.dtype.to_real(), t.device)


def part(t, k: int) -> Tensor:
    """A complex tensor's real (k=0) or imaginary (k=1) part as a float view (no autograd)."""
    return Tensor._make(t._storage, tuple(t._shape), tuple(2 * s for s in t._stride),
                        2 * t._offset + k, t.dtype.to_real(), t.device)


def _c(a):
    # np.ascontiguousarray turns a 0-d array into shape (1,): only copy what needs it
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)
