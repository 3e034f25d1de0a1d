"""safetensors read and write for ember tensors, through the `safetensors` package.

The package's own (Rust) serializer and parser do the format work, so malformed headers are
refused by the same code every other framework uses; this module maps dtypes (bf16 and float8
included, which `safetensors.numpy` lacks) and builds ember tensors. Needs `pip install
safetensors` (the `ember-core[safetensors]` extra).

>>> import ember, io
>>> from ember.utils.safetensors import load, save
>>> load(save({"w": ember.ones(2, dtype=ember.bfloat16)}))["w"].dtype
ember.bfloat16
"""
from __future__ import annotations

import os

import numpy as np

from .. import _dtype as D

__all__ = ["save", "load", "save_file", "load_file", "SafetensorError"]

_FILE_NAMES = {"BOOL": D.bool, "U8": D.uint8, "I8": D.int8, "I16": D.int16, "I32": D.int32,
               "I64": D.int64, "F16": D.float16, "BF16": D.bfloat16, "F32": D.float32,
               "F64": D.float64, "C64": D.complex64, "F8_E4M3": D.float8_e4m3fn,
               "F8_E5M2": D.float8_e5m2, "U16": D.uint16, "U32": D.uint32, "U64": D.uint64}


def _lib():
    try:
        import safetensors
    except ImportError:
        raise ModuleNotFoundError("ember.utils.safetensors needs the safetensors package: "
                                  "pip install 'ember-core[safetensors]'") from None
    return safetensors


class SafetensorError(Exception):
    """A file or buffer that is not valid safetensors."""


def _specs(tensors: dict, keep: list) -> dict:
    lib = _lib()
    specs = {}
    for name, t in tensors.items():
        if t.dtype is D.complex128:
            raise ValueError(f"safetensors: {name!r} has dtype complex128, which the format "
                             "cannot store")
        a = t.detach().cpu()._np
        if not a.flags.c_contiguous:
            a = a.copy(order="C")  # (np.ascontiguousarray makes a 0-dim array 1-dim)
        keep.append(a)
        specs[name] = lib.TensorSpec(dtype=t.dtype.name, shape=tuple(t.shape),
                                     data_ptr=a.ctypes.data, data_len=a.nbytes)
    return specs


def _check_values(tensors) -> None:
    """What safetensors.torch checks: a dict of tensors (its error types and wording)."""
    from .._tensor import Tensor
    if not isinstance(tensors, dict):
        raise TypeError(f"safetensors: expected a dict of tensors, got {type(tensors).__name__}")
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            raise ValueError(f"Key `{name}` is invalid, expected ember.Tensor but received "
                             f"{type(t)}")


def _check_shared(tensors: dict) -> None:
    _check_values(tensors)
    seen = {}
    for name, t in tensors.items():
        key = id(t._storage)
        if key in seen:
            raise RuntimeError(f"Some tensors share memory, this will lead to duplicate memory on "
                               f"disk and potential differences when loading them again: "
                               f"[{seen[key]!r}, {name!r}]. Clone one of them first.")
        seen[key] = name


def save(tensors: dict, metadata: dict | None = None) -> bytes:
    """The safetensors bytes of a {name: tensor} dict (tensors are copied to the host)."""
    _check_shared(tensors)
    keep: list = []
    return bytes(_lib().serialize(_specs(tensors, keep), metadata=metadata))


def save_file(tensors: dict, filename, metadata: dict | None = None) -> None:
    """Write a {name: tensor} dict to a .safetensors file."""
    _check_shared(tensors)
    keep: list = []
    _lib().serialize_file(_specs(tensors, keep), os.fspath(filename), metadata=metadata)


def load(data: bytes, device="cpu") -> dict:
    """Tensors from safetensors bytes."""
    lib = _lib()
    try:
        items = lib.deserialize(bytes(data))
    except Exception as e:  # the Rust parser's error: header, offsets or sizes are invalid
        raise SafetensorError(f"invalid safetensors data: {e}") from None
    from .._tensor import Tensor
    out = {}
    for name, spec in items:
        dt = _FILE_NAMES.get(spec["dtype"])
        if dt is None:
            raise SafetensorError(f"tensor {name!r} has dtype {spec['dtype']}, which ember "
                                  "does not support")
        arr = np.frombuffer(spec["data"], dtype=dt.np).reshape(spec["shape"])
        t = Tensor._from_np(arr.copy(), dt)
        out[name] = t if str(device) == "cpu" else t.to(device)
    return out


def load_file(filename, device="cpu") -> dict:
    """Tensors from a .safetensors file."""
    with open(filename, "rb") as f:
        return load(f.read(), device)
