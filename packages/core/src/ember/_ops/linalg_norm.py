"""Linear algebra norms: linalg.vector_norm, linalg.matrix_norm, linalg.norm, linalg.cond.

All are compositions: vector norms are the reduction family's `norm` kernel, matrix norms are
sums/maxima of absolute values or of singular values, so their gradients come for free.
"""
from __future__ import annotations

import math

from .._dispatch import torch_name
from .._size import normalize_dim
from ._registry import OPS, defop


def _vector_norm(x, ord, dim, keepdim, dtype):
    if isinstance(ord, str):
        raise TypeError("linalg_vector_norm(): argument 'ord' must be Number, not str")
    if isinstance(dim, int):
        dim = [dim]
    return OPS["norm"](x, ord, dim, keepdim, dtype=dtype)


defop("linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, "
      "ScalarType? dtype=None) -> Tensor", function=False, method=False, decomp=_vector_norm,
      tags={"reduction"})


def _matrix_dims(x, dim, name="linalg.matrix_norm"):
    if x.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if len(dim) != 2:
        raise RuntimeError(f"{name}: dim must be a 2-tuple. Got {' '.join(map(str, dim))}")
    d0, d1 = normalize_dim(dim[0], x.ndim), normalize_dim(dim[1], x.ndim)
    if d0 == d1:
        raise RuntimeError(f"{name}: dims must be different. Got ({dim[0]}, {dim[1]})")
    return d0, d1


def _empty_norm(x, d0, d1, keepdim):
    shape = [1 if d in (d0, d1) else n for d, n in enumerate(x.shape)]
    r = x.abs().new_zeros(shape)
    return r if keepdim else r.squeeze((d0, d1))


def _matrix_norm(x, ord, dim, keepdim, dtype):
    d0, d1 = _matrix_dims(x, dim)
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"linalg.matrix_norm: Expected a floating point or complex tensor as "
                           f"input. Got {torch_name(x.dtype)}")
    if ord == "fro":
        return OPS["norm"](x, 2, [d0, d1], keepdim, dtype=dtype)
    if dtype is not None:
        x = x.to(dtype)
    if x.numel() == 0 and (ord == "nuc" or ord in (1, 2, math.inf)):  # as PyTorch: no error
        return _empty_norm(x, d0, d1, keepdim)
    if ord == "nuc" or ord in (2, -2):
        s = OPS["linalg_svdvals"](x.movedim((d0, d1), (-2, -1)))                  # (..., k)
        r = s.sum(-1) if ord == "nuc" else (s.amax(-1) if ord == 2 else s.amin(-1))
        if keepdim:
            for d in sorted((d0, d1)):
                r = r.unsqueeze(d)
        return r
    if ord in (1, -1, math.inf, -math.inf):
        # ord=+-1: max/min column sum (sum over rows); ord=+-inf: max/min row sum
        sum_dim, red_dim = (d0, d1) if ord in (1, -1) else (d1, d0)
        a = x.abs().sum(sum_dim)
        red_dim -= red_dim > sum_dim  # (its index once sum_dim is gone: PyTorch's errors name it)
        r = a.amax(red_dim) if ord > 0 else a.amin(red_dim)
        if keepdim:
            for d in sorted((d0, d1)):
                r = r.unsqueeze(d)
        return r
    raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")


defop("linalg_matrix_norm(Tensor self, Scalar ord='fro', int[] dim=[-2,-1], bool keepdim=False, "
      "*, ScalarType? dtype=None) -> Tensor", function=False, method=False, decomp=_matrix_norm,
      tags={"reduction"})


def _norm(x, ord, dim, keepdim, dtype):
    if isinstance(dim, int):
        dim = [dim]
    if dim is not None and len(dim) not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got "
                           f"{list(dim)}")
    if ord is None:
        if dim is not None and len(dim) == 2:
            return _matrix_norm(x, "fro", dim, keepdim, dtype)
        return _vector_norm(x, 2, dim, keepdim, dtype)
    if dim is None:
        if x.ndim not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must "
                               f"be 1D or 2D. Got {x.ndim}D.")
        if x.ndim == 1 and not isinstance(ord, str):  # (over all dims: PyTorch's messages)
            return _vector_norm(x, ord, None, keepdim, dtype)
        dim = list(range(x.ndim))
    if len(dim) == 2:
        return _matrix_norm(x, ord, dim, keepdim, dtype)
    if isinstance(ord, str):
        return _matrix_norm(x, ord, dim, keepdim, dtype)  # raises: a matrix norm of a vector
    return _vector_norm(x, ord, dim, keepdim, dtype)


defop("linalg_norm(Tensor self, Scalar? ord=None, int[1]? dim=None, bool keepdim=False, *, "
      "ScalarType? dtype=None) -> Tensor", function=False, method=False, decomp=_norm,
      tags={"reduction"})


def _cond(x, p):
    if p is None or p in (2, -2):
        s = OPS["linalg_svdvals"](x)
        hi, lo = s.amax(-1), s.amin(-1)
        return hi / lo if p != -2 else lo / hi
    return _matrix_norm(x, p, [-2, -1], False, None) * _matrix_norm(
        OPS["linalg_inv"](x), p, [-2, -1], False, None)


defop("linalg_cond(Tensor self, Scalar? p=None) -> Tensor", function=False, method=False,
      decomp=_cond)
