"""`ember.save` / `ember.load` in the zip format of `torch.save`, with a weights-only unpickler.

The archive holds `<name>/data.pkl` (a protocol-2 pickle whose tensors are persistent ids
naming storages), `<name>/data/<key>` (raw little-endian storage bytes), `<name>/version`, and
`<name>/byteorder`. Pickles name PyTorch's rebuild functions (`torch._utils._rebuild_tensor_v2`)
so either framework reads the other's files; ember writes those names without importing torch.

Loading defaults to `weights_only=True`: only an allowlist of globals may be named by the
pickle (tensors, storages, containers, dtypes, and what `add_safe_globals` adds), so loading
a file never runs code from it (`_unpickle`). Each record is checked against what its tensors
need before it is read, and only that much is read (a record that inflates to gigabytes costs
nothing); each view is checked against its record.
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
import zlib

import numpy as np

from ._device import device as Device
from ._unpickle import (STORAGE_NAMES, LoadedStorage, StorageType, WeightsUnpickler,
                        python3_name, safe_table, user_safe)

__all__ = ["save", "load", "add_safe_globals", "get_safe_globals", "clear_safe_globals",
           "safe_globals"]

_ALIGN = 64
_CHUNK = 1 << 22  # bytes read from a compressed record at a time


# ---- writing ---------------------------------------------------------------------------------
class _Global:
    """A reference to `module.name` written into the pickle without importing the module."""

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle's save_reduce insists on a callable; never called
        raise TypeError(f"{self.module}.{self.name} is a reference written into a pickle")


_REBUILD_TENSOR = _Global("torch._utils", "_rebuild_tensor_v2")
_REBUILD_TENSOR_V3 = _Global("torch._utils", "_rebuild_tensor_v3")  # dtypes without a typed
_UNTYPED = _Global("torch.storage", "UntypedStorage")                  # storage (float8...)
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
        if not isinstance(obj, _StorageRef):
            return None
        name = STORAGE_NAMES.get(obj.dtype)
        if name is None:  # as torch: an UntypedStorage, its size in bytes
            return ("storage", _UNTYPED, obj.key, obj.location, obj.numel * obj.dtype.itemsize)
        return ("storage", _Global("torch", name), obj.key, obj.location, obj.numel)

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
        if _is_parameter(obj):
            return (_REBUILD_PARAM, (_plain(obj), obj.requires_grad, _ORDERED_DICT()))
        view = (ref, obj._offset, tuple(obj._shape), tuple(obj._stride),
                obj.requires_grad and obj.is_leaf, _ORDERED_DICT())
        if obj.dtype in STORAGE_NAMES:
            return (_REBUILD_TENSOR, view)
        return (_REBUILD_TENSOR_V3, (*view, _Global("torch", obj.dtype.name)))


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
_user_safe = user_safe  # "module.name" -> object (shared with the unpickler)


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


class _Archive:
    """persistent_load for both unpicklers: storages read from the zip, checked first."""

    def _setup(self, zf, prefix, location, mmap_file):
        self.zf, self.prefix, self.location = zf, prefix, location
        self.mmap_file = mmap_file
        self.loaded: dict = {}

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], StorageType)):
            raise pickle.UnpicklingError(f"ember.load: unsupported persistent id {pid!r:.200}")
        _, stype, key, location, numel = pid
        name = f"{self.prefix}data/{key}"
        if type(numel) is not int or numel < 0:
            raise RuntimeError(f"ember.load: record {name!r}: invalid storage size {numel!r}")
        need = numel * stype.dtype.itemsize
        st = self.loaded.get(name)
        if st is None:
            from ._tensor import Storage
            raw = self._read(name, need)
            st = self.loaded[name] = Storage(raw, Device("cpu"), raw.nbytes)
        elif st.nbytes < need:
            raise RuntimeError(f"ember.load: record {name!r} holds {st.nbytes} bytes, {need} "
                               f"expected: the file is truncated or corrupt")
        dev = _map_location(self.location, str(location))
        if dev.type != "cpu":
            st = _to_device_storage(st, dev)
        return LoadedStorage(name, st, stype.dtype, dev, need)

    def _read(self, name: str, need: int) -> np.ndarray:
        """The first `need` bytes of a record, after checking it declares that many; no more
        is read or inflated (a record may claim to inflate to gigabytes)."""
        try:
            info = self.zf.getinfo(name)
        except KeyError:
            raise RuntimeError(f"ember.load: the archive has no record {name!r}: the file is "
                               f"truncated or was not written by ember.save/torch.save") from None
        if info.file_size < need:
            raise RuntimeError(f"ember.load: record {name!r} holds {info.file_size} bytes, "
                               f"{need} expected: the file is truncated or corrupt")
        if need == 0:
            return np.empty(0, np.uint8)
        try:
            stored = info.compress_type == zipfile.ZIP_STORED
            if stored and self.mmap_file is not None:
                return self._map(name, info, need)
            if stored and hasattr(self.zf.fp, "readinto"):  # straight from the file
                out = np.empty(need, np.uint8)
                self.zf.fp.seek(_data_offset(self.zf.fp, info))
                pos = self.zf.fp.readinto(out)
            else:
                out, pos = self._inflate(info, need)
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError) as e:
            raise RuntimeError(f"ember.load: record {name!r} is corrupt ({e})") from None
        if pos < need:
            raise RuntimeError(f"ember.load: record {name!r} holds {pos} bytes, {need} expected: "
                               f"the file is truncated or corrupt")
        return out

    def _inflate(self, info, need):
        out = np.empty(need, np.uint8)
        view, pos = memoryview(out), 0
        with self.zf.open(info) as f:
            while pos < need:
                chunk = f.read(min(_CHUNK, need - pos))
                if not chunk:
                    break
                view[pos:pos + len(chunk)] = chunk
                pos += len(chunk)
        return out, pos

    def _map(self, name, info, need):
        start = _data_offset(self.mmap_file, info)
        if start + need > os.fstat(self.mmap_file.fileno()).st_size:
            raise RuntimeError(f"ember.load: record {name!r} runs past the end of the file: "
                               f"the file is truncated or corrupt")
        return np.memmap(self.mmap_file.name, np.uint8, "c", start, (need,))


def _data_offset(fp, info) -> int:
    """Where a stored record's bytes start: after its local header (name and extra field)."""
    fp.seek(info.header_offset)
    head = fp.read(30)
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header for {info.filename!r}")
    n, m = struct.unpack("<HH", head[26:30])
    return info.header_offset + 30 + n + m


class _WeightsUnpickler(_Archive, WeightsUnpickler):
    def __init__(self, file, zf, prefix, location, mmap_file):
        WeightsUnpickler.__init__(self, file, safe_table())
        self._setup(zf, prefix, location, mmap_file)


class _FullUnpickler(_Archive, pickle.Unpickler):
    """weights_only=False: any global (the file is trusted); torch.X names ember.X."""

    def __init__(self, file, zf, prefix, location, mmap_file):
        pickle.Unpickler.__init__(self, file, encoding="utf-8")
        self._setup(zf, prefix, location, mmap_file)
        self.safe = safe_table()

    def find_class(self, module, name):
        module, name = python3_name(module, name)
        hit = self.safe.get((module, name)) or _user_safe.get(f"{module}.{name}")
        if hit is not None:
            return hit
        if module.startswith("torch"):  # a PyTorch class: ember's twin at the same path
            module = "ember" + module[len("torch"):]
        return super().find_class(module, name)


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


def _pickle_stream(zf: zipfile.ZipFile, name: str):
    """data.pkl to unpickle: stored records are read whole (their size is real bytes in the
    file); compressed ones are streamed, so only what the pickle reads is inflated."""
    info = zf.getinfo(name)
    if info.compress_type == zipfile.ZIP_STORED:
        return io.BytesIO(zf.read(info))
    return zf.open(info)


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
        mm = f if (mmap and hasattr(f, "name")) else None
        if mmap and mm is None:
            raise ValueError("ember.load: mmap=True needs a path or a real file object")
        cls = _WeightsUnpickler if weights_only else _FullUnpickler
        try:
            body = _pickle_stream(zf, pkl)
            return cls(body, zf, prefix, map_location, mm).load()
        except (pickle.UnpicklingError, RuntimeError):
            raise
        except (zipfile.BadZipFile, zlib.error, OSError) as e:
            raise RuntimeError(f"ember.load: the checkpoint is corrupt ({e})") from None
        except (EOFError, struct.error, ValueError, IndexError, KeyError, TypeError,
                AttributeError) as e:
            raise pickle.UnpicklingError(f"ember.load: the pickle in the checkpoint is corrupt "
                                         f"or tampered with ({type(e).__name__}: {e})") from None
    finally:
        if opened is not None:
            opened.close()
