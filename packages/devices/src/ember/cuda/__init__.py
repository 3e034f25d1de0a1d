"""ember.cuda: the CUDA backend through cuda-bindings, Triton and cuBLAS (nvmath-python).

Ships in ember-devices. On a machine without a GPU (or without cuda-bindings) it imports fine and
reports no device, like torch.cuda:

>>> import ember.cuda
>>> ember.cuda.is_available() in (True, False)
True

Importing registers the "cuda" device with core; nothing touches the driver until a query or a
tensor needs it, and triton/nvmath are imported only when a kernel first runs.
"""

from __future__ import annotations

from ember._ops.registry import register_device

from . import _random
from ._backend import CudaBackend
from ._backend import allocator as _allocator
from .graphs import (
    CUDAGraph,
    graph,
    graph_pool_handle,
    is_current_stream_capturing,
    make_graphed_callables,
)
from .runtime import driver as _rt
from .runtime.allocator import OutOfMemoryError
from .runtime.streams import (
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)

__all__ = ["is_available", "device_count", "current_device", "set_device", "device",
           "device_of", "get_device_name", "get_device_properties", "get_device_capability",
           "synchronize", "Stream", "Event", "stream", "StreamContext", "current_stream",
           "default_stream", "set_stream", "empty_cache", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "reset_peak_memory_stats", "memory_stats", "memory_summary", "mem_get_info",
           "OutOfMemoryError", "manual_seed", "manual_seed_all", "seed", "seed_all",
           "initial_seed", "get_rng_state", "set_rng_state", "get_rng_state_all",
           "set_rng_state_all", "default_generators", "is_initialized",
           "init", "host_memory_fallbacks", "CUDAGraph", "graph", "graph_pool_handle",
           "make_graphed_callables", "is_current_stream_capturing"]

_backend = CudaBackend()
register_device(_backend)


def _register_kernels():
    # the op entries' cuda slots (register_kernel); without a device no cuda tensor can exist,
    # so nothing is registered (and nothing imported)
    if _rt.device_count() > 0:
        from . import kernels
        kernels.register(_backend)
        from .runtime import native  # pointwise launch plans replayed by ember._C, if built
        native.install(_backend)


_register_kernels()


def device_count() -> int:
    """Number of CUDA devices visible; 0 without cuda-bindings, a driver or a GPU."""
    return _rt.device_count()


def is_available() -> bool:
    """True when at least one CUDA device can be used."""
    return device_count() > 0


def is_initialized() -> bool:
    return bool(_rt._ctx)


def init() -> None:
    _rt.ensure_context()


def current_device() -> int:
    return _rt.current_device()


def _idx(device) -> int:
    if device is None:
        return _rt.current_device()
    if isinstance(device, int):
        return device
    import ember
    d = ember.device(device)
    if d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {d}")
    return _rt.current_device() if d.index is None else d.index


def set_device(device) -> None:
    i = _idx(device)
    if i >= 0:
        _rt.set_device(i)


class device:
    """`with ember.cuda.device(1):` makes device 1 current inside the block."""

    def __init__(self, device):
        self.idx = -1 if device is None else _idx(device)
        self.prev = -1

    def __enter__(self):
        self.prev = _rt.current_device()
        if self.idx >= 0 and self.idx != self.prev:
            _rt.set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0 and self.idx != self.prev:
            _rt.set_device(self.prev)
        return False


class device_of(device):
    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_cuda else None)


def get_device_name(device=None) -> str:
    return _rt.get_name(_idx(device))


def get_device_capability(device=None) -> tuple[int, int]:
    i = _idx(device)
    return (_rt.attribute(i, "COMPUTE_CAPABILITY_MAJOR"),
            _rt.attribute(i, "COMPUTE_CAPABILITY_MINOR"))


class _DeviceProperties:
    def __init__(self, i):
        self.name = _rt.get_name(i)
        self.major, self.minor = get_device_capability(i)
        self.total_memory = _rt.total_memory(i)
        self.multi_processor_count = _rt.attribute(i, "MULTIPROCESSOR_COUNT")
        self.L2_cache_size = _rt.attribute(i, "L2_CACHE_SIZE")
        self.max_threads_per_multi_processor = _rt.attribute(
            i, "MAX_THREADS_PER_MULTIPROCESSOR")
        self.warp_size = _rt.attribute(i, "WARP_SIZE")
        self.is_integrated = bool(_rt.attribute(i, "INTEGRATED"))
        self.is_multi_gpu_board = bool(_rt.attribute(i, "MULTI_GPU_BOARD"))

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // (1 << 20)}MB, "
                f"multi_processor_count={self.multi_processor_count}, "
                f"L2_cache_size={self.L2_cache_size // (1 << 20)}MB)")


def get_device_properties(device=None) -> _DeviceProperties:
    return _DeviceProperties(_idx(device))


def synchronize(device=None) -> None:
    """Wait for all work queued on the device (every stream)."""
    from .runtime.device_errors import raise_pending
    _rt.synchronize(_idx(device))
    raise_pending()  # (an error a kernel found, as CUDA reports a device-side assert)


def mem_get_info(device=None) -> tuple[int, int]:
    return _rt.mem_get_info(_idx(device))


# ---- memory ---------------------------------------------------------------------------------
def _stats(device):
    return _allocator(_idx(device)).stats


def empty_cache() -> None:
    """Release cached blocks that hold no tensor back to the driver."""
    for a in list(__import__("ember.cuda._backend", fromlist=["x"])._allocators.values()):
        a.empty_cache()


def memory_allocated(device=None) -> int:
    return _stats(device)["allocated"]


def max_memory_allocated(device=None) -> int:
    return _stats(device)["peak_allocated"]


def memory_reserved(device=None) -> int:
    return _stats(device)["reserved"]


def max_memory_reserved(device=None) -> int:
    return _stats(device)["peak_reserved"]


def reset_peak_memory_stats(device=None) -> None:
    _allocator(_idx(device)).reset_peak()


def reset_max_memory_allocated(device=None) -> None:
    reset_peak_memory_stats(device)


def memory_stats(device=None) -> dict:
    return _allocator(_idx(device)).memory_stats()


def memory_summary(device=None, abbreviated: bool = False) -> str:
    return _allocator(_idx(device)).summary()


def caching_allocator_alloc(size, device=None, stream=None) -> int:
    i = _idx(device)
    from ._backend import CudaBuffer
    a = _allocator(i)
    s = current_stream(i).cuda_stream if stream is None else stream.cuda_stream
    buf = CudaBuffer(a, a.malloc(size, s))
    _raw_buffers[buf.ptr] = buf
    return buf.ptr


def caching_allocator_delete(ptr: int) -> None:
    _raw_buffers.pop(ptr, None)


_raw_buffers: dict = {}


def record_stream(tensor, stream) -> None:
    """Tell the allocator tensor's memory is used on stream (reuse waits for it)."""
    buf = tensor.untyped_storage().data
    buf.alloc.record_stream(buf.block, stream.cuda_stream)


# ---- random: Philox generators per GPU (_random); ember.manual_seed seeds them too ----------
_random.install()


def manual_seed(seed: int) -> None:
    """Seed the current GPU's generator (ember.manual_seed seeds every GPU's)."""
    _random.default_generator().manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    _random.manual_seed_all(seed)


def seed() -> None:
    """Seed the current GPU's generator from the operating system's entropy."""
    _random.default_generator().seed()


def seed_all() -> None:
    s = _random.default_generator().seed()
    manual_seed_all(s)


def initial_seed() -> int:
    return _random.default_generator().initial_seed()


def get_rng_state(device="cuda"):
    """The generator state of a GPU: a uint8 tensor of 16 bytes (seed, offset)."""
    return _random.default_generator(_idx(device)).get_state()


def set_rng_state(new_state, device="cuda") -> None:
    _random.default_generator(_idx(device)).set_state(new_state)


def get_rng_state_all() -> list:
    return [get_rng_state(i) for i in _random.device_indices()]


def set_rng_state_all(new_states) -> None:
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


def __getattr__(name):  # torch.cuda.default_generators: one per GPU, made on first use
    if name == "default_generators":
        return tuple(_random.default_generator(i) for i in _random.device_indices())
    if name == "amp":  # the deprecated torch.cuda.amp aliases
        import importlib
        return importlib.import_module(f"{__name__}.amp")
    raise AttributeError(f"module 'ember.cuda' has no attribute {name!r}")


def host_memory_fallbacks() -> dict:
    """Ops that ran on host copies of their arguments (no GPU kernel yet), with call counts."""
    return dict(_backend.fallback_ops)
