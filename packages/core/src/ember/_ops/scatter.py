"""Gather and scatter along a dim: gather, scatter (src or value, reduce), scatter_add,
scatter_reduce, index_select, index_add, index_copy, index_fill (and the in-place forms).

Kernels are numpy (`ufunc.at` for the accumulating ones); vjps are written in these same ops.
"""
from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._dispatch import torch_name
from .._size import normalize_dim
from . import _index_meta as M
from ._registry import defop


def _name(npdtype) -> str:
    return torch_name(D.from_numpy_dtype(npdtype))


def _check_bounds(index, size, dim):
    bad = (index >= size) | (index < 0)  # no negative indices along dim, as PyTorch
    if bad.any():
        raise RuntimeError(f"index {index[bad].flat[0]} is out of bounds for dimension {dim} "
                           f"with size {size}")


def _along(index, d):
    """The numpy index tuple that addresses out[..., index[i, j, ...], ...] at dim d."""
    grid = list(np.indices(index.shape, sparse=True))
    grid[d] = index.astype(np.int64, copy=False)
    return tuple(grid)


# ---- gather ------------------------------------------------------------------------------------
def _gather_checks(x, d, index, op="gather"):
    if index.dtype.kind not in "iu":
        raise RuntimeError(f"{op}(): Expected dtype int64 for index")
    if index.size == 0:
        return
    if max(x.ndim, 1) != max(index.ndim, 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for i in range(index.ndim):
        if i != d and index.shape[i] > x.shape[i]:
            raise RuntimeError(f"Size does not match at dimension {i} expected index "
                               f"{list(index.shape)} to be no larger than self {list(x.shape)} "
                               f"apart from dimension {d}")
    _check_bounds(index, x.shape[d] if x.ndim else 1, d)


def _gather(x, dim, index, sparse_grad):
    d = normalize_dim(dim, x.ndim)
    _gather_checks(x, d, index)
    if x.ndim == 0:
        return x.reshape(index.shape).copy()
    return x[_along(index, d)]


defop("gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor",
      kernels={"cpu": _gather}, differentiable=("self",), meta=M.gather_meta,
      vjp=lambda g, out, x, dim, index, sg: (x.new_zeros(x.shape).scatter_add(dim, index, g),))


# ---- scatter family ------------------------------------------------------------------------------
def _scatter_checks(x, d, index, src, op):
    if index.dtype.kind not in "iu" or index.dtype.itemsize != 8:
        raise RuntimeError(f"{op}(): Expected dtype int64 for index")
    if isinstance(src, np.ndarray) and src.dtype != x.dtype:
        raise RuntimeError(f"{op}(): Expected self.dtype to be equal to src.dtype")
    if index.size == 0:
        return
    if max(x.ndim, 1) != max(index.ndim, 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    src_bad = isinstance(src, np.ndarray) and any(
        i >= src.ndim or index.shape[i] > src.shape[i] for i in range(index.ndim))
    if src_bad or any(i != d and index.shape[i] > x.shape[i] for i in range(index.ndim)):
        tail = f" and to be no larger size than src {list(src.shape)}" \
            if isinstance(src, np.ndarray) else ""
        raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self "
                           f"{list(x.shape)} apart from dimension {d}{tail}")
    _check_bounds(index, x.shape[d] if x.ndim else 1, d)


def _src_values(src, index, dtype):
    if isinstance(src, np.ndarray):
        return src[tuple(slice(0, n) for n in index.shape)] if src.ndim else src
    return np.asarray(src).astype(dtype)


_UFUNC = {"add": np.add, "sum": np.add, "multiply": np.multiply, "prod": np.multiply,
          "amax": np.maximum, "amin": np.minimum}


def _scatter(x, dim, index, src, value, reduce):
    d = normalize_dim(dim, x.ndim)
    src = src if src is not None else value
    _scatter_checks(x, d, index, src, "scatter")
    out = x.copy()
    if index.size == 0:
        return out
    view = out.reshape(1) if out.ndim == 0 else out
    idx = _along(index.reshape(1) if index.ndim == 0 else index, d)
    vals = _src_values(src, index, x.dtype)
    if reduce is None:
        view[idx] = vals
    elif reduce in ("add", "multiply"):
        _UFUNC[reduce].at(view, idx, np.broadcast_to(vals, index.shape))
    else:
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    return out


def _scatter_vjp(g, out, x, dim, index, src, value, reduce):
    if reduce is not None:
        raise NotImplementedError(f"the derivative of scatter with reduce={reduce!r} is not "
                                  "implemented")
    gsrc = g.gather(dim, index) if src is not None else None
    return g.scatter(dim, index, value=0), gsrc


defop("scatter(Tensor self, int dim, Tensor index, Tensor? src=None, *, Scalar? value=None, "
      "str? reduce=None) -> Tensor", kernels={"cpu": _scatter}, meta=M.scatter_meta, inplace=True,
      differentiable=("self", "src"), vjp=_scatter_vjp)


def _scatter_add(x, dim, index, src):
    d = normalize_dim(dim, x.ndim)
    _scatter_checks(x, d, index, src, "scatter_add")
    out = x.copy()
    if index.size:
        view = out.reshape(1) if out.ndim == 0 else out
        idx = _along(index.reshape(1) if index.ndim == 0 else index, d)
        np.add.at(view, idx, _src_values(src, index, x.dtype))
    return out


defop("scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
      kernels={"cpu": _scatter_add}, meta=M.scatter_add_meta, inplace=True,
      differentiable=("self", "src"),
      vjp=lambda g, out, x, dim, index, src: (g, g.gather(dim, index)))

_IDENTITY = {"sum": 0, "mean": 0, "prod": 1}


def _scatter_reduce(x, dim, index, src, reduce, include_self):
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    d = normalize_dim(dim, x.ndim)
    _scatter_checks(x, d, index, src, "scatter_reduce")
    out = x.copy()
    if index.size == 0:
        return out
    view = out.reshape(1) if out.ndim == 0 else out
    idx = _along(index.reshape(1) if index.ndim == 0 else index, d)
    vals = _src_values(src, index, x.dtype)
    # float16 and bfloat16 (numpy kind "V" through ml-dtypes) reduce in float32
    low = x.dtype.itemsize < 4 and (x.dtype.kind == "f" or x.dtype == D.bfloat16.np)
    work = view.astype(np.float32) if low else view
    if not include_self:
        if reduce in _IDENTITY:
            work[idx] = _IDENTITY[reduce]
        else:  # amax/amin: the first scattered value seeds the slot
            work[idx] = -np.inf if reduce == "amax" and work.dtype.kind == "f" else (
                np.inf if work.dtype.kind == "f" else (
                    np.iinfo(work.dtype).min if reduce == "amax" else np.iinfo(work.dtype).max))
    ufunc = np.add if reduce == "mean" else _UFUNC[reduce]
    ufunc.at(work, idx, vals.astype(work.dtype, copy=False))
    if reduce == "mean":
        count = np.full(work.shape, 1 if include_self else 0, np.int64)
        np.add.at(count, idx, 1)
        count = np.maximum(count, 1)
        work[...] = work // count if work.dtype.kind in "iub" else work / count
    if low:
        view[...] = work
    return out


def _scatter_reduce_vjp(g, out, x, dim, index, src, reduce, include_self):
    ones = g.new_ones(index.shape)
    hits = g.new_zeros(x.shape).scatter_add(dim, index, ones)  # values reduced into each slot
    # without include_self, self's value at a scattered slot is dropped: no gradient there
    kept = g.new_ones(x.shape) if include_self else (hits == 0).to(g.dtype)
    if reduce == "sum":
        return g * kept, g.gather(dim, index)
    if reduce == "mean":
        gx = g / (hits + kept)
        return gx * kept, gx.gather(dim, index)
    if reduce == "prod":  # assumes no zeros among the reduced values
        gr = g * out
        gx = gr / x if include_self else g * kept
        return gx, gr.gather(dim, index) / src
    # amax / amin: the gradient is shared evenly among the values equal to the result
    src_eq = (src == out.gather(dim, index)).to(g.dtype)
    self_eq = (x == out).to(g.dtype) * kept
    share = g / (self_eq.scatter_add(dim, index, src_eq)).clamp(min=1)
    return share * self_eq, share.gather(dim, index) * src_eq


defop("scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, "
      "bool include_self=True) -> Tensor", kernels={"cpu": _scatter_reduce},
      meta=M.scatter_reduce_meta,
      inplace=True, differentiable=("self", "src"), vjp=_scatter_reduce_vjp)


# ---- index_* along one dim -----------------------------------------------------------------------
def _index_vector(index, op, allow_int32=True):
    if index.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector")
    if index.dtype.kind not in "iu":
        if op == "index_fill_":  # PyTorch raises IndexError for this one
            raise IndexError(f"{op}(): Expected dtype int64 for index.")
        raise RuntimeError(f"{op}(): Expected dtype int32 or int64 for index")
    return index.reshape(-1).astype(np.int64, copy=False)


def _index_select(x, dim, index):
    d = normalize_dim(dim, x.ndim)
    idx = _index_vector(index, "index_select")
    n = x.shape[d] if x.ndim else 1
    if ((idx >= n) | (idx < 0)).any():  # no negative indices here, as PyTorch
        raise IndexError("index out of range in self")
    if x.ndim == 0:
        if idx.size != 1:
            raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got "
                               f"{idx.size} value(s)")
        return x.copy()
    return np.take(x, idx, axis=d)


defop("index_select(Tensor self, int dim, Tensor index) -> Tensor",
      kernels={"cpu": _index_select}, meta=M.index_select_meta, differentiable=("self",),
      vjp=lambda g, out, x, dim, index: (x.new_zeros(x.shape).index_add(dim, index, g),))


def _index_source_checks(x, d, idx, source, op, exc=RuntimeError, bounds=True):
    ns = source.shape[d] if source.ndim else 1
    if idx.size != ns:
        if op == "index_add_":
            raise exc(f"{op}(): Number of indices ({idx.size}) should be equal to "
                      f"source.size(dim): ({ns}), for dim: {d}")
        raise exc(f"{op}(): Number of indices ({idx.size}) should be equal to source.size(dim) "
                  f"({ns})")
    if source.dtype != x.dtype:
        raise RuntimeError(f"{op}(): self ({_name(x.dtype)}) and source ({_name(source.dtype)}) "
                           f"must have the same scalar type")
    if not bounds:
        return
    n = x.shape[d] if x.ndim else 1
    bad = (idx >= n) | (idx < 0)  # no negative indices, as PyTorch
    if bad.any():
        raise IndexError(f"{op}(): index {idx[bad][0]} is out of bounds for dimension {d} "
                         f"with size {n}")


def _index_add_bounds(x, d, idx, source, alpha, index_dtype):
    """PyTorch's index_add refuses indices outside [0, size) with the error of the path it
    takes: scatter_add's (an int64 index, alpha 1, dim first or last of a >1-d self, source of
    self's shape apart from dim), else IndexError "index out of range in self"."""
    n = x.shape[d] if x.ndim else 1
    bad = (idx >= n) | (idx < 0)
    if not bad.any():
        return
    if (x.ndim > 1 and d in (0, x.ndim - 1) and alpha == 1 and index_dtype == np.int64
            and source.ndim == x.ndim
            and all(source.shape[i] == x.shape[i] for i in range(x.ndim) if i != d)):
        raise RuntimeError(f"index {idx[bad][0]} is out of bounds for dimension {d} with size "
                           f"{n}")
    raise IndexError("index out of range in self")


def _index_add(x, dim, index, source, alpha):
    d = normalize_dim(dim, x.ndim)
    idx = _index_vector(index, "index_add_")
    _index_source_checks(x, d, idx, source, "index_add_", bounds=False)
    _index_add_bounds(x, d, idx, source, alpha, index.dtype)
    out = x.copy()
    view = np.moveaxis(out.reshape(1) if out.ndim == 0 else out, d, 0)
    src = np.moveaxis(source.reshape(1) if source.ndim == 0 else source, d, 0)
    np.add.at(view, idx, src * alpha if alpha != 1 else src)
    return out


defop("index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor",
      kernels={"cpu": _index_add}, meta=M.index_add_meta, inplace=True,
      differentiable=("self", "source"),
      vjp=lambda g, out, x, dim, index, source, alpha: (
          g, g.index_select(dim, index).reshape(source.shape) * alpha))


def _index_copy(x, dim, index, source):
    d = normalize_dim(dim, x.ndim)
    idx = _index_vector(index, "index_copy_", allow_int32=False)
    _index_source_checks(x, d, idx, source, "index_copy_", IndexError)
    out = x.copy()
    view = np.moveaxis(out.reshape(1) if out.ndim == 0 else out, d, 0)
    view[idx] = np.moveaxis(source.reshape(1) if source.ndim == 0 else source, d, 0)
    return out


defop("index_copy(Tensor self, int dim, Tensor index, Tensor source) -> Tensor",
      kernels={"cpu": _index_copy}, meta=M.index_copy_meta, inplace=True,
      differentiable=("self", "source"),
      vjp=lambda g, out, x, dim, index, source: (
          g.index_fill(dim, index, 0), g.index_select(dim, index).reshape(source.shape)))


def _index_fill(x, dim, index, value):
    d = normalize_dim(dim, x.ndim)
    idx = _index_vector(index, "index_fill_", allow_int32=False)
    n = x.shape[d] if x.ndim else 1
    bad = (idx >= n) | (idx < -n)
    if bad.any():
        raise IndexError(f"index {idx[bad][0]} is out of bounds for dimension {d} with size {n}")
    if not isinstance(value, (int, float, bool, complex)):  # a 0-dim tensor or array
        if value.ndim != 0:
            raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got "
                               f"tensor with {value.ndim} dimension(s).")
        value = value.item()
    out = x.copy()
    view = np.moveaxis(out.reshape(1) if out.ndim == 0 else out, d, 0)
    view[idx] = value
    return out


defop("index_fill.int_Scalar(Tensor self, int dim, Tensor index, Scalar value) -> Tensor",
      kernels={"cpu": _index_fill}, meta=M.index_fill_meta, inplace=True,
      differentiable=("self",),
      vjp=lambda g, out, x, dim, index, value: (g.index_fill(dim, index, 0),))
