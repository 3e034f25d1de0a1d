"""Devices: `ember.device`, and the registry through which backends (cpu, meta, plugins) plug in."""
from __future__ import annotations

from . import _state

__all__ = ["device", "register_device", "get_backend", "DeviceBackend"]


class device:
    """`ember.device("cuda:1")`, `ember.device("cpu")`, `ember.device("cuda", 0)`."""

    __slots__ = ("type", "index", "__weakref__")

    def __new__(cls, type_or_str, index: int | None = None):
        if isinstance(type_or_str, device):
            return type_or_str
        if isinstance(type_or_str, int) and not isinstance(type_or_str, bool):
            type_or_str, index = _default_accelerator_type(), type_or_str
        if not isinstance(type_or_str, str):
            raise TypeError(f"device() received an invalid combination of arguments: "
                            f"got {type(type_or_str).__name__}")
        key = (type_or_str, index)
        hit = _CACHE.get(key)
        if hit is not None:
            return hit
        t, _, idx = type_or_str.partition(":")
        if idx:
            if index is not None:
                raise RuntimeError(f"type (string) must not include an index because index was "
                                   f"passed explicitly: {type_or_str}")
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{type_or_str}'")
            index = int(idx)
        if t not in _KNOWN_TYPES and t not in _BACKENDS:
            raise RuntimeError(f"Expected one of cpu, cuda, meta, ... device type at start of "
                               f"device string: {type_or_str}")
        self = object.__new__(cls)
        object.__setattr__(self, "type", t)
        object.__setattr__(self, "index", index)
        _CACHE[key] = self
        return self

    def __setattr__(self, name, value):
        raise AttributeError("ember.device is immutable")

    def __repr__(self) -> str:
        idx = "" if self.index is None else f", index={self.index}"
        return f"device(type='{self.type}'{idx})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (self.type, self.index))

    def __enter__(self):
        _state.state.device_stack.append(self)
        return self

    def __exit__(self, *exc):
        _state.state.device_stack.pop()


_CACHE: dict = {}
_KNOWN_TYPES = {"cpu", "meta", "cuda", "xpu", "mps", "hip", "privateuseone"}


class DeviceBackend:
    """What a device plugin provides. CPU and meta are built in; ember-devices adds cuda.

    A backend owns storage for its device: allocation and host<->device copies. Its kernels are
    in the op entries' slots (`register_kernel(op, type, fn)`), never in a table of its own.
    """

    type: str = ""
    is_accelerator = False

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def current_device(self) -> int:
        return 0

    def synchronize(self, index: int | None = None) -> None:
        pass

    # storage: a backend-specific buffer of nbytes bytes
    def empty(self, nbytes: int, dev: device):
        raise NotImplementedError

    def from_host(self, host_bytes, dev: device, non_blocking: bool = False):
        """Copy a flat uint8 numpy array to a new buffer on dev."""
        raise NotImplementedError

    def to_host(self, tensor):
        """A numpy array holding tensor's values (shape and dtype as the tensor's)."""
        raise NotImplementedError

    def from_tensor(self, cpu_tensor, dev: device, non_blocking: bool = False):
        """A new tensor on dev with cpu_tensor's values, shape and dtype."""
        raise NotImplementedError

    def copy_(self, dst, src, non_blocking: bool = False) -> None:
        """Write src (on any device, broadcastable) into dst (on this device)."""
        raise NotImplementedError

    def to_copy(self, tensor, dtype, dev: device, non_blocking: bool = False):
        """A copy of tensor (on this device) converted to dtype, on dev (same type)."""
        return self.from_tensor(tensor.cpu().to(dtype), dev, non_blocking)

    # The one host fallback: ops (by qualname) this device runs as their CPU kernel on host
    # copies, with the reason; factories always may (built on the host, then copied). An op with
    # no kernel in its slot, no decomposition and no entry here raises NotImplementedError.
    HOST: dict = {}

    def runs_on_host(self, op) -> bool:
        """Whether op, lacking a kernel for this device, runs on host copies (`HOST`)."""
        return op.qualname in self.HOST or "factory" in op.tags

    def host_call(self, op, args, count: bool = True):
        """Run op's CPU kernel on host copies of args; write mutated args back; results to the
        device (correct but slow: `fallback_ops` counts the calls, so the gaps are visible).
        count=False: a call the device's kernel handles on real hardware (not a gap)."""
        from ._dispatch import execute
        from ._tensor import Tensor
        if count:
            fb = self.__dict__.setdefault("fallback_ops", {})
            fb[op.qualname] = fb.get(op.qualname, 0) + 1
        dev = None

        def down(x):
            nonlocal dev
            if isinstance(x, Tensor) and x.device.type == self.type:
                dev = x.device
                return Tensor._from_np(self.to_host(x), x.dtype)
            if isinstance(x, (list, tuple)) and any(isinstance(e, Tensor) for e in x):
                return type(x)(down(e) for e in x)
            return x

        host = [down(a) for a in args]
        if op.device_idx is not None and host[op.device_idx] is not None:
            d = device(host[op.device_idx])
            if d.type == self.type:
                dev = d
                host[op.device_idx] = "cpu"
        if dev is None:
            dev = device(self.type)
        r = execute(op, tuple(host))
        for i in op.mutated_idx:
            if isinstance(args[i], Tensor) and args[i].device.type == self.type:
                self.copy_(args[i], host[i])
        if op.returns_alias and op.mutated_idx:
            return args[op.mutated_idx[0]]

        def up(x):
            if isinstance(x, Tensor) and x.device.type == "cpu":
                return self.from_tensor(x, dev)
            if isinstance(x, tuple) and hasattr(x, "_fields"):
                return type(x)(*[up(e) for e in x])
            if isinstance(x, (list, tuple)):
                return type(x)(up(e) for e in x)
            return x

        return up(r)

    def pinned_host_empty(self, nbytes: int):
        """A flat uint8 numpy array in page-locked host memory (Tensor.pin_memory), freed when
        the last view of it dies."""
        raise RuntimeError(f"{self.type} cannot pin host memory")

    def host_is_pinned(self, ptr: int) -> bool:
        """Whether the host address lies in memory from pinned_host_empty."""
        return False

    def storage_to_host(self, storage):
        """A flat uint8 numpy array with the storage's bytes (saving checkpoints)."""
        raise NotImplementedError

    def storage_from_host(self, host_bytes, dev: device):
        """A Storage on dev holding host_bytes (loading checkpoints with map_location)."""
        raise NotImplementedError


_BACKENDS: dict[str, DeviceBackend] = {}
_MISSING: dict[str, str] = {"cuda": "ember-devices"}


def register_device(backend: DeviceBackend) -> None:
    """Register a device backend under `backend.type` (what a device plugin calls)."""
    _BACKENDS[backend.type] = backend
    _KNOWN_TYPES.add(backend.type)


def get_backend(type_: str) -> DeviceBackend:
    b = _BACKENDS.get(type_)
    if b is None:
        from ._components import MissingComponentError, ensure_loaded
        ensure_loaded()
        b = _BACKENDS.get(type_)
        if b is None:
            wheel = _MISSING.get(type_)
            if wheel:
                raise MissingComponentError(
                    f"device '{type_}' needs the {wheel} component: pip install {wheel}")
            raise RuntimeError(f"no backend is registered for device type '{type_}'")
    return b


def _default_accelerator_type() -> str:
    for b in _BACKENDS.values():
        if b.is_accelerator:
            return b.type
    return "cuda"


def set_default_device(device) -> None:
    """Factory functions without device= (zeros, randn, tensor, ...) create tensors on `device`
    (None: back to cpu). Thread-local, as torch.set_default_device; a `with ember.device(...)`
    block still takes precedence.

    >>> import ember
    >>> ember.set_default_device("meta"); ember.zeros(2).device.type
    'meta'
    >>> ember.set_default_device(None); ember.get_default_device()
    device(type='cpu')
    """
    _state.state.default_device = None if device is None else _device_obj(device)


def get_default_device():
    """The device factory functions use without device=: a `with ember.device(...)` block's,
    else set_default_device's, else cpu."""
    st = _state.state
    if st.device_stack:
        return st.device_stack[-1]
    return st.default_device or _device_obj("cpu")


def _default_factory_device():
    """The default device when one was chosen (a `with device` block or set_default_device),
    else None: what tensor()/as_tensor() use for device=None."""
    st = _state.state
    return st.device_stack[-1] if st.device_stack else st.default_device


_device_obj = device
