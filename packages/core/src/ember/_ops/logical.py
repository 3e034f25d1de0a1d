"""Logical and bitwise ops, predicates (isnan, signbit, ...), masked_fill, nan_to_num, the
one-argument where, and the minimal complex accessors (real, imag, conj, angle).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._dispatch import TensorMeta
from .._tensor import Tensor
from ._registry import FUNCTIONS, METHODS, complex_vjp, defop

_F = FUNCTIONS

# ---- logical and bitwise ------------------------------------------------------------------------
for _name in ("logical_and", "logical_or", "logical_xor"):
    defop(f"{_name}(Tensor self, Tensor other) -> Tensor", promote="bool",
          pointwise=(lambda n: lambda o, x, y: getattr(o, n)(x, y))(_name))
defop("logical_not(Tensor self) -> Tensor", promote="bool",
      pointwise=lambda o, x: o.logical_not(x))
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    defop(f"{_name}(Tensor self, Tensor other) -> Tensor", supports="bi",
          pointwise=(lambda n: lambda o, x, y: getattr(o, n)(x, y))(_name))
defop("bitwise_not(Tensor self) -> Tensor", supports="bi",
      pointwise=lambda o, x: o.bitwise_not(x))
defop("bitwise_left_shift(Tensor self, Tensor other) -> Tensor", supports="i",
      pointwise=lambda o, x, y: o.lshift(x, y))
defop("bitwise_right_shift(Tensor self, Tensor other) -> Tensor", supports="i",
      pointwise=lambda o, x, y: o.rshift(x, y))

# `~x` on a float tensor is a TypeError (bitwise_not itself raises NotImplementedError)
def _invert(self):
    if self.dtype.is_floating_point or self.dtype.is_complex:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    return _F["bitwise_not"](self)


METHODS["__invert__"] = _invert

# ---- predicates ----------------------------------------------------------------------------------
for _name, _f, _sup in (
        ("isnan", lambda o, x: o.isnan(x), "bifc"),
        ("isinf", lambda o, x: o.isinf(x), "bifc"),
        ("isfinite", lambda o, x: o.isfinite(x), "bifc"),
        ("isposinf", lambda o, x: o.logical_and(o.isinf(x), o.gt(x, 0)), "bif"),
        ("isneginf", lambda o, x: o.logical_and(o.isinf(x), o.lt(x, 0)), "bif"),
        ("signbit", lambda o, x: o.signbit(x), "bif")):
    defop(f"{_name}(Tensor self) -> Tensor", promote="bool", supports=_sup, inplace=False,
          out=_name in ("isposinf", "isneginf", "signbit"), pointwise=_f, differentiable=())


def _isreal(x):
    if not x.dtype.is_complex:
        return _F["ones_like"](x, dtype=D.bool)
    return x.imag == 0


defop("isreal(Tensor self) -> Tensor", decomp=_isreal, out=False)


def _bool_out(name):
    # these refuse a non-bool out= (others cast into it)
    fn = FUNCTIONS[name]

    def f(input, *, out=None):  # noqa: A002 - PyTorch's name
        if out is not None and out.dtype is not D.bool:
            raise RuntimeError(f"{name} does not support non-boolean outputs.")
        return fn(input, out=out)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = fn.__doc__
    return f


for _name in ("isposinf", "isneginf", "signbit"):
    FUNCTIONS[_name] = _bool_out(_name)


# ---- masked_fill ---------------------------------------------------------------------------------
_C_TYPE = {D.bool: "bool", D.uint8: "unsigned char", D.int8: "signed char", D.int16: "short int",
           D.int32: "int", D.int64: "long int", D.float16: "c10::Half",
           D.bfloat16: "c10::BFloat16", D.float32: "float", D.float64: "double"}


def _check_masked_fill(common, x, mask, value):
    if mask.dtype is not D.bool:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{_C_TYPE.get(mask.dtype, mask.dtype)}")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.ndim} dimension(s).")


def _masked_fill_vjp(g, out, x, mask, value):
    gv = _F["where"](mask, g, 0.0) if isinstance(value, Tensor) else None
    return _F["where"](mask, 0.0, g), gv


defop("masked_fill(Tensor self, Tensor mask, Tensor value) -> Tensor", promote="first",
      promote_args=("self",), check=_check_masked_fill, differentiable=("self", "value"),
      pointwise=lambda o, x, mask, value: o.where(mask, value, x), vjp=_masked_fill_vjp)


# ---- nan_to_num: the CPU's numpy kernel; devices run the decomposition: the dtype's largest
# finite values stand in for missing arguments, then one pointwise pass ----------------------------
_INF = float("inf")

_nan_to_num_values = defop(
    "_nan_to_num_values(Tensor self, float nan, float posinf, float neginf) -> Tensor",
    function=False, method=False, inplace=False,
    pointwise=lambda o, x, nan, posinf, neginf: o.where(
        o.isnan(x), nan, o.where(o.eq(x, _INF), posinf, o.where(o.eq(x, -_INF), neginf, x))),
    vjp=lambda g, out, x, nan, posinf, neginf: (g * x.isfinite(),))


def _nan_to_num_decomp(x, nan, posinf, neginf):
    if x.dtype.is_complex:  # each part on its own, as numpy's and PyTorch's
        re = _nan_to_num_decomp(x.real, nan, posinf, neginf)
        im = _nan_to_num_decomp(x.imag, nan, posinf, neginf)
        return (re + im * 1j).to(x.dtype)
    if not x.dtype.is_floating_point:
        return x.clone()
    fi = D.finfo(x.dtype)
    return _nan_to_num_values(x, 0.0 if nan is None else float(nan),
                              fi.max if posinf is None else float(posinf),
                              fi.min if neginf is None else float(neginf))


def _nan_to_num(x, nan, posinf, neginf):
    if x.dtype.kind not in "fcV" and x.dtype not in (D.bfloat16.np, D.float16.np):
        return x.copy()
    dt = D._BY_NP[x.dtype]
    fi = D.finfo(dt)
    w = x.astype(np.float32) if dt.itemsize < 4 else x
    r = np.nan_to_num(w, nan=0.0 if nan is None else nan,
                      posinf=fi.max if posinf is None else posinf,
                      neginf=fi.min if neginf is None else neginf)
    return r.astype(x.dtype, copy=False)


defop("nan_to_num(Tensor self, float? nan=None, float? posinf=None, float? neginf=None) -> Tensor",
      kernels={"cpu": _nan_to_num}, decomp=_nan_to_num_decomp, inplace=True,
      meta=lambda x, nan, posinf, neginf: TensorMeta(x.shape, x.dtype),
      vjp=lambda g, out, x, nan, posinf, neginf: (g * x.isfinite(),))


# ---- where: the one-argument form and the method -------------------------------------------------
_where3 = FUNCTIONS["where"]


def where(condition, input=None, other=None, *, out=None):  # noqa: A002 - PyTorch's names
    """`where(cond, x, y)` picks x where cond, else y; `where(cond)` is nonzero(as_tuple=True).

    >>> import ember
    >>> ember.where(ember.tensor([True, False]), 1.0, 0.0)
    tensor([1., 0.])
    """
    if input is None and other is None:
        return _F["nonzero"](condition, as_tuple=True)
    return _where3(condition, input, other, out=out)


FUNCTIONS["where"] = where
METHODS["where"] = lambda self, condition, other: _where3(condition, self, other)


# ---- complex accessors: real/imag are views of the interleaved (re, im) storage ---------------
def _real(x):
    if not x.dtype.is_complex:
        return x._shape, x._stride, x._offset
    return x._shape, tuple(2 * s for s in x._stride), 2 * x._offset, x.dtype.to_real()


def _imag(x):
    if not x.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return x._shape, tuple(2 * s for s in x._stride), 2 * x._offset + 1, x.dtype.to_real()


# grads: real(x) -> g (the engine casts it to complex: g + 0j); imag(x) -> g * 1j
defop("real(Tensor(a) self) -> Tensor(a)", view=_real, tags={"view"}, method=False, out=False,
      vjp=lambda g, out, x: (g,))
defop("imag(Tensor(a) self) -> Tensor(a)", view=_imag, tags={"view"}, method=False, out=False,
      vjp=complex_vjp(lambda g, out, x: (g.to(x.dtype) * 1j,)))
Tensor.real = property(lambda self: _F["real"](self))
Tensor.imag = property(lambda self: _F["imag"](self))

defop("conj_physical(Tensor self) -> Tensor", kernels={"cpu": lambda x: np.conjugate(x)},
      meta=lambda x: TensorMeta(x.shape, x.dtype), vjp=lambda g, out, x: (g.conj(),))
defop("conj(Tensor(a) self) -> Tensor(a)", out=False,
      decomp=lambda x: _F["conj_physical"](x) if x.dtype.is_complex else x)


def _angle_dtype(dt):
    if dt.is_complex:
        return dt.to_real()
    return dt if dt.is_floating_point else D.get_default_dtype()


_angle_real = defop(
    "_angle_real(Tensor self) -> Tensor", function=False, method=False, inplace=False,
    promote="int_to_float", supports="bif",
    pointwise=lambda o, x: o.where(o.isnan(x), x, o.where(o.lt(x, 0), math.pi, 0.0)),
    vjp=lambda g, out, x: (g * 0,))


def _angle_decomp(x):
    """What devices run (the CPU has its numpy kernel): the phase of the parts for complex x,
    else pi for negatives, 0 otherwise, NaN kept (one pointwise pass)."""
    if x.dtype.is_complex:
        return _F["atan2"](x.imag, x.real)
    return _angle_real(x)


def _angle(x):
    dt = _angle_dtype(D._BY_NP[x.dtype])
    if x.dtype.kind == "c":
        return np.angle(x).astype(dt.np)
    w = x.astype(np.float32) if x.dtype.itemsize < 4 or x.dtype.kind in "biu" else x
    r = np.where(np.isnan(w), w, np.where(w < 0, np.pi, 0.0))
    return r.astype(dt.np)


defop("angle(Tensor self) -> Tensor", kernels={"cpu": _angle}, decomp=_angle_decomp,
      meta=lambda x: TensorMeta(x.shape, _angle_dtype(x.dtype)),
      vjp=complex_vjp(lambda g, out, x: (_F["zeros_like"](g),) if not x.dtype.is_complex else (
          _F["where"](x == 0, 0, g * x / (x.abs() * x.abs()) * 1j),)))

