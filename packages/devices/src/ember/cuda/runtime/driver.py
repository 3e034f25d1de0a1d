"""The CUDA driver through cuda-bindings: devices, contexts, streams, events and copies.

Everything here is imported lazily (ember.cuda must import on machines without cuda-bindings).
Only the driver API is used (primary contexts, as the runtime API and PyTorch do), so no libcudart
is needed and Triton's kernels, which the driver API loads, share our contexts.
"""
from __future__ import annotations

import os
import threading

# EMBER_CUDA_FAKE=1: one pretend device whose memory is host memory and whose kernels run in
# Triton's interpreter (set TRITON_INTERPRET=1 too). The backend's code paths, the code generator
# and the allocator then run in CI, which has no GPU. Timing and cuBLAS are not pretended.
# EMBER_CUDA_FAKE=nolaunch: the same, but kernels and GEMMs are not run at all (values are
# garbage): the host path of every op as on a GPU, for profiling the host cost without one.
# EMBER_CUDA_FAKE_DEVICES=N pretends N devices (default 1): each allocation belongs to one, and
# a kernel launched in another device's context on it fails as on GPUs ("invalid resource
# handle"), so per-device caches and context switches are tested without two GPUs.
FAKE = os.environ.get("EMBER_CUDA_FAKE") in ("1", "nolaunch")
NOLAUNCH = os.environ.get("EMBER_CUDA_FAKE") == "nolaunch"
FAKE_DEVICES = int(os.environ.get("EMBER_CUDA_FAKE_DEVICES", "1")) if FAKE else 0
_fake_mem: dict = {}
_fake_owner: dict = {}   # fake allocation address -> (end address, device index)

_cu = None          # cuda.bindings.driver once loaded
_count = None       # device count, once probed
_ctx: dict = {}     # device index -> primary context
_local = threading.local()   # current device and per-device current stream


class CudaError(RuntimeError):
    """A CUDA driver call failed (PyTorch raises RuntimeError with the CUDA error string)."""


def cu():
    """The cuda.bindings.driver module (ImportError without cuda-bindings)."""
    global _cu
    if _cu is None:
        from cuda.bindings import driver
        _cu = driver
    return _cu


def check(res):
    """Unpack a driver call's (err, *values) tuple, raising CudaError on failure."""
    err = res[0]
    if int(err) != 0:
        d = cu()
        _, name = d.cuGetErrorName(err)
        _, msg = d.cuGetErrorString(err)
        name = name.decode() if isinstance(name, bytes) else str(name)
        msg = msg.decode() if isinstance(msg, bytes) else str(msg)
        raise CudaError(f"CUDA error: {msg} ({name})")
    if len(res) == 1:
        return None
    return res[1] if len(res) == 2 else res[1:]


def device_count() -> int:
    """Visible devices; 0 without cuda-bindings, a driver or a GPU (never raises)."""
    global _count
    if FAKE:
        return FAKE_DEVICES
    if _count is None:
        try:
            d = cu()
            (err,) = d.cuInit(0)
            if int(err) != 0:
                _count = 0
            else:
                err, n = d.cuDeviceGetCount()
                _count = int(n) if int(err) == 0 else 0
        except Exception:  # no cuda-bindings or no libcuda: "no GPU", as torch.cuda says
            _count = 0
    return _count


def _check_index(index: int) -> int:
    n = device_count()
    if n == 0:
        raise RuntimeError("Found no NVIDIA driver on your system or no CUDA GPU is available "
                           "(ember.cuda.is_available() is False)")
    if not 0 <= index < n:
        raise RuntimeError(f"CUDA error: invalid device ordinal (device {index}, {n} visible)")
    return index


def context(index: int):
    """The primary context of device index, made current on this thread."""
    if FAKE:
        _check_index(index)
        _ctx[index] = "fake"
        _local.bound_index = index
        return "fake"
    c = _ctx.get(index)
    if c is None:
        _check_index(index)
        d = cu()
        dev = check(d.cuDeviceGet(index))
        c = _ctx[index] = check(d.cuDevicePrimaryCtxRetain(dev))
    if getattr(_local, "bound", None) is not c:
        check(cu().cuCtxSetCurrent(c))
        _local.bound = c
        _local.bound_index = index
    return c


def current_device() -> int:
    return getattr(_local, "device", 0)


def bound_device() -> int:
    """The device whose context is bound on this thread: the one a launch runs on, which a
    compiled kernel, a library handle or a stream must belong to (the current device when
    none is bound yet). Kernels bind their tensors' device (ensure_context) without changing
    the user's current device, as PyTorch's device guards."""
    i = getattr(_local, "bound_index", None)
    return current_device() if i is None else i


def set_device(index: int) -> None:
    _check_index(index)
    _local.device = index
    context(index)


def ensure_context(index: int | None = None) -> int:
    """Bind the context of index (default: current device) and return the index."""
    i = current_device() if index is None else index
    context(i)
    return i


def synchronize(index: int | None = None) -> None:
    if _cap.capturing:
        _cap.forbid()
    ensure_context(index)
    check(cu().cuCtxSynchronize())


def get_name(index: int) -> str:
    _check_index(index)
    d = cu()
    dev = check(d.cuDeviceGet(index))
    name = check(d.cuDeviceGetName(256, dev))
    return name.split(b"\0", 1)[0].decode()


def attribute(index: int, name: str) -> int:
    d = cu()
    dev = check(d.cuDeviceGet(index))
    attr = getattr(d.CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_" + name)
    return int(check(d.cuDeviceGetAttribute(attr, dev)))


def total_memory(index: int) -> int:
    d = cu()
    dev = check(d.cuDeviceGet(index))
    return int(check(d.cuDeviceTotalMem(dev)))


def mem_get_info(index: int | None = None) -> tuple[int, int]:
    ensure_context(index)
    free, total = check(cu().cuMemGetInfo())
    return int(free), int(total)


# ---- raw memory -----------------------------------------------------------------------------
def raw_alloc(nbytes: int, index: int) -> int | None:
    """cuMemAlloc, or None when the device is out of memory (other errors raise)."""
    ensure_context(index)
    d = cu()
    with _cap.relaxed():  # a graph pool's new segment while capturing
        err, ptr = d.cuMemAlloc(nbytes)
    if int(err) == int(d.CUresult.CUDA_ERROR_OUT_OF_MEMORY):
        return None
    check((err,))
    return int(ptr)


def raw_free(ptr: int, index: int) -> None:
    ensure_context(index)
    check(cu().cuMemFree(ptr))


def host_alloc_pinned(nbytes: int) -> int:
    ensure_context()
    return int(check(cu().cuMemHostAlloc(max(nbytes, 1), 0)))


def host_free_pinned(ptr: int) -> None:
    check(cu().cuMemFreeHost(ptr))


def memcpy_htod(dst: int, src_host: int, nbytes: int, stream: int) -> None:
    if _cap.capturing:
        _cap.forbid(stream)
    if nbytes:
        check(cu().cuMemcpyHtoDAsync(dst, src_host, nbytes, stream))


def memcpy_dtoh(dst_host: int, src: int, nbytes: int, stream: int) -> None:
    if _cap.capturing:
        _cap.forbid(stream)
    if nbytes:
        check(cu().cuMemcpyDtoHAsync(dst_host, src, nbytes, stream))


def memcpy_dtod(dst: int, src: int, nbytes: int, stream: int) -> None:
    if nbytes:
        check(cu().cuMemcpyDtoDAsync(dst, src, nbytes, stream))


def memcpy_peer(dst: int, dst_index: int, src: int, src_index: int, nbytes: int,
                stream: int) -> None:
    """Copy between two devices' memory (each in its own context)."""
    check(cu().cuMemcpyPeerAsync(dst, context(dst_index), src, context(src_index), nbytes,
                                 stream))


def memset8(dst: int, value: int, nbytes: int, stream: int) -> None:
    if nbytes:
        check(cu().cuMemsetD8Async(dst, value, nbytes, stream))


# ---- streams and events -----------------------------------------------------------------------
def stream_create(priority: int = 0) -> int:
    d = cu()
    flags = int(d.CUstream_flags.CU_STREAM_NON_BLOCKING)
    return int(check(d.cuStreamCreateWithPriority(flags, priority)))


def stream_sync(handle: int) -> None:
    if _cap.capturing:
        _cap.forbid(handle)
    check(cu().cuStreamSynchronize(handle))


def stream_query(handle: int) -> bool:
    d = cu()
    (err,) = d.cuStreamQuery(handle)
    if int(err) == int(d.CUresult.CUDA_ERROR_NOT_READY):
        return False
    check((err,))
    return True


def event_create(timing: bool = False, blocking: bool = False) -> int:
    d = cu()
    flags = 0 if timing else int(d.CUevent_flags.CU_EVENT_DISABLE_TIMING)
    if blocking:
        flags |= int(d.CUevent_flags.CU_EVENT_BLOCKING_SYNC)
    return int(check(d.cuEventCreate(flags)))


def event_destroy(handle: int) -> None:
    check(cu().cuEventDestroy(handle))


def event_record(ev: int, stream: int) -> None:
    check(cu().cuEventRecord(ev, stream))


def event_query(ev: int) -> bool:
    d = cu()
    (err,) = d.cuEventQuery(ev)
    if int(err) == int(d.CUresult.CUDA_ERROR_NOT_READY):
        return False
    check((err,))
    return True


def event_sync(ev: int) -> None:
    check(cu().cuEventSynchronize(ev))


def event_elapsed(start: int, end: int) -> float:
    return float(check(cu().cuEventElapsedTime(start, end)))


def stream_wait_event(stream: int, ev: int) -> None:
    check(cu().cuStreamWaitEvent(stream, ev, 0))


# ---- the pretend device (EMBER_CUDA_FAKE=1) ---------------------------------------------------
def fake_view(t):
    """A numpy view of a fake-device tensor (its memory is host memory): for the stand-ins of
    libraries the interpreter cannot run (cuBLAS)."""
    import ctypes

    import numpy as np

    assert FAKE, "fake_view: only on the fake device"
    it = t.dtype.itemsize
    lo = hi = 0
    for n, st in zip(t.shape, t.stride()):
        if n == 0:
            return np.empty(tuple(t.shape), t.dtype.np)
        if st < 0:
            lo += (n - 1) * st
        else:
            hi += (n - 1) * st
    base = t.data_ptr() + lo * it
    buf = (ctypes.c_char * ((hi - lo + 1) * it)).from_address(base)
    flat = np.frombuffer(buf, dtype=t.dtype.np)
    return np.lib.stride_tricks.as_strided(flat[-lo:], tuple(t.shape),
                                           tuple(s * it for s in t.stride()))


def _fake_install():
    import ctypes
    import itertools

    import numpy as np

    g = globals()

    def alloc(nbytes, index):
        try:
            a = np.empty(nbytes + 512, np.uint8)
        except MemoryError:
            return None
        p = a.ctypes.data
        p += (-p) % 512
        _fake_mem[p] = a
        if FAKE_DEVICES > 1 and index is not None:
            _fake_owner[p] = (p + max(nbytes, 1), index)
        return p

    def free(ptr, index=None):
        _fake_mem.pop(ptr, None)
        _fake_owner.pop(ptr, None)

    def copy(dst, src, n, stream=0):
        if n and not NOLAUNCH:  # nolaunch: device work is skipped, copies included
            _cap.fake_exec(lambda: ctypes.memmove(dst, src, n), stream)

    def host_copy(dst, src, n, stream=0):  # to or from the host: not capturable
        if _cap.capturing:
            _cap.forbid(stream)
        if n:
            ctypes.memmove(dst, src, n)

    def memset(dst, value, n, stream=0):
        if n and not NOLAUNCH:
            _cap.fake_exec(lambda: ctypes.memset(dst, value, n), stream)

    def no_sync(stream=None):  # None: the whole device (cuCtxSynchronize)
        if _cap.capturing:
            _cap.forbid(stream)

    streams = itertools.count(0x1000)

    g.update(
        synchronize=lambda index=None: no_sync(),
        get_name=lambda index: "ember fake CUDA device (host memory, Triton interpreter)",
        attribute=lambda index, name: {"COMPUTE_CAPABILITY_MAJOR": 9,
                                       "COMPUTE_CAPABILITY_MINOR": 0}.get(name, 1),
        total_memory=lambda index: 1 << 34,
        mem_get_info=lambda index=None: (1 << 33, 1 << 34),
        raw_alloc=alloc, raw_free=free,
        host_alloc_pinned=lambda n: alloc(n, None), host_free_pinned=free,
        memcpy_htod=host_copy, memcpy_dtoh=host_copy, memcpy_dtod=copy, memset8=memset,
        memcpy_peer=lambda dst, di, src, si, n, stream=0: copy(dst, src, n),
        stream_create=lambda priority=0: next(streams), stream_sync=no_sync,
        stream_query=lambda h: True, event_create=lambda timing=False, blocking=False: 1,
        event_destroy=lambda h: None, event_record=lambda ev, s: None,
        event_query=lambda ev: True, event_sync=lambda ev: None,
        event_elapsed=lambda a, b: 0.0, stream_wait_event=lambda s, ev: None)


from . import capture as _cap  # noqa: E402 (it imports this module)

if FAKE:
    _fake_install()


def fake_check_launch(addrs) -> None:
    """On several fake devices: every address a kernel touches must belong to the device whose
    context is bound, else the launch fails as a GPU's would."""
    if FAKE_DEVICES < 2 or not _fake_owner:
        return
    import bisect
    dev = bound_device()
    bases = sorted(_fake_owner)
    for a in addrs:
        k = bisect.bisect_right(bases, a) - 1
        if k >= 0:
            end, owner = _fake_owner[bases[k]]
            if a < end and owner != dev:
                raise CudaError(f"CUDA error: invalid resource handle (a kernel in device "
                                f"{dev}'s context on memory of device {owner})")
