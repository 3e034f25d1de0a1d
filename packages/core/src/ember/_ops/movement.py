"""Views and movement: shape/stride/offset arithmetic (views) and the copies that must copy.

A view op's rule returns (shape, strides, offset) computed from the input's; the dispatcher
makes a tensor sharing the storage. Rules use plain arithmetic so they run on symbolic sizes.
"""
from __future__ import annotations

import math

from .._size import normalize_dim
from ._registry import defop


def _infer_size(shape, numel, op="view"):
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for i, s in enumerate(shape):
        if s != -1:
            if isinstance(s, int) and s < 0:
                raise RuntimeError(f"invalid shape dimension {s}")
            known = known * s
    if neg:
        if known == 0 or numel % known != 0:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def view_strides(old_shape, old_stride, new_shape):
    """Strides for viewing (old_shape, old_stride) as new_shape, or None if it needs a copy.

    Walks chunks of old dims that are contiguous among themselves (PyTorch's computeStride)."""
    if math.prod(old_shape) == 0:
        from .._size import contiguous_strides
        return contiguous_strides(new_shape)
    new_stride = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = old_stride[-1] if old_stride else 1
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (old_shape[tensor_d - 1] != 1 and
                             old_stride[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_stride[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_stride[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_stride)


def _view(x, size):
    shape = _infer_size(size, x.numel())
    stride = view_strides(x._shape, x._stride, shape)
    if stride is None:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at "
                           "least one dimension spans across two contiguous subspaces). Use "
                           ".reshape(...) instead.")
    return shape, stride, x._offset


defop("view(Tensor(a) self, SymInt[] size) -> Tensor(a)", function=False, view=_view,
      tags={"view"})


def _reshape(x, shape):
    shape = _infer_size(shape, x.numel(), "reshape")
    if view_strides(x._shape, x._stride, shape) is not None:
        return x.view(shape)
    return x.clone().view(shape)


defop("reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)", decomp=_reshape)


def _permute(x, dims):
    n = x.ndim
    dims = [normalize_dim(d, n) for d in dims]
    if len(dims) != n:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {n} is not equal to len(dims) = {len(dims)}")
    if len(set(dims)) != n:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return tuple(x._shape[d] for d in dims), tuple(x._stride[d] for d in dims), x._offset


defop("permute(Tensor(a) self, int[] dims) -> Tensor(a)", view=_permute, tags={"view"})


def _transpose(x, dim0, dim1):
    n = x.ndim
    d0, d1 = normalize_dim(dim0, n), normalize_dim(dim1, n)
    shape, stride = list(x._shape), list(x._stride)
    if n:
        shape[d0], shape[d1] = shape[d1], shape[d0]
        stride[d0], stride[d1] = stride[d1], stride[d0]
    return tuple(shape), tuple(stride), x._offset


defop("transpose(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", view=_transpose,
      tags={"view"}, aliases=("swapaxes", "swapdims"))


def _t(x):
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return _transpose(x, 0, 1) if x.ndim == 2 else (x._shape, x._stride, x._offset)


defop("t(Tensor(a) self) -> Tensor(a)", view=_t, tags={"view"})


def _expand(x, size, implicit):
    size = tuple(size)
    n = len(size)
    if n < x.ndim:
        raise RuntimeError(f"expand({x.dtype}{list(x.shape)}, size={list(size)}): the number of "
                           f"sizes provided ({n}) must be greater or equal to the number of "
                           f"dimensions in the tensor ({x.ndim})")
    shape, stride = [], []
    off = n - x.ndim
    for i, s in enumerate(size):
        j = i - off
        if j < 0:
            if s == -1:
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a "
                                   f"leading, non-existing dimension {i}")
            shape.append(s)
            stride.append(0)
            continue
        cur = x._shape[j]
        if s == -1:
            s = cur
        if cur == s:
            shape.append(s)
            stride.append(x._stride[j])
        elif cur == 1:
            shape.append(s)
            stride.append(0)
        else:
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing "
                               f"size ({cur}) at non-singleton dimension {i}.  Target sizes: "
                               f"{list(size)}.  Tensor sizes: {list(x.shape)}")
    return tuple(shape), tuple(stride), x._offset


defop("expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)",
      function=False, view=_expand, tags={"view"})


def _unsqueeze(x, dim):
    d = normalize_dim(dim, x.ndim + 1)
    shape, stride = list(x._shape), list(x._stride)
    st = shape[d] * stride[d] if d < x.ndim else 1
    shape.insert(d, 1)
    stride.insert(d, st)
    return tuple(shape), tuple(stride), x._offset


defop("unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", view=_unsqueeze, tags={"view"})


def _select(x, dim, index):
    if x.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = normalize_dim(dim, x.ndim)
    size = x._shape[d]
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for dimension {d} with size {size}")
    if index < 0:
        index += size
    shape = x._shape[:d] + x._shape[d + 1:]
    stride = x._stride[:d] + x._stride[d + 1:]
    return shape, stride, x._offset + index * x._stride[d]


defop("select(Tensor(a) self, int dim, SymInt index) -> Tensor(a)", view=_select,
      tags={"view"})


def _slice(x, dim, start, end, step):
    d = normalize_dim(dim, x.ndim)
    size = x._shape[d]
    if step <= 0:
        raise ValueError("step must be greater than zero")
    start = 0 if start is None else start
    end = size if end is None else end
    if start < 0:
        start += size
    if end < 0:
        end += size
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    n = (end - start + step - 1) // step
    shape = x._shape[:d] + (n,) + x._shape[d + 1:]
    stride = x._stride[:d] + (x._stride[d] * step,) + x._stride[d + 1:]
    return shape, stride, x._offset + start * x._stride[d]


defop("slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, "
      "SymInt step=1) -> Tensor(a)", function=False, method=False, view=_slice, tags={"view"})
