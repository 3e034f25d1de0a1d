"""`ember.save` / `ember.load` in the zip format of `torch.save`, with a weights-only unpickler.

The archive holds `<name>/data.pkl` (a protocol-2 pickle whose tensors are persistent ids
naming storages), `<name>/data/<key>` (raw little-endian storage bytes), `<name>/version`, and
`<name>/byteorder`. Pickles name PyTorch's rebuild functions (`torch._utils._rebuild_tensor_v2`)
so either framework reads the other's files; ember writes those names without importing torch.

Loading defaults to `weights_only=True`: only an allowlist of globals may be named by the
pickle (tensors, storages, containers, dtypes, and what `add_safe_globals` adds), so loading
a file never runs code from it.
"""
from __future__ import annotations

import collections
import contextlib
import io
import os
import pickle
import struct
import uuid
import zipfile

import numpy as np

from . import _dtype as D
from ._device import device as Device
from ._size import Size

__all__ = ["save", "load", "add_safe_globals", "get_safe_globals", "clear_safe_globals",
           "safe_globals"]

_STORAGE_NAMES = {D.float32: "FloatStorage", D.float64: "DoubleStorage",
                  D.float16: "HalfStorage", D.bfloat16: "BFloat16Storage",
                  D.int64: "LongStorage", D.int32: "IntStorage", D.int16: "ShortStorage",
                  D.int8: "CharStorage", D.uint8: "ByteStorage", D.bool: "BoolStorage",
                  D.complex64: "ComplexFloatStorage", D.complex128: "ComplexDoubleStorage",
                  D.float8_e4m3fn: "Float8_e4m3fnStorage", D.float8_e5m2: "Float8_e5m2Storage"}
_STORAGE_DTYPES = {v: k for k, v in _STORAGE_NAMES.items()}
_ALIGN = 64


# ---- writing ---------------------------------------------------------------------------------
class _Global:
    """A reference to `module.name` written into the pickle without importing the module."""

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle's save_reduce insists on a callable; never called
        raise TypeError(f"{self.module}.{self.name} is a reference written into a pickle")


_REBUILD_TENSOR = _Global("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAM = _Global("torch._utils", "_rebuild_parameter")
_ORDERED_DICT = collections.OrderedDict


class _StorageRef:
    def __init__(self, key: str, dtype, numel: int, location: str):
        self.key, self.dtype, self.numel, self.location = key, dtype, numel, location


class _Pickler(pickle._Pickler):  # the pure-Python pickler: it lets us write raw GLOBALs
    dispatch = pickle._Pickler.dispatch.copy()

    def __init__(self, file, storages: dict):
        super().__init__(file, protocol=2)
        self.storages = storages  # id(Storage) -> (key, Storage, dtype)

    def _save_global_ref(self, obj: _Global):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    dispatch[_Global] = _save_global_ref

    def persistent_id(self, obj):
        if isinstance(obj, _StorageRef):
            return ("storage", _Global("torch", _STORAGE_NAMES[obj.dtype]), obj.key,
                    obj.location, obj.numel)
        return None

    def reducer_override(self, obj):
        from ._tensor import Tensor
        if not isinstance(obj, Tensor):
            return NotImplemented
        if obj.device.type == "meta":
            raise RuntimeError("ember.save: cannot save a meta tensor (it has no data)")
        st = obj._storage
        entry = self.storages.get(id(st))
        if entry is None:
            entry = (str(len(self.storages)), st, obj.dtype)
            self.storages[id(st)] = entry
        elif entry[2] is not obj.dtype:
            raise RuntimeError("ember.save: tensors viewing one storage with different dtypes "
                               "cannot be saved in this format")
        ref = _StorageRef(entry[0], obj.dtype, st.nbytes // obj.dtype.itemsize,
                          str(obj.device))
        rebuilt = (_REBUILD_TENSOR, (ref, obj._offset, tuple(obj._shape), tuple(obj._stride),
                                     obj.requires_grad and obj.is_leaf,
                                     _ORDERED_DICT()))
        if _is_parameter(obj):
            return (_REBUILD_PARAM, (_plain(obj), obj.requires_grad, _ORDERED_DICT()))
        return rebuilt


def _is_parameter(t) -> bool:
    try:
        from .nn.parameter import Parameter
    except ImportError:
        return False
    return isinstance(t, Parameter)


def _plain(t):
    from ._tensor import Tensor
    p = Tensor._make(t._storage, t._shape, t._stride, t._offset, t.dtype, t.device)
    return p


def _storage_bytes(st) -> bytes:
    if st.device.type == "cpu":
        return st.data.tobytes()
    from ._device import get_backend
    return get_backend(st.device.type).storage_to_host(st).tobytes()


def _write_aligned(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    header = 30 + len(name.encode())
    pad = (-(zf.fp.tell() + header + 4)) % _ALIGN
    info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad  # 'FB' padding, as torch's writer
    zf.writestr(info, data)


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True):
    """Save obj (tensors, state dicts, nested containers) to a path or file object.

    >>> import ember, io
    >>> buf = io.BytesIO(); ember.save({"w": ember.ones(2)}, buf); _ = buf.seek(0)
    >>> ember.load(buf)["w"].tolist()
    [1.0, 1.0]
    """
    storages: dict = {}
    body = io.BytesIO()
    _Pickler(body, storages).dump(obj)
    name = "archive"
    if isinstance(f, (str, os.PathLike)):
        name = os.path.splitext(os.path.basename(os.fspath(f)))[0] or "archive"
    with _open_for_write(f) as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
        _write_aligned(zf, f"{name}/data.pkl", body.getvalue())
        _write_aligned(zf, f"{name}/.format_version", b"1")
        _write_aligned(zf, f"{name}/.storage_alignment", str(_ALIGN).encode())
        _write_aligned(zf, f"{name}/byteorder", b"little")
        for key, st, _ in storages.values():
            _write_aligned(zf, f"{name}/data/{key}", _storage_bytes(st))
        _write_aligned(zf, f"{name}/version", b"3\n")
        _write_aligned(zf, f"{name}/.data/serialization_id", uuid.uuid4().hex.encode()[:40])


@contextlib.contextmanager
def _open_for_write(f):
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            yield fh
    else:
        yield f


# ---- reading ---------------------------------------------------------------------------------
_user_safe: dict = {}


def add_safe_globals(safe_globals: list) -> None:
    """Allow these classes/functions in weights-only loads (also `(obj, "module.name")`)."""
    for g in safe_globals:
        if isinstance(g, tuple):
            obj, qual = g
        else:
            obj, qual = g, f"{g.__module__}.{g.__qualname__}"
        _user_safe[qual] = obj
        # a PyTorch file names torch.nn.modules.linear.Linear for our ember.nn... class
        if qual.startswith("ember."):
            _user_safe["torch." + qual[len("ember."):]] = obj


def get_safe_globals() -> list:
    return list(_user_safe.values())


def clear_safe_globals() -> None:
    _user_safe.clear()


@contextlib.contextmanager
def safe_globals(globs: list):
    """Context manager: `add_safe_globals` for the duration of the block."""
    saved = dict(_user_safe)
    add_safe_globals(globs)
    try:
        yield
    finally:
        _user_safe.clear()
        _user_safe.update(saved)


class _StorageType:
    def __init__(self, dtype):
        self.dtype = dtype


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    from ._tensor import Tensor
    data, dtype, dev = storage
    t = Tensor._make(data, tuple(size), tuple(stride), storage_offset, dtype, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_parameter(data, requires_grad, backward_hooks=None, state=None):
    from .nn.parameter import Parameter
    return Parameter(data, requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    p = _rebuild_parameter(data, requires_grad)
    if state:
        p.__dict__.update(state)
    return p


def _safe_table() -> dict:
    import builtins
    import codecs
    t = {("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
         ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
         ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter_with_state,
         ("collections", "OrderedDict"): collections.OrderedDict,
         ("collections", "defaultdict"): collections.defaultdict,
         ("torch", "Size"): Size, ("torch", "device"): Device,
         ("builtins", "set"): builtins.set, ("builtins", "frozenset"): builtins.frozenset,
         ("__builtin__", "set"): builtins.set, ("__builtin__", "frozenset"): builtins.frozenset,
         ("builtins", "slice"): builtins.slice, ("builtins", "complex"): builtins.complex,
         ("builtins", "bytearray"): builtins.bytearray, ("builtins", "range"): builtins.range,
         ("_codecs", "encode"): codecs.encode}
    for name, d in _STORAGE_DTYPES.items():
        t[("torch", name)] = _StorageType(d)
    for d in D.ALL:
        t[("torch", d.name)] = d
    return t


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, zf, prefix, location, weights_only, mmap_file):
        super().__init__(file, encoding="utf-8")
        self.zf, self.prefix, self.location = zf, prefix, location
        self.weights_only = weights_only
        self.mmap_file = mmap_file
        self.loaded: dict = {}
        self.safe = _safe_table()

    def find_class(self, module, name):
        hit = self.safe.get((module, name)) or _user_safe.get(f"{module}.{name}")
        if hit is not None:
            return hit
        if not self.weights_only:
            if module.startswith("torch"):  # a PyTorch class: ember's twin at the same path
                module = "ember" + module[len("torch"):]
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"Weights only load failed. In ember, `weights_only=True` is the default and only "
            f"allowlisted globals may be loaded. Unsupported global: GLOBAL {module}.{name} was "
            f"not an allowed global by default. If you trust this file, allow it with "
            f"`ember.serialization.add_safe_globals([{name}])` or load with weights_only=False "
            f"(which can run arbitrary code from the file).")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType)):
            raise pickle.UnpicklingError(f"ember.load: unsupported persistent id {pid!r}")
        _, stype, key, location, numel = pid
        key = str(key)
        if key not in self.loaded:
            from ._tensor import Storage
            raw = self._read(f"{self.prefix}data/{key}")
            need = numel * stype.dtype.itemsize
            if raw.nbytes < need:
                raise RuntimeError(f"ember.load: storage {key} holds {raw.nbytes} bytes, "
                                   f"{need} expected: the file is truncated or corrupt")
            self.loaded[key] = Storage(raw, Device("cpu"), raw.nbytes)
        st = self.loaded[key]
        dev = _map_location(self.location, str(location))
        return (st, stype.dtype, Device("cpu")) if dev.type == "cpu" else \
            (_to_device_storage(st, dev), stype.dtype, dev)

    def _read(self, name: str) -> np.ndarray:
        try:
            info = self.zf.getinfo(name)
        except KeyError:
            raise RuntimeError(f"ember.load: the archive has no record {name!r}: the file is "
                               f"truncated or was not written by ember.save/torch.save") from None
        if self.mmap_file is not None and info.compress_type == zipfile.ZIP_STORED:
            self.mmap_file.seek(info.header_offset)
            head = self.mmap_file.read(30)
            n, m = struct.unpack("<HH", head[26:30])
            start = info.header_offset + 30 + n + m
            return np.memmap(self.mmap_file.name, np.uint8, "c", start, (info.file_size,))
        return np.frombuffer(bytearray(self.zf.read(name)), np.uint8)


def _map_location(location, saved: str) -> Device:
    if location is None:
        return Device(saved)
    if callable(location) and not isinstance(location, (str, Device)):
        out = location(None, saved)
        return Device(out) if out is not None else Device(saved)
    if isinstance(location, dict):
        return Device(location.get(saved, saved))
    return Device(location)


def _to_device_storage(st, dev):
    from ._device import get_backend
    return get_backend(dev.type).storage_from_host(st.data.reshape(-1).view(np.uint8), dev)


def load(f, map_location=None, pickle_module=None, *, weights_only: bool | None = None,
         mmap: bool | None = None, **pickle_load_args):
    """Load what `ember.save` or `torch.save` wrote. Weights-only by default: never runs code
    from the file; `map_location` moves tensors; `mmap=True` maps storages instead of reading."""
    weights_only = True if weights_only is None else weights_only
    if pickle_module is not None and weights_only:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    opened = None
    if isinstance(f, (str, os.PathLike)):
        opened = f = open(f, "rb")
    try:
        try:
            zf = zipfile.ZipFile(f)
        except zipfile.BadZipFile as e:
            raise RuntimeError(f"ember.load: not a valid checkpoint: the zip archive is "
                               f"truncated or corrupt ({e}); legacy (pre-zip) torch.save files "
                               f"are not supported") from None
        names = zf.namelist()
        pkl = next((n for n in names if n.endswith("/data.pkl") or n == "data.pkl"), None)
        if pkl is None:
            raise RuntimeError("ember.load: the archive has no data.pkl record: not a "
                               "checkpoint written by ember.save or torch.save")
        prefix = pkl[: -len("data.pkl")]
        try:
            body = zf.read(pkl)
        except (zipfile.BadZipFile, OSError) as e:
            raise RuntimeError(f"ember.load: the checkpoint is corrupt ({e})") from None
        mm = f if (mmap and hasattr(f, "name")) else None
        if mmap and mm is None:
            raise ValueError("ember.load: mmap=True needs a path or a real file object")
        up = _Unpickler(io.BytesIO(body), zf, prefix, map_location, weights_only, mm)
        try:
            return up.load()
        except (pickle.UnpicklingError, RuntimeError):
            raise
        except (EOFError, struct.error, ValueError, IndexError, KeyError, TypeError) as e:
            raise pickle.UnpicklingError(f"ember.load: the pickle in the checkpoint is corrupt "
                                         f"or tampered with ({type(e).__name__}: {e})") from None
    finally:
        if opened is not None:
            opened.close()
