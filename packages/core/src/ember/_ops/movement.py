"""Views and movement: shape/stride/offset arithmetic (views) and the copies that must copy.

A view op's rule returns (shape, strides, offset) computed from the input's; the dispatcher
makes a tensor sharing the storage. Rules use plain arithmetic so they run on symbolic sizes.
"""
from __future__ import annotations

import math
import operator
import warnings

from .. import _dtype as D
from .._dispatch import torch_name
from .._size import Size, normalize_dim
from .._size import broadcast_shapes as _broadcast_shapes
from .._tensor import Tensor
from ._registry import FUNCTIONS, METHODS, OPS, defop


def _infer_size(shape, numel, op="view"):
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
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
    if not old_shape:  # a 0-dim tensor views as any all-ones shape
        return (1,) * len(new_shape) if math.prod(new_shape) == 1 else None
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


def _back_to_shape(g, out, x, *rest):
    return (g.reshape(x.shape),)


defop("view(Tensor(a) self, SymInt[] size) -> Tensor(a)", function=False, view=_view,
      vjp=_back_to_shape, tags={"view"})


def _view_dtype(x, dtype):
    """Reinterpret the bytes: same storage, the last dim rescaled by the itemsize ratio."""
    old, new = x.dtype.itemsize, dtype.itemsize
    if old == new:
        return x._shape, x._stride, x._offset, dtype
    what = f"to view {torch_name(x.dtype)} as {torch_name(dtype)} (different element sizes)"
    if x.ndim == 0:
        raise RuntimeError(f"self.dim() cannot be 0 {what}")
    if x._stride[-1] != 1:
        raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {x._stride[-1]}")
    shape, stride = list(x._shape), list(x._stride)
    if old > new:
        r = old // new
        shape[-1] *= r
        stride = [s * r for s in stride[:-1]] + [1]
        return tuple(shape), tuple(stride), x._offset * r, dtype
    r = new // old
    if shape[-1] % r:
        raise RuntimeError(f"self.size(-1) must be divisible by {r} {what}, but got {shape[-1]}")
    for i, s in enumerate(stride[:-1]):
        if s % r:
            raise RuntimeError(f"self.stride({i}) must be divisible by {r} {what}, but got {s}")
    if x._offset % r:
        raise RuntimeError(f"self.storage_offset() must be divisible by {r} {what}, but got "
                           f"{x._offset}")
    shape[-1] //= r
    stride = [s // r for s in stride[:-1]] + [1]
    return tuple(shape), tuple(stride), x._offset // r, dtype


_view_dtype_op = defop("view.dtype(Tensor(a) self, ScalarType dtype) -> Tensor(a)",
                       function=False, method=False, view=_view_dtype, differentiable=(),
                       tags={"view"})
_view_size = METHODS["view"]


def _view_method(self, *args, **kwargs):
    """`x.view(2, 3)` / `x.view((2, 3))` / `x.view(ember.int32)` (reinterpreting the bytes)."""
    if len(args) == 1 and isinstance(args[0], D.dtype) and not kwargs:
        return _view_dtype_op(self, args[0])
    if not args and set(kwargs) == {"dtype"}:
        return _view_dtype_op(self, kwargs["dtype"])
    return _view_size(self, *args, **kwargs)


_view_method._opdef = _view_size._opdef
METHODS["view"] = _view_method
defop("view_as(Tensor(a) self, Tensor other) -> Tensor(a)", function=False,
      differentiable=("self",), decomp=lambda x, other: x.view(other.shape))


def _reshape(x, shape):
    shape = _infer_size(shape, x.numel(), "reshape")
    if view_strides(x._shape, x._stride, shape) is not None:
        return x.view(shape)
    return x.clone().view(shape)


defop("reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)", decomp=_reshape)
defop("reshape_as(Tensor(a) self, Tensor other) -> Tensor(a)", function=False,
      differentiable=("self",), decomp=lambda x, other: x.reshape(other.shape))


def _flatten(x, start_dim, end_dim):
    if x.ndim == 0:
        return x.reshape(1)
    s, e = normalize_dim(start_dim, x.ndim), normalize_dim(end_dim, x.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return x
    n = 1
    for d in x._shape[s:e + 1]:
        n = n * d
    return x.reshape(x._shape[:s] + (n,) + x._shape[e + 1:])


defop("flatten(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)", decomp=_flatten)
defop("ravel(Tensor(a) self) -> Tensor(a)", decomp=lambda x: x.reshape(-1))


def _unflatten(x, dim, sizes):
    d = normalize_dim(dim, x.ndim)
    sizes = list(sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n = x._shape[d]
    try:
        sizes = list(_infer_size(sizes, n))
    except RuntimeError:
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                           f"size of dim {dim} ({n}) in the input tensor") from None
    return x.view(x._shape[:d] + tuple(sizes) + x._shape[d + 1:])


defop("unflatten(Tensor(a) self, int dim, SymInt[] sizes) -> Tensor(a)", decomp=_unflatten)


def _squeeze(x, dim):
    n = x.ndim
    if dim is None:
        dims = set(range(n))
    elif isinstance(dim, int):
        dims = {normalize_dim(dim, n)}
    else:
        dims = {normalize_dim(d, n) for d in dim}
    keep = [i for i in range(n) if not (i in dims and x._shape[i] == 1)]
    return (tuple(x._shape[i] for i in keep), tuple(x._stride[i] for i in keep), x._offset)


defop("squeeze.dims(Tensor(a) self, int[]? dim=None) -> Tensor(a)", view=_squeeze,
      vjp=_back_to_shape, tags={"view"})


def _unsqueeze(x, dim):
    d = normalize_dim(dim, x.ndim + 1)
    shape, stride = list(x._shape), list(x._stride)
    st = shape[d] * stride[d] if d < x.ndim else 1
    shape.insert(d, 1)
    stride.insert(d, st)
    return tuple(shape), tuple(stride), x._offset


defop("unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", view=_unsqueeze,
      vjp=lambda g, out, x, dim: (g.squeeze(dim),), tags={"view"})


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


def _permute_vjp(g, out, x, dims):
    dims = [normalize_dim(d, x.ndim) for d in dims]
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return (g.permute(inv),)


defop("permute(Tensor(a) self, int[] dims) -> Tensor(a)", view=_permute, vjp=_permute_vjp,
      tags={"view"})


def _transpose(x, dim0, dim1):
    n = x.ndim
    d0, d1 = normalize_dim(dim0, n), normalize_dim(dim1, n)
    shape, stride = list(x._shape), list(x._stride)
    if n:
        shape[d0], shape[d1] = shape[d1], shape[d0]
        stride[d0], stride[d1] = stride[d1], stride[d0]
    return tuple(shape), tuple(stride), x._offset


defop("transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", view=_transpose,
      vjp=lambda g, out, x, d0, d1: (g.transpose(d0, d1),), tags={"view"},
      aliases=("swapaxes", "swapdims"))


def _t(x):
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return _transpose(x, 0, 1) if x.ndim == 2 else (x._shape, x._stride, x._offset)


defop("t(Tensor(a) self) -> Tensor(a)", view=_t, vjp=lambda g, out, x: (g.t(),), tags={"view"})


def _conj(x):
    return x.conj() if x.dtype.is_complex else x


def _adjoint(x):
    if x.ndim < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of "
                           f"matrices. Got {x.ndim}-D tensor.")
    return _conj(x.transpose(-2, -1))


defop("adjoint(Tensor(a) self) -> Tensor(a)", decomp=_adjoint)


def _prop_T(self):
    if self.ndim == 2:
        return self.t()
    if self.ndim > 2:
        warnings.warn("The use of `x.T` on tensors of dimension other than 2 to reverse their "
                      "shape is deprecated and it will throw an error in a future release. "
                      "Consider `x.mT` to transpose batches of matrices or `x.permute(*torch."
                      "arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a tensor.",
                      UserWarning, stacklevel=2)
    return self.permute(list(range(self.ndim - 1, -1, -1)))


def _prop_mT(self):
    if self.ndim < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {self.ndim}-D tensor.")
    return self.transpose(-2, -1)


def _prop_H(self):
    if self.ndim > 2 or self.ndim == 1:
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{self.ndim}-D tensor.")
    return _conj(self.t()) if self.ndim == 2 else _conj(self.alias())


def _prop_mH(self):
    if self.ndim < 2:
        raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. "
                           f"Got {self.ndim}-D tensor.")
    return _conj(self.transpose(-2, -1))


# properties, not table ops: Tensor has no op binding for attributes
Tensor.T = property(_prop_T)
Tensor.mT = property(_prop_mT)
Tensor.H = property(_prop_H)
Tensor.mH = property(_prop_mH)


def _expand(x, size, implicit):
    size = tuple(size)
    n = len(size)
    if n < x.ndim:
        raise RuntimeError(f"expand({x.dtype}{list(x.shape)}, size={list(size)}): the number of "
                           f"sizes provided ({n}) must be greater or equal to the number of "
                           f"dimensions in the tensor ({x.ndim})")
    shape, stride = [], []
    off = n - x.ndim
    for i in range(n - 1, -1, -1):  # right to left, as PyTorch reports the last bad dim
        s = size[i]
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
    return tuple(reversed(shape)), tuple(reversed(stride)), x._offset


# the engine sums a broadcast-shaped grad back to the input's shape, so expand's vjp is g itself
defop("expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)",
      function=False, view=_expand, vjp=lambda g, out, x, size, implicit: (g,), tags={"view"})
defop("expand_as(Tensor(a) self, Tensor other) -> Tensor(a)", function=False,
      differentiable=("self",), decomp=lambda x, other: x.expand(other.shape))
defop("broadcast_to(Tensor(a) self, SymInt[] size) -> Tensor(a)",
      decomp=lambda x, size: x.expand(size))


def broadcast_shapes(*shapes):
    """`ember.broadcast_shapes((2, 1), (3,))` -> ember.Size([2, 3]); ints count as 1-D shapes."""
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    out = []
    for i, s in enumerate(shapes):
        try:
            out = list(_broadcast_shapes(out, s))
        except RuntimeError:
            j = next(k for k in range(1, min(len(out), len(s)) + 1)
                     if s[-k] not in (1, out[-k]) and out[-k] != 1)
            raise RuntimeError(f"Attempting to broadcast a dimension of length {s[-j]} at {-j}! "
                               f"Mismatching argument at index {i} had {tuple(s)}; but expected "
                               f"shape should be broadcastable to {out}") from None
    return Size(out)


def _broadcast_tensors(tensors):
    shape = broadcast_shapes(*[t.shape for t in tensors])
    return tuple(t.expand(shape) for t in tensors)


defop("broadcast_tensors(Tensor[] tensors) -> Tensor[]", decomp=_broadcast_tensors)
_broadcast_tensors_list = FUNCTIONS["broadcast_tensors"]


def broadcast_tensors(*tensors):
    """`ember.broadcast_tensors(x, y, ...)`: views of all inputs expanded to one shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    return _broadcast_tensors_list(list(tensors))


FUNCTIONS["broadcast_tensors"] = broadcast_tensors
FUNCTIONS["broadcast_shapes"] = broadcast_shapes


def _select(x, dim, index):
    if x.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    index = operator.index(index)
    d = normalize_dim(dim, x.ndim)
    size = x._shape[d]
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for dimension {d} with size {size}")
    if index < 0:
        index += size
    shape = x._shape[:d] + x._shape[d + 1:]
    stride = x._stride[:d] + x._stride[d + 1:]
    return shape, stride, x._offset + index * x._stride[d]


def _zeros_like(x):
    return x.new_zeros(x.shape)


defop("select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)", view=_select,
      vjp=lambda g, out, x, dim, index: (_zeros_like(x).select_scatter(g, dim, index),),
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
      "SymInt step=1) -> Tensor(a)", function=False, method=False, view=_slice, tags={"view"},
      vjp=lambda g, out, x, dim, start, end, step: (OPS["slice_backward"](
          g, x.shape, dim, 0 if start is None else start,
          x.shape[normalize_dim(dim, x.ndim)] if end is None else end, step),))


def _narrow(x, dim, start, length):
    if x.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    start, length = operator.index(start), operator.index(length)
    d = normalize_dim(dim, x.ndim)
    size = x._shape[d]
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but "
                         f"got {start})")
    if start < 0:
        start += size
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                           f"({size}).")
    return _slice(x, d, start, start + length, 1)


def _narrow_vjp(g, out, x, dim, start, length):
    start = operator.index(start)
    start = start + x.shape[normalize_dim(dim, x.ndim)] if start < 0 else start
    return (OPS["slice_backward"](g, x.shape, dim, start, start + operator.index(length), 1),)


defop("narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)", view=_narrow,
      vjp=_narrow_vjp, tags={"view"})


# ---- splitting: tuples of narrow/select views ----------------------------------------------
def _split(x, split_size, dim):
    if isinstance(split_size, (list, tuple)):  # (an int or a symbolic size: one size)
        return _split_with_sizes(x, split_size, dim)
    if x.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = normalize_dim(dim, x.ndim)
    size = x._shape[d]
    if split_size < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got "
                           f"split_size={split_size}")
    if split_size == 0 and size != 0:
        raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension "
                           f"size of {size}")
    n = max((size + split_size - 1) // split_size, 1) if split_size else 1
    return tuple(x.narrow(d, i * split_size, min(split_size, size - i * split_size))
                 for i in range(n))


def _split_with_sizes(x, split_sizes, dim):
    d = normalize_dim(dim, x.ndim)
    size = x._shape[d]
    sizes = [operator.index(s) for s in split_sizes]
    if sum(sizes) != size or any(s < 0 for s in sizes):
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} "
                           f"(input tensor's size at dimension {d}), but got "
                           f"split_sizes={sizes}")
    out, start = [], 0
    for s in sizes:
        out.append(x.narrow(d, start, s))
        start += s
    return tuple(out)


defop("split.Tensor(Tensor self, SymInt split_size, int dim=0) -> Tensor[]", decomp=_split)
defop("split_with_sizes(Tensor self, SymInt[] split_sizes, int dim=0) -> Tensor[]",
      decomp=_split_with_sizes)


def _chunk(x, chunks, dim):
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    if x.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    size = x._shape[normalize_dim(dim, x.ndim)]
    split_size = (size + chunks - 1) // chunks
    if split_size == 0 and size == 0:
        return _split_with_sizes(x, [0] * chunks, dim)
    return _split(x, split_size, dim)


defop("chunk(Tensor self, int chunks, int dim=0) -> Tensor[]", decomp=_chunk)


def _tensor_split(x, indices_or_sections, dim):
    if x.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    d = normalize_dim(dim, x.ndim)
    size = x._shape[d]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        ios = ios.item() if ios.ndim == 0 else ios.tolist()
    if isinstance(ios, int):
        if ios <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {ios}")
        q, r = divmod(size, ios)
        sizes = [q + 1] * r + [q] * (ios - r)
        return _split_with_sizes(x, sizes, d)
    out, prev = [], 0
    for i in list(ios) + [size]:
        i = max(min(i + size if i < 0 else i, size), 0)
        out.append(x.narrow(d, min(prev, size), max(i - prev, 0)))
        prev = max(prev, i)
    return tuple(out)


defop("tensor_split(Tensor self, SymInt[] indices_or_sections, int dim=0) -> Tensor[]",
      decomp=_tensor_split)


def _dsplit_like(name, dim, min_ndim):
    def f(x, indices_or_sections):
        if x.ndim < min_ndim:
            raise RuntimeError(f"torch.{name} requires a tensor with at least {min_ndim} "
                               f"dimension, but got a tensor with {x.ndim} dimensions!")
        d = dim if x.ndim > 1 or name != "hsplit" else 0
        ios = indices_or_sections
        if isinstance(ios, int) and (ios == 0 or x.shape[d] % ios):
            raise RuntimeError(f"torch.{name} attempted to split along dimension {d}, but the "
                               f"size of the dimension {x.shape[d]} is not divisible by the "
                               f"split_size {ios}!")
        return _tensor_split(x, ios, d)
    op = defop(f"{name}(Tensor self, SymInt[] indices_or_sections) -> Tensor[]", decomp=f)

    def method(self, *indices_or_sections):
        # x.hsplit(3) is 3 sections, x.hsplit(1, 3) and x.hsplit([1, 3]) are indices
        ios = indices_or_sections
        return op(self, ios[0] if len(ios) == 1 else list(ios))
    method.__name__ = name
    METHODS[name] = method


_dsplit_like("hsplit", 1, 1)
_dsplit_like("vsplit", 0, 2)
_dsplit_like("dsplit", 2, 3)


def _unbind(x, dim):
    if x.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = normalize_dim(dim, x.ndim)
    return tuple(x.select(d, i) for i in range(x._shape[d]))


defop("unbind.int(Tensor self, int dim=0) -> Tensor[]", decomp=_unbind)


# ---- other views -------------------------------------------------------------------------------
def _diagonal(x, offset, dim1, dim2):
    n = x.ndim
    d1, d2 = normalize_dim(dim1, n), normalize_dim(dim2, n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    off = x._offset
    if offset >= 0:
        size = max(min(x._shape[d1], x._shape[d2] - offset), 0)
        off += offset * x._stride[d2] if size else 0
    else:
        size = max(min(x._shape[d1] + offset, x._shape[d2]), 0)
        off -= offset * x._stride[d1] if size else 0
    keep = [i for i in range(n) if i not in (d1, d2)]
    shape = tuple(x._shape[i] for i in keep) + (size,)
    stride = tuple(x._stride[i] for i in keep) + (x._stride[d1] + x._stride[d2],)
    return shape, stride, off


defop("diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)",
      view=_diagonal, tags={"view"},
      vjp=lambda g, out, x, offset, dim1, dim2: (
          _zeros_like(x).diagonal_scatter(g, offset, dim1, dim2),))


def _as_dims(v):
    return [v] if isinstance(v, int) else list(v)


def _movedim(x, source, destination):
    src, dst = _as_dims(source), _as_dims(destination)
    n = x.ndim
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) "
                           f"should contain the same number of dims as destination ({dst} dims)")
    src = [normalize_dim(d, n) for d in src]
    dst = [normalize_dim(d, n) for d in dst]
    for name, ds, orig in (("source", src, _as_dims(source)),
                           ("destination", dst, _as_dims(destination))):
        if len(set(ds)) != len(ds):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({orig})")
    order = [-1] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(n) if i not in src)
    order = [o if o != -1 else next(rest) for o in order]
    return x.permute(order)


defop("movedim.intlist(Tensor(a) self, int[] source, int[] destination) -> Tensor(a)",
      decomp=_movedim, aliases=("moveaxis",))


def _as_strided(x, size, stride, storage_offset):
    off = x._offset if storage_offset is None else storage_offset
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    for s in stride:
        if s < 0:
            raise RuntimeError("as_strided: Negative strides are not supported at the moment, "
                               f"got strides: {list(stride)}")
    return tuple(size), tuple(stride), off


def _as_strided_vjp(g, out, x, size, stride, storage_offset):
    """Scatter-add g back through the element positions the view reads (views may overlap);
    positions are taken relative to x's contiguous layout, as PyTorch's backward does."""
    import numpy as np
    off = x._offset if storage_offset is None else storage_offset
    pos = np.full((), off - x._offset, np.int64)
    for n, s in zip(size, stride):
        pos = pos[..., None] + np.arange(n, dtype=np.int64) * s
    idx = Tensor._from_np(pos.reshape(-1).copy())
    flat = g.new_zeros((x.numel(),)).index_put((idx,), g.reshape(-1), True)
    return (flat.view(x.shape),)


defop("as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) "
      "-> Tensor(a)", view=_as_strided, vjp=_as_strided_vjp, tags={"view"})


def _unfold(x, dimension, size, step):
    n = x.ndim
    d = normalize_dim(dimension, n) if n else 0
    length = x._shape[d] if n else 1
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is "
                           f"{size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if n == 0:
        return (size,), (1,), x._offset
    shape, stride = list(x._shape), list(x._stride)
    shape[d] = (length - size) // step + 1
    stride[d] = x._stride[d] * step
    return tuple(shape) + (size,), tuple(stride) + (x._stride[d],), x._offset


def _unfold_vjp(g, out, x, dimension, size, step):
    if x.ndim == 0:
        return (g.reshape(()),)
    import numpy as np
    d = normalize_dim(dimension, x.ndim)
    nwin = out.shape[d]
    idx = (np.arange(nwin)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    g = g.movedim(-1, d + 1).flatten(d, d + 1)  # (..., nwin * size, ...)
    return (_zeros_like(x).index_add(d, Tensor._from_np(idx.astype(np.int64)), g),)


defop("unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)",
      function=False, view=_unfold, vjp=_unfold_vjp, tags={"view"})


def _atleast(ndim):
    def one(x):
        if x.ndim >= ndim:
            return x
        if ndim == 1 or x.ndim == 0:
            return x.reshape((1,) * ndim)
        if ndim == 2 or x.ndim == 2:  # 1-D -> (1, n) [-> (1, n, 1)]; 2-D -> (m, n, 1)
            return x.unsqueeze(0) if ndim == 2 else x.unsqueeze(-1)
        return x.unsqueeze(0).unsqueeze(-1)

    def f(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], Tensor):
            return one(tensors[0])
        if len(tensors) == 1:
            tensors = tensors[0]
        return tuple(one(t) for t in tensors)
    f.__name__ = f"atleast_{ndim}d"
    f.__doc__ = f"`ember.atleast_{ndim}d(x)`: x viewed with at least {ndim} dims (or a tuple)."
    FUNCTIONS[f.__name__] = f


for _n in (1, 2, 3):
    _atleast(_n)
