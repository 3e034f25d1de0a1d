"""The weights-only unpickler of `ember.load`: the globals a checkpoint may name, what each
pickle opcode may touch, and the rebuild functions that check a tensor view against its record.

As PyTorch's `torch/_weights_only_unpickler.py`: globals come from an allowlist (tensor rebuild
functions, storages, dtypes, a few containers, and what `add_safe_globals` adds); REDUCE and
NEWOBJ call only allowlisted callables; BUILD sets state only on an OrderedDict or on an instance
of a class the user allowlisted (never on a dtype or another object shared by the process);
APPEND goes only to lists and SETITEM only to dicts. Nothing on the list can allocate more than
the pickle's own size says (no `range`, no `bytearray(n)`). It runs on the pure-Python unpickler,
whose memo is a dict: a huge memo index allocates nothing (the C unpickler sizes an array by it).
"""
from __future__ import annotations

import _compat_pickle
import builtins
import codecs
import collections
import pickle

from . import _dtype as D
from ._device import device as Device
from ._size import Size

__all__ = ["WeightsUnpickler", "StorageType", "LoadedStorage", "STORAGE_NAMES", "safe_table",
           "user_safe", "refused_global", "python3_name"]

user_safe: dict = {}  # "module.name" -> object, from add_safe_globals


class StorageType:
    """What a pickle's `torch.FloatStorage` (typed) or `torch.storage.UntypedStorage` names."""

    def __init__(self, dtype, untyped: bool = False):
        self.dtype, self.untyped = dtype, untyped


class LoadedStorage:
    """A storage read from the archive (only persistent_load makes these: a pickle cannot)."""

    __slots__ = ("record", "storage", "dtype", "device", "nbytes")

    def __init__(self, record, storage, dtype, device, nbytes):
        self.record, self.storage, self.dtype = record, storage, dtype
        self.device, self.nbytes = device, nbytes


# ---- rebuild functions -------------------------------------------------------------------------
def _check_view(st: LoadedStorage, dtype, offset, size, stride) -> None:
    """PyTorch's setStorage checks, at load time, naming the record."""
    where = f"ember.load: record {st.record!r}"
    if not (isinstance(size, (tuple, list)) and isinstance(stride, (tuple, list))
            and all(type(v) is int for v in (*size, *stride))):
        raise RuntimeError(f"{where}: size {size!r} and stride {stride!r} must be sequences of "
                           "ints")
    if len(size) != len(stride):
        raise RuntimeError(f"{where}: unequal size length ({len(size)}) and stride length "
                           f"({len(stride)})")
    if type(offset) is not int or offset < 0:
        raise RuntimeError(f"{where}: invalid storage offset {offset!r}")
    if any(n < 0 for n in size):
        raise RuntimeError(f"{where}: negative size in {list(size)}")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"{where}: negative strides {list(stride)} are not supported")
    if 0 in size:
        return
    end = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))  # elements
    if end * dtype.itemsize > st.nbytes:
        raise RuntimeError(f"{where}: sizes {list(size)}, strides {list(stride)}, storage offset "
                           f"{offset} and itemsize {dtype.itemsize} need {end * dtype.itemsize} "
                           f"bytes, out of bounds for its {st.nbytes} bytes")


def _tensor(storage, dtype, offset, size, stride, requires_grad):
    from ._tensor import Tensor
    if not isinstance(storage, LoadedStorage):
        raise pickle.UnpicklingError(f"ember.load: a tensor's storage must come from the "
                                     f"archive, got {type(storage).__name__}")
    _check_view(storage, dtype, offset, size, stride)
    if 0 in size and offset * dtype.itemsize > storage.nbytes:
        offset = 0  # an empty view past the end (PyTorch keeps it): numpy cannot point there
    t = Tensor._make(storage.storage, tuple(size), tuple(stride), offset, dtype, storage.device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    dtype = storage.dtype if isinstance(storage, LoadedStorage) else None
    return _tensor(storage, dtype, storage_offset, size, stride, requires_grad)


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                       dtype, metadata=None):
    """PyTorch's rebuild for dtypes without a typed storage (float8, uint16/32/64)."""
    if not isinstance(dtype, D.dtype):
        raise pickle.UnpicklingError(f"ember.load: _rebuild_tensor_v3 needs a dtype, got "
                                     f"{type(dtype).__name__}")
    return _tensor(storage, dtype, storage_offset, size, stride, requires_grad)


def _rebuild_parameter(data, requires_grad, backward_hooks=None, state=None):
    from .nn.parameter import Parameter
    return Parameter(data, requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    """A Parameter with extra Python attributes; never ones a Tensor already has (`_ag`,
    `grad`, `_shape`...): a file must not rewrite a tensor's internals."""
    p = _rebuild_parameter(data, requires_grad)
    if not state:
        return p
    if isinstance(state, tuple):
        if len(state) != 2:
            raise pickle.UnpicklingError(f"ember.load: invalid serialized state {state!r}")
        parts = [s for s in state if s]
    else:
        parts = [state]
    for part in parts:
        if not isinstance(part, dict):
            raise pickle.UnpicklingError(f"ember.load: invalid serialized state {state!r}")
        for k, v in part.items():
            if not isinstance(k, str) or hasattr(type(p), k) or k.startswith("__"):
                raise pickle.UnpicklingError(f"ember.load: a Parameter's state may not set "
                                             f"{k!r} (an attribute of the tensor itself)")
            p.__dict__[k] = v
    return p


def _bytearray(*args):
    """bytearray from a pickle: protocol 2 writes bytearray(str, 'latin-1'); bytearray(n) would
    allocate n bytes from a few bytes of pickle."""
    if args and not isinstance(args[0], (str, bytes)):
        raise pickle.UnpicklingError(f"ember.load: bytearray from {type(args[0]).__name__} is "
                                     "not allowed in a weights-only load")
    return builtins.bytearray(*args)


def _encode(obj, encoding="utf-8", errors="strict"):
    """_codecs.encode as pickles of bytes use it (str to latin-1), and no other codec."""
    if encoding not in ("latin1", "latin-1", "utf-8", "utf8") or not isinstance(obj, str):
        raise pickle.UnpicklingError(f"ember.load: _codecs.encode with {encoding!r} is not "
                                     "allowed in a weights-only load")
    return codecs.encode(obj, encoding, errors)


STORAGE_NAMES = {D.float32: "FloatStorage", D.float64: "DoubleStorage",
                  D.float16: "HalfStorage", D.bfloat16: "BFloat16Storage",
                  D.int64: "LongStorage", D.int32: "IntStorage", D.int16: "ShortStorage",
                  D.int8: "CharStorage", D.uint8: "ByteStorage", D.bool: "BoolStorage",
                  D.complex64: "ComplexFloatStorage", D.complex128: "ComplexDoubleStorage"}


def safe_table() -> dict:
    """(module, name) -> object: what a weights-only pickle may name (PyTorch's default list,
    less what ember lacks; plus frozenset, slice and defaultdict, which allocate nothing)."""
    t = {("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
         ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
         ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
         ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter_with_state,
         ("collections", "OrderedDict"): collections.OrderedDict,
         ("collections", "defaultdict"): collections.defaultdict,
         ("torch", "Size"): Size, ("torch", "device"): Device,
         ("builtins", "set"): builtins.set, ("builtins", "frozenset"): builtins.frozenset,
         ("builtins", "slice"): builtins.slice, ("builtins", "complex"): builtins.complex,
         ("builtins", "bytearray"): _bytearray, ("_codecs", "encode"): _encode,
         ("torch.storage", "UntypedStorage"): StorageType(D.uint8, untyped=True),
         ("torch", "UntypedStorage"): StorageType(D.uint8, untyped=True),
         # what ember wrote for float8 before it wrote PyTorch's v3 form: still read
         ("torch", "Float8_e4m3fnStorage"): StorageType(D.float8_e4m3fn),
         ("torch", "Float8_e5m2Storage"): StorageType(D.float8_e5m2)}
    for d, name in STORAGE_NAMES.items():
        t[("torch", name)] = StorageType(d)
    for d in D.ALL:
        t[("torch", d.name)] = d
    return t


def python3_name(module: str, name: str) -> tuple:
    """The Python 3 name of a global a protocol-2 pickle names (`__builtin__.set`), as
    pickle's fix_imports does."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


def refused_global(module: str, name: str) -> pickle.UnpicklingError:
    return pickle.UnpicklingError(
        f"Weights only load failed. In ember, `weights_only=True` is the default and only "
        f"allowlisted globals may be loaded. Unsupported global: GLOBAL {module}.{name} was "
        f"not an allowed global by default. If you trust this file, allow it with "
        f"`ember.serialization.add_safe_globals([{name}])` or load with weights_only=False "
        f"(which can run arbitrary code from the file).")


def _name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


_SETITEM_TYPES = (dict, collections.OrderedDict, collections.defaultdict, collections.Counter)
_Py = pickle._Unpickler


class WeightsUnpickler(pickle._Unpickler):
    """The pure-Python unpickler with PyTorch's weights-only restrictions on each opcode."""

    dispatch = _Py.dispatch.copy()

    def __init__(self, file, safe: dict):
        super().__init__(file, encoding="utf-8")
        self.safe = safe
        users = list(user_safe.values())
        self._callable = {id(v) for v in (*safe.values(), *users)}
        self._user_types = {id(v) for v in users if isinstance(v, type)}

    def find_class(self, module, name):
        module, name = python3_name(module, name)
        hit = self.safe.get((module, name)) or user_safe.get(f"{module}.{name}")
        if hit is None:
            raise refused_global(module, name)
        return hit

    def _check_call(self, fn, op: str) -> None:
        if id(fn) not in self._callable:
            raise pickle.UnpicklingError(f"Weights only load failed: {op} may only call "
                                         f"allowlisted globals, but got {type(fn).__name__} "
                                         f"{fn!r:.80}")

    def load_reduce(self):
        self._check_call(self.stack[-2], "REDUCE")
        _Py.load_reduce(self)

    def load_newobj(self):
        self._check_call(self.stack[-2], "NEWOBJ")
        _Py.load_newobj(self)

    def load_newobj_ex(self):
        self._check_call(self.stack[-3], "NEWOBJ_EX")
        _Py.load_newobj_ex(self)

    def load_obj(self):
        self._check_call(self.stack[0], "OBJ")
        _Py.load_obj(self)

    def load_build(self):
        t = type(self.stack[-2])
        if t is not collections.OrderedDict and id(t) not in self._user_types:
            raise pickle.UnpicklingError(
                f"Weights only load failed: BUILD (setting an object's state) is allowed only "
                f"on collections.OrderedDict and classes allowlisted with add_safe_globals, "
                f"but got {_name(t)}")
        _Py.load_build(self)

    def _target(self, op: str, obj, types) -> None:
        if type(obj) not in types:
            raise pickle.UnpicklingError(f"Weights only load failed: {op} is allowed only on "
                                         f"{' or '.join(_name(t) for t in types)}, but got "
                                         f"{_name(type(obj))}")

    def load_append(self):
        self._target("APPEND", self.stack[-2], (list,))
        _Py.load_append(self)

    def load_appends(self):
        self._target("APPENDS", self.metastack[-1][-1], (list,))
        _Py.load_appends(self)

    def load_setitem(self):
        self._target("SETITEM", self.stack[-3], _SETITEM_TYPES)
        _Py.load_setitem(self)

    def load_setitems(self):
        self._target("SETITEMS", self.metastack[-1][-1], _SETITEM_TYPES)
        _Py.load_setitems(self)

    def load_additems(self):
        self._target("ADDITEMS", self.metastack[-1][-1], (set,))
        _Py.load_additems(self)

    for _op, _fn in ((pickle.REDUCE, load_reduce), (pickle.NEWOBJ, load_newobj),
                     (pickle.NEWOBJ_EX, load_newobj_ex), (pickle.OBJ, load_obj),
                     (pickle.BUILD, load_build), (pickle.APPEND, load_append),
                     (pickle.APPENDS, load_appends), (pickle.SETITEM, load_setitem),
                     (pickle.SETITEMS, load_setitems), (pickle.ADDITEMS, load_additems)):
        dispatch[_op[0]] = _fn
    del _op, _fn
