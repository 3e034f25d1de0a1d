"""dtypes: ember.float32 and friends, PyTorch's type promotion, finfo/iinfo."""
from __future__ import annotations

import builtins

import ml_dtypes
import numpy as np

__all__ = ["dtype", "promote_types", "result_type", "can_cast", "finfo", "iinfo",
           "get_default_dtype", "set_default_dtype"]

# category ranks: bool < integral < floating < complex
_BOOL, _INT, _FLOAT, _COMPLEX = 0, 1, 2, 3


class dtype:
    """A tensor element type; `str(ember.float32) == "ember.float32"`."""

    __slots__ = ("name", "np", "itemsize", "_cat", "is_signed", "_aliases")

    def __init__(self, name: str, np_dtype, cat: int, is_signed: bool):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self._cat = cat
        self.is_signed = is_signed

    @property
    def is_floating_point(self) -> bool:
        return self._cat == _FLOAT

    @property
    def is_complex(self) -> bool:
        return self._cat == _COMPLEX

    def to_real(self) -> dtype:
        return {complex64: float32, complex128: float64}.get(self, self)

    def to_complex(self) -> dtype:
        return {float32: complex64, float64: complex128, float16: complex64,
                bfloat16: complex64}.get(self, self)

    def __repr__(self) -> str:
        return "ember." + self.name

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))


def _dtype_by_name(name: str) -> dtype:
    return _BY_NAME[name]


bool = dtype("bool", np.bool_, _BOOL, False)  # noqa: A001 - PyTorch's name
uint8 = dtype("uint8", np.uint8, _INT, False)
int8 = dtype("int8", np.int8, _INT, True)
int16 = dtype("int16", np.int16, _INT, True)
int32 = dtype("int32", np.int32, _INT, True)
int64 = dtype("int64", np.int64, _INT, True)
float16 = dtype("float16", np.float16, _FLOAT, True)
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, _FLOAT, True)
float32 = dtype("float32", np.float32, _FLOAT, True)
float64 = dtype("float64", np.float64, _FLOAT, True)
complex64 = dtype("complex64", np.complex64, _COMPLEX, True)
complex128 = dtype("complex128", np.complex128, _COMPLEX, True)
float8_e4m3fn = dtype("float8_e4m3fn", ml_dtypes.float8_e4m3fn, _FLOAT, True)
float8_e5m2 = dtype("float8_e5m2", ml_dtypes.float8_e5m2, _FLOAT, True)
# PyTorch's "limited support" unsigned types: storage, copies, casts, comparisons; no promotion
# with other integer types
uint16 = dtype("uint16", np.uint16, _INT, False)
uint32 = dtype("uint32", np.uint32, _INT, False)
uint64 = dtype("uint64", np.uint64, _INT, False)

ALL = (bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64,
       complex64, complex128, float8_e4m3fn, float8_e5m2, uint16, uint32, uint64)
_BY_NAME = {d.name: d for d in ALL}
_BY_NP = {d.np: d for d in ALL}
ALIASES = {"half": float16, "float": float32, "double": float64, "long": int64, "int": int32,
           "short": int16, "cfloat": complex64, "cdouble": complex128, "chalf": None}
_FLOAT8 = (float8_e4m3fn, float8_e5m2)
_BARE_UINT = (uint16, uint32, uint64)
_STRICT_INT_ORDER = (uint8, int8, int16, int32, int64)

_F8_NP = (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2))
_E4M3_MAX = 448.0


def np_cast(a: np.ndarray, to: dtype) -> np.ndarray:
    """a.astype(to.np) with PyTorch's float8 conversions (ml_dtypes' differ): float8_e4m3fn
    saturates out-of-range values and infinities to +-448 (nan stays nan), float8_e5m2 rounds
    as IEEE (overflow to inf), and float8 to an integer or bool goes through float32 (nan and
    inf give what float32's cast gives); nan is encoded as PyTorch does."""
    src = a.dtype
    if src in _F8_NP:
        if to.np == src:
            return a.astype(src)
        a = a.astype(np.float32)
        src = a.dtype
    if to is float8_e4m3fn and (src.kind in "fiu" or src == bfloat16.np):
        if src.itemsize < 4 and src.kind != "i":  # float16 / bfloat16: clip in float32
            a = a.astype(np.float32)
        a = np.clip(a, -_E4M3_MAX, _E4M3_MAX)
    out = a.astype(to.np)
    if to is float8_e5m2 and out.size:  # PyTorch's nan is 0x7f (ml_dtypes': 0x7e), sign kept
        bits = out.view(np.uint8)
        bits[(bits & 0x7F) > 0x7C] |= 0x03
    return out


def float8_fill_overflows(value, to: dtype) -> builtins.bool:
    """PyTorch's fill_ check for float8 scalars (tensors of more than one element): a finite
    value beyond the type's largest, or an infinity where the type has none."""
    v = float(value)
    if v != v:
        return False
    if to is float8_e4m3fn:
        return abs(v) > _E4M3_MAX
    return abs(v) != float("inf") and abs(v) > 57344.0


_default_dtype = float32


def get_default_dtype() -> dtype:
    return _default_dtype


def set_default_dtype(d: dtype) -> None:
    global _default_dtype
    if d not in (float32, float64, float16, bfloat16):
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default_dtype = d


def from_numpy_dtype(npd) -> dtype:
    try:
        return _BY_NP[np.dtype(npd)]
    except KeyError:
        raise TypeError(f"can't convert np.ndarray of type {np.dtype(npd)}. The only supported "
                        "types are: float64, float32, float16, complex64, complex128, int64, "
                        "int32, int16, int8, uint8, and bool.") from None


def _promote_pair(a: dtype, b: dtype) -> dtype:
    if a is b:
        return a
    if (a in _BARE_UINT or b in _BARE_UINT) and a._cat <= _INT and b._cat <= _INT:
        from ._dispatch import torch_name
        raise RuntimeError(f"Promotion for uint16, uint32, uint64 types is not supported, "
                           f"attempted to promote {torch_name(a)} and {torch_name(b)}")
    if a in _FLOAT8 or b in _FLOAT8:
        from ._dispatch import torch_name
        raise RuntimeError(f"Promotion for Float8 Types is not supported, attempted to promote "
                           f"{torch_name(a)} and {torch_name(b)}")
    if a._cat != b._cat:
        hi, lo = (a, b) if a._cat > b._cat else (b, a)
        if hi._cat == _COMPLEX and lo._cat == _FLOAT and lo is float64:
            return complex128
        return hi
    cat = a._cat
    if cat == _INT:
        return _BY_NP[np.promote_types(a.np, b.np)]
    if cat == _FLOAT:
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a.itemsize > b.itemsize else b
    return a if a.itemsize > b.itemsize else b  # complex




def promote_types(a: dtype, b: dtype) -> dtype:
    """The smallest dtype both can be cast to (PyTorch's table, not numpy's)."""
    return _promote_pair(a, b)


def scalar_dtype(v) -> dtype:
    """The dtype PyTorch gives a Python scalar standing alone."""
    t = type(v)
    if t is builtins.bool:
        return bool
    if t is builtins.int:
        return int64
    if t is builtins.float:
        return _default_dtype
    if t is builtins.complex:
        return complex128 if _default_dtype is float64 else complex64
    if isinstance(v, np.generic):
        return from_numpy_dtype(v.dtype)
    kind = getattr(t, "_sym_kind", None)  # the compiler's symbolic sizes (SymInt, SymFloat)
    if kind is not None:
        return {"int": int64, "float": _default_dtype, "bool": bool}[kind]
    raise TypeError(f"expected a number, got {t.__name__}")


def _combine(higher, lower):
    # PyTorch's combine_categories: a lower-priority group only wins by category.
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher._cat == _COMPLEX:
        return higher
    if lower._cat == _COMPLEX:
        return higher.to_complex() if higher._cat == _FLOAT else lower
    if higher._cat == _FLOAT:
        return higher
    if higher is bool or lower._cat == _FLOAT:
        return _promote_pair(higher, lower)
    return higher


def result_type_of(args) -> dtype:
    """PyTorch's result type over tensors, 0-dim tensors and Python scalars (weakly typed)."""
    dim = zero = wrapped = None
    for a in args:
        d = getattr(a, "dtype", None)
        if isinstance(d, dtype):
            if a.ndim == 0:
                zero = d if zero is None else _promote_pair(zero, d)
            else:
                dim = d if dim is None else _promote_pair(dim, d)
        elif a is None:
            continue
        else:
            d = scalar_dtype(a)
            if d._cat == _FLOAT:
                d = _default_dtype
            elif d._cat == _COMPLEX:
                d = _default_dtype.to_complex()
            wrapped = d if wrapped is None else _promote_pair(wrapped, d)
    return _combine(dim, _combine(zero, wrapped))


def result_type(tensor1, tensor2) -> dtype:
    """`ember.result_type(a, b)`: the dtype an arithmetic op on a and b returns."""
    return result_type_of((tensor1, tensor2))


def can_cast(from_: dtype, to: dtype) -> builtins.bool:
    """Whether PyTorch's in-place/out= casting allows from_ -> to (no category narrowing)."""
    return from_._cat <= to._cat


class finfo:
    """Machine limits for floating dtypes (`ember.finfo(ember.bfloat16).eps`)."""

    def __init__(self, type: dtype | None = None):  # noqa: A002 - PyTorch's name
        type = type or _default_dtype
        if type._cat not in (_FLOAT, _COMPLEX):
            raise TypeError(f"finfo() requires a floating point input type, got {type}")
        self.dtype = type.to_real().name
        fi = ml_dtypes.finfo(type.to_real().np)
        self.bits = fi.bits
        self.eps = float(fi.eps)
        self.max = float(fi.max)
        self.min = float(fi.min)
        self.tiny = self.smallest_normal = float(fi.smallest_normal)
        self.resolution = float(fi.resolution)

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:
    """Machine limits for integer dtypes."""

    def __init__(self, type: dtype):  # noqa: A002
        if type._cat not in (_INT, _BOOL):
            raise TypeError(f"iinfo() requires an integer input type, got {type}")
        ii = np.iinfo(type.np) if type is not bool else None
        self.dtype = type.name
        self.bits = type.itemsize * 8
        self.max = int(ii.max) if ii else 1
        self.min = int(ii.min) if ii else 0

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
