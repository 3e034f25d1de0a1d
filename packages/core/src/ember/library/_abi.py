"""The Python half of the stable C ABI (packages/stable_abi/include/ember/abi.h).

Core's native module (ember._C, packages/core/csrc/abi_table.cpp) implements the function table
and calls these helpers for what is easier in Python: codes of dtypes and devices, the argument
types of an op's schema (how its boxed stack is read), creating tensors, and registering C
kernels as ops. A C kernel becomes a Python kernel that boxes its arguments onto a stack of
64-bit slots and calls the C function (ember._C._call_kernel).
"""
from __future__ import annotations

import re

import numpy as np

from .. import _dtype as D
from .._device import device as Device
from .._ops._registry import OPS
from .._tensor import Storage, Tensor
from ._ops import define_op, set_fake, set_kernel, user_op

__all__ = ["native", "abi_version", "table_capsule"]

# dtype codes (PyTorch's ScalarType numbers, so they read familiar in a debugger)
DTYPE_CODES = {D.uint8: 0, D.int8: 1, D.int16: 2, D.int32: 3, D.int64: 4, D.float16: 5,
               D.float32: 6, D.float64: 7, D.complex64: 9, D.complex128: 10, D.bool: 11,
               D.bfloat16: 15, D.float8_e5m2: 23, D.float8_e4m3fn: 24}
_BY_CODE = {c: d for d, c in DTYPE_CODES.items()}
DEVICE_CODES = {"cpu": 0, "cuda": 1, "meta": 9}  # PyTorch's DeviceType numbers
_DEVICE_BY_CODE = {c: t for t, c in DEVICE_CODES.items()}

# argument types of the boxed stack (must match csrc/abi_table.cpp)
T_TENSOR, T_INT, T_FLOAT, T_BOOL, T_DTYPE, T_STR = 1, 2, 3, 4, 5, 6
T_INTLIST, T_FLOATLIST, T_TENSORLIST, T_SCALAR, T_DEVICE, T_BOOLLIST = 7, 8, 9, 10, 11, 12
OPTIONAL = 0x100
_TYPES = {"Tensor": T_TENSOR, "int": T_INT, "SymInt": T_INT, "float": T_FLOAT, "bool": T_BOOL,
          "ScalarType": T_DTYPE, "str": T_STR, "int[]": T_INTLIST, "SymInt[]": T_INTLIST,
          "float[]": T_FLOATLIST, "Tensor[]": T_TENSORLIST, "Scalar": T_SCALAR,
          "Device": T_DEVICE, "bool[]": T_BOOLLIST}


def native():
    """ember._C, or a clear error when core's native part is not built for this Python."""
    try:
        from .. import _C
    except ImportError as e:
        raise RuntimeError(
            "ember's stable ABI needs ember._C, ember-core's native extension, which is not "
            "available here (running from source on a Python it was not built for?): install the "
            f"ember-core wheel or build it with `bazel build //packages/core` ({e})") from None
    return _C


def table_capsule():
    """The PyCapsule "ember._C._ABI_TABLE" holding core's EmberAbiTable."""
    return native()._ABI_TABLE


def abi_version() -> tuple[int, int]:
    """(major, minor) of the ABI this core offers."""
    return tuple(native().abi_version())


# ---- called from C++ --------------------------------------------------------------------------
def dtype_code(dt) -> int:
    try:
        return DTYPE_CODES[dt]
    except (KeyError, TypeError):
        raise TypeError(f"expected an ember.dtype, got {dt!r}") from None


def dtype_of(code: int):
    d = _BY_CODE.get(code)
    if d is None:
        raise ValueError(f"unknown dtype code {code} (expected one of "
                         f"{sorted(_BY_CODE)}, from the ember_dtype_* functions)")
    return d


def itemsize(code: int) -> int:
    return dtype_of(code).itemsize


def device_code(dev) -> tuple[int, int]:
    dev = Device(dev) if not isinstance(dev, Device) else dev
    code = DEVICE_CODES.get(dev.type)
    if code is None:
        raise ValueError(f"device type '{dev.type}' has no stable ABI code")
    return code, -1 if dev.index is None else dev.index


def device_of(code: int, index: int):
    t = _DEVICE_BY_CODE.get(code)
    if t is None:
        raise ValueError(f"unknown device type code {code} (expected one of "
                         f"{sorted(_DEVICE_BY_CODE)}, from the ember_device_type_* functions)")
    return Device(t) if index < 0 or t != "cuda" else Device(t, index)


def lookup(name: str, overload: str):
    """The OpDef of "ns::name" / "aten::name" / "name" with an overload ("" = default)."""
    if name.startswith("aten::"):
        name = name[len("aten::"):]
    key = f"{name}.{overload}" if overload else name
    op = OPS.get(key)
    if op is None and overload in _TORCH_OVERLOADS:
        # ember names most ops without PyTorch's overload names: aten::add.Tensor is "add"
        op = OPS.get(name)
    if op is None:
        raise LookupError(f"No such operator {key}")
    return op


_TORCH_OVERLOADS = {"default", "Tensor", "Scalar", "self", "int", "dim", "dim_IntList"}


def spec(op) -> tuple:
    """(argument type codes, return type codes, number of required args) of an op's schema."""
    s = op.__dict__.get("_abi_spec")
    if s is None:
        args = tuple(_code(a.type, a.optional, op) for a in op.schema.args)
        rets = tuple(_code(t.rstrip("?"), t.endswith("?"), op) for t, _ in op.schema.returns)
        required = sum(1 for a in op.schema.args if not a.has_default)
        s = op._abi_spec = (args, rets, required)
    return s


def call_boxed(op, args):
    """Call op with its arguments in schema order, as the boxed stack holds them (keyword-only
    ones too: they are passed by keyword, so the op's checked binding accepts them)."""
    names = op.arg_names
    npos = sum(1 for a in op.schema.args if not a.kwonly)
    return op(*args[:npos], **dict(zip(names[npos:], args[npos:])))


def _code(typ: str, optional: bool, op) -> int:
    c = _TYPES.get(re.sub(r"\[\d+\]", "[]", typ).replace("Tensor?[]", "Tensor[]"))
    if c is None:
        c = 0  # not expressible on the boxed stack: an error if that argument is used
    return c | (OPTIONAL if optional else 0)


def empty_strided(sizes, strides, code: int, dev_type: int, dev_index: int):
    dt, dev = dtype_of(code), device_of(dev_type, dev_index)
    sizes = tuple(int(s) for s in sizes)
    if any(s < 0 for s in sizes):
        raise ValueError(f"empty_strided: negative size in {list(sizes)}")
    if strides is None:
        from .._size import contiguous_strides
        strides = contiguous_strides(sizes)
    strides = tuple(int(s) for s in strides)
    if any(s < 0 for s in strides):
        raise ValueError(f"empty_strided: negative stride in {list(strides)}")
    extent = 0 if 0 in sizes else 1 + sum((n - 1) * s for n, s in zip(sizes, strides))
    base = Tensor._empty((extent,), dt, dev)
    return Tensor._make(base._storage, sizes, strides, 0, dt, dev)


def from_buffer(raw: np.ndarray, sizes, strides, code: int):
    """A CPU tensor over external memory (raw: uint8 array whose base frees it)."""
    dt = dtype_of(code)
    flat = raw.view(dt.np)
    return Tensor._make(Storage(flat, Device("cpu"), raw.nbytes), tuple(sizes), tuple(strides),
                        0, dt, Device("cpu"))


def blob_extent(sizes, strides, code: int) -> int:
    """Bytes a from_blob tensor spans."""
    if any(s < 0 for s in sizes) or any(s < 0 for s in strides):
        raise ValueError(f"from_blob: negative size or stride ({list(sizes)}, {list(strides)})")
    n = 0 if 0 in sizes else 1 + sum((a - 1) * b for a, b in zip(sizes, strides))
    return n * dtype_of(code).itemsize


def define(ns: str, schema: str) -> None:
    define_op(f"{ns}::{schema}")


def impl(ns: str, name: str, device: str, fn: int, user_data: int) -> None:
    op = user_op(f"{ns}::{name}")
    if "tensor_kernel" not in op.tags:
        raise RuntimeError(f"{op.qualname} is not an op defined through the library API")
    args, rets, _ = spec(op)
    call = native()._call_kernel
    qual, names = op.qualname, op.arg_names

    def kernel(*a):
        return call(fn, user_data, args, rets, a, qual, names)
    kernel.__qualname__ = f"{qual}[C kernel]"
    if device == "meta":
        set_fake(op, kernel)
    else:
        set_kernel(op, None if device == "default" else device, kernel)


def register_autograd(ns: str, name: str, backward: str) -> None:
    """ns::name's derivative is the op `backward`: (grads..., args...) -> grad per Tensor arg."""
    op = user_op(f"{ns}::{name}")
    bw = user_op(backward if "::" in backward else f"{ns}::{backward}")
    ntensor = len(op.diff_idx)

    def vjp(grad, result, *args):
        grads = grad if isinstance(grad, tuple) else (grad,)
        r = call_boxed(bw, (*grads, *args))
        r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
        if len(r) != ntensor:
            raise RuntimeError(f"{bw.qualname}: returned {len(r)} gradients, {op.qualname} has "
                               f"{ntensor} Tensor arguments")
        return r
    vjp.__qualname__ = f"{op.qualname}.backward"
    op.vjp = vjp
    op.__dict__.pop("_ag_info", None)
