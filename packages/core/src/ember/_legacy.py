"""Legacy typed constructors programs still use: `ember.FloatTensor([1, 2])`, `LongTensor(3)`.

Each is a class whose instances are plain `ember.Tensor`s of that dtype; `isinstance(x,
ember.FloatTensor)` holds for any float32 CPU tensor, as in PyTorch.
"""
from __future__ import annotations

from . import _dtype as D
from ._creation_api import legacy_new
from ._tensor import Tensor

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
           "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"]


class _LegacyMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cpu"


def _make(name: str, dtype):
    def __new__(cls, *args, **kwargs):
        return legacy_new(Tensor, args, kwargs, dtype)
    return _LegacyMeta(name, (), {"__new__": __new__, "dtype": dtype, "__module__": "ember"})


FloatTensor = _make("FloatTensor", D.float32)
DoubleTensor = _make("DoubleTensor", D.float64)
HalfTensor = _make("HalfTensor", D.float16)
BFloat16Tensor = _make("BFloat16Tensor", D.bfloat16)
LongTensor = _make("LongTensor", D.int64)
IntTensor = _make("IntTensor", D.int32)
ShortTensor = _make("ShortTensor", D.int16)
CharTensor = _make("CharTensor", D.int8)
ByteTensor = _make("ByteTensor", D.uint8)
BoolTensor = _make("BoolTensor", D.bool)
