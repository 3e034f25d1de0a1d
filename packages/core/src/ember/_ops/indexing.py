"""Indexing: `Tensor.__getitem__`/`__setitem__`, the advanced-indexing ops `index` and
`index_put_`, and masked_select/masked_scatter, take/put, nonzero, searchsorted/bucketize.

Basic indexing (ints, slices, None, Ellipsis) composes view ops (select, slice, unsqueeze), so
its result aliases the input; tensor indices go through `index.Tensor` (a copy), as in PyTorch.
Gather/scatter and the index_* ops live in scatter.py.
"""
from __future__ import annotations

import operator
import warnings

import numpy as np

from .. import _dispatch
from .. import _dtype as D
from .._dispatch import DynamicOutputShape, TensorMeta, call, torch_name
from .._size import normalize_dim
from .._tensor import Tensor
from . import _index_meta as M
from ._registry import FUNCTIONS, METHODS, OPS, defop


# ---- index / index_put: numpy advanced indexing with PyTorch's checks and messages ------------
def _np_index_tuple(x_shape, indices, op="index"):
    """indices (arrays or None, one per leading dim; a bool mask covers mask.ndim dims) ->
    a numpy index tuple of int64 arrays and full slices, after PyTorch's checks."""
    out, dim = [], 0
    for i in indices:
        if i is None:
            out.append(slice(None))
            dim += 1
            continue
        i = np.asarray(i)
        if i.dtype in (np.bool_, np.uint8):
            if i.dtype == np.uint8:
                warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a "
                              "dtype torch.bool instead.", UserWarning, stacklevel=4)
            k = i.ndim
            for j in range(k):
                if dim + j >= len(x_shape) or i.shape[j] != x_shape[dim + j]:
                    size = list(x_shape[dim:dim + k])
                    raise IndexError(f"The shape of the mask {list(i.shape)} at index {j} does "
                                     f"not match the shape of the indexed tensor {size} at "
                                     f"index {dim + j}")
            out.extend(np.nonzero(i))
            dim += k
            continue
        if i.dtype.kind not in "iu":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if dim >= len(x_shape):
            raise IndexError(f"too many indices for tensor of dimension {len(x_shape)}")
        size = x_shape[dim]
        bad = (i >= size) | (i < -size)
        if bad.any():
            raise IndexError(f"index {i[bad].flat[0]} is out of bounds for dimension {dim} with "
                             f"size {size}")
        out.append(i.astype(np.int64, copy=False))
        dim += 1
    if dim > len(x_shape):
        raise IndexError(f"too many indices for tensor of dimension {len(x_shape)}")
    arrays = [a for a in out if not isinstance(a, slice)]
    try:
        np.broadcast_shapes(*[a.shape for a in arrays])
    except ValueError:
        shapes = ", ".join(str(list(a.shape)) for a in arrays)
        raise IndexError(f"shape mismatch: indexing tensors could not be broadcast together "
                         f"with shapes {shapes}") from None
    return tuple(out)


def _index_shape(x_shape, indices):
    """The shape of x[indices] for integer index tensors (numpy's rule: adjacent advanced
    indices keep their place, separated ones go first). Works on symbolic sizes."""
    adv, shapes, dims = [], [], list(x_shape)
    for d, i in enumerate(indices):
        if i is not None:
            if i.dtype in (D.bool, D.uint8):
                raise DynamicOutputShape("index with a mask has a data-dependent shape")
            adv.append(d)
            shapes.append(tuple(i.shape))
    from .._size import broadcast_shapes
    b = tuple(broadcast_shapes(*shapes))
    rest_before = [dims[d] for d in range(len(dims)) if d not in adv and d < adv[0]]
    rest_after = [dims[d] for d in range(len(dims)) if d not in adv and d > adv[0]]
    if adv[-1] - adv[0] + 1 == len(adv):
        return tuple(rest_before) + b + tuple(rest_after)
    return b + tuple(rest_before) + tuple(rest_after)


def _index_kernel(x, indices):
    return x[_np_index_tuple(x.shape, indices)]


defop("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor", function=False, method=False,
      kernels={"cpu": _index_kernel}, differentiable=("self",),
      meta=lambda x, indices: M.index_meta(x, indices, _index_shape),
      # x only through new_zeros/shape: autograd keeps its geometry, not its data (PyTorch
      # saves sizes too), so `y[idx] += 1` may write y in place afterwards
      vjp=lambda g, out, x, indices: (x.new_zeros(x.shape).index_put(indices, g, True),))


def _index_put_into(x, indices, values, accumulate):
    """Write values at x[indices] (x is a numpy view of the destination's storage)."""
    if x.dtype != values.dtype:
        src, dst = D.from_numpy_dtype(values.dtype), D.from_numpy_dtype(x.dtype)
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{torch_name(dst)} for the destination and {torch_name(src)} for "
                           f"the source.")
    idx = _np_index_tuple(x.shape, indices, "index_put")
    target = np.empty(x.shape, np.bool_)[idx].shape  # cheap: the indexed shape
    try:
        if np.broadcast_shapes(values.shape, target) != target:
            raise ValueError
    except ValueError:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot "
                           f"be broadcast to indexing result of shape {list(target)}") from None
    if accumulate:
        if x.dtype.kind == "f" and x.dtype.itemsize < 4:  # fp16/bf16: accumulate in fp32
            acc = x.astype(np.float32)
            np.add.at(acc, idx, values.astype(np.float32))
            x[...] = acc
        else:
            np.add.at(x, idx, values)
    else:
        x[idx] = values
    return x


def _index_put(x, indices, values, accumulate):
    return _index_put_into(x.copy(), indices, values, accumulate)


def _index_put_vjp(g, out, x, indices, values, accumulate):
    gx = g if accumulate else g.index_put(indices, g.new_zeros(()), False)
    return gx, OPS["index.Tensor"](g, indices)


defop("index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor",
      kernels={"cpu": _index_put},
      meta=lambda x, i, v, acc: M.index_put_meta(x, i, v, acc, _index_shape),
      differentiable=("self", "values"), vjp=_index_put_vjp)
defop("index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False) -> "
      "Tensor(a!)", function=True, kernels={"cpu": _index_put_into},
      meta=lambda x, i, v, acc: M.index_put_meta(x, i, v, acc, _index_shape), tags={"inplace"},
      differentiable=("self", "values"), vjp=_index_put_vjp)


# ---- __getitem__ / __setitem__ ---------------------------------------------------------------
_BAD_INDEX = ("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
              "are valid indices (got {})")


def _to_index_tensor(seq, device):
    from .._creation_api import tensor
    t = tensor(seq, device=device)
    if t.numel() == 0 and t.dtype is not D.bool:
        t = t.to(D.int64)
    return t


def _normalize(index, device) -> list:
    """An index expression -> a list of int | slice | None | Ellipsis | bool | Tensor."""
    if isinstance(index, tuple):
        items = list(index)
    elif isinstance(index, list) and any(isinstance(i, (slice, type(None), type(...), Tensor,
                                                        list, tuple)) for i in index):
        warnings.warn("Using a non-tuple sequence for multidimensional indexing is deprecated "
                      "and will be changed in pytorch 2.9; use x[tuple(seq)] instead of x[seq].",
                      UserWarning, stacklevel=3)
        items = list(index)
    else:
        items = [index]
    out = []
    for it in items:
        if it is None or it is Ellipsis or isinstance(it, slice):
            pass
        elif isinstance(it, (bool, np.bool_)):  # indexes like a 0-dim bool tensor (a copy)
            it = Tensor._from_np(np.array(bool(it)))
        elif isinstance(it, Tensor):
            if it.ndim == 0 and not (it.dtype.is_floating_point or it.dtype.is_complex
                                     or it.dtype in (D.bool, D.uint8)):
                it = int(it.item())  # a 0-dim integer tensor indexes like an int (a view)
        elif isinstance(it, (list, tuple, np.ndarray)):
            it = _to_index_tensor(it, device)
        elif isinstance(it, range):  # a sequence of ints, as a list (PyTorch too)
            it = _to_index_tensor(list(it), device)
        elif isinstance(it, (int, np.integer)):
            it = operator.index(it)
        else:
            raise IndexError(_BAD_INDEX.format(type(it).__name__))
        out.append(it)
    return out


def _consumed(it) -> int:
    if isinstance(it, Tensor):
        return it.ndim if it.dtype in (D.bool, D.uint8) else 1
    if it is None or it is Ellipsis:
        return 0
    return 1


def _slice_bounds(s: slice):
    def idx(v):
        return None if v is None else operator.index(v)
    return idx(s.start), idx(s.stop), 1 if s.step is None else idx(s.step)


def _apply_basic(x: Tensor, index):
    """Apply the basic part of an index through view ops -> (view, advanced indices by dim)."""
    items = _normalize(index, x.device)
    used = sum(_consumed(i) for i in items)
    if used > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    result, dim, adv, seen_ellipsis = x, 0, {}, False
    for it in items:
        if it is Ellipsis:
            if not seen_ellipsis:
                dim += x.ndim - used
            seen_ellipsis = True
        elif it is None:
            result = result.unsqueeze(dim)
            dim += 1
        elif isinstance(it, int):
            result = result.select(dim, it)
        elif isinstance(it, slice):
            start, stop, step = _slice_bounds(it)
            if (start, stop, step) != (None, None, 1):  # (the native view path's entry)
                result = _dispatch.call_entry(_SLICE, (result, dim, start, stop, step))
            dim += 1
        else:  # a Tensor
            if it.ndim == 0:  # a 0-dim bool (or byte) tensor: a new dim, kept or emptied
                result = result.unsqueeze(dim)
                it = it.reshape(1)
            adv[dim] = it
            dim += _consumed(it)
    return result, adv


def _adv_list(adv):
    """{dim: tensor} -> the Tensor?[] list of index.Tensor (None for dims not indexed); a mask
    spanning k dims stands for k of them."""
    out, d = [], 0
    for dim in sorted(adv):
        out.extend([None] * (dim - d))
        out.append(adv[dim])
        d = dim + _consumed(adv[dim])
    return out


_BASIC = (int, slice, type(None), type(Ellipsis))


def _basic_view(x: Tensor, index):
    """x[index] for an int, a slice or a tuple of ints, slices, None and at most one Ellipsis
    that fits x's dims (the common case, without _apply_basic's normalization), else None."""
    items = index if type(index) is tuple else (index,)
    used, ellipsis = 0, False
    for it in items:
        t = type(it)
        if t is int or t is slice:
            used += 1
        elif it is Ellipsis:
            if ellipsis:
                return None
            ellipsis = True
        elif it is not None:
            return None
    n = x.ndim
    if used > n:
        return None   # (the general path raises PyTorch's error)
    result, dim = x, 0
    for it in items:
        t = type(it)
        if t is int:
            result = result.select(dim, it)
        elif t is slice:
            if it.step is not None or it.start is not None or it.stop is not None:
                start, stop, step = _slice_bounds(it)
                result = _dispatch.call_entry(_SLICE, (result, dim, start, stop, step))
            dim += 1
        elif it is None:
            result = result.unsqueeze(dim)
            dim += 1
        else:
            dim += n - used
    return result


def getitem(self: Tensor, index) -> Tensor:
    """`x[index]`: basic indices give a view, tensor indices a copy (PyTorch/numpy rules)."""
    t = type(index)
    if t is int or t is slice or t is tuple:
        result = _basic_view(self, index)
        if result is not None:
            return _dispatch.call_entry(_ALIAS, (result,)) if result is self else result
    result, adv = _apply_basic(self, index)
    if adv:
        return _dispatch.call_entry(OPS["index.Tensor"], (result, _adv_list(adv)))
    return _dispatch.call_entry(_ALIAS, (result,)) if result is self else result


def _value_tensor(value, like: Tensor) -> Tensor:
    if isinstance(value, Tensor):
        v = value
    else:
        from .._creation_api import tensor
        v = tensor(value, device=like.device)
    # PyTorch drops the value's leading size-1 dims, so x[0] = ones(1, n) works
    while v.ndim > 0 and v.shape[0] == 1:
        v = v.squeeze(0)
    return v


def setitem(self: Tensor, index, value) -> None:
    """`x[index] = value`: writes through views with copy_/fill_, or index_put_ for tensor
    indices; either way an in-place op the dispatcher (and autograd) sees."""
    result, adv = _apply_basic(self, index)
    if not adv:
        if isinstance(value, Tensor) or not isinstance(value, (int, float, bool, complex)):
            result.copy_(_value_tensor(value, result))
        else:
            result.fill_(value)
        return
    if isinstance(value, Tensor):  # PyTorch casts Python values, not tensors, here
        v = _value_tensor(value, result)
    else:
        from .._creation_api import tensor
        v = _value_tensor(tensor(value, dtype=result.dtype, device=result.device), result)
    call(OPS["index_put_"], (result, _adv_list(adv), v, False))


_SLICE, _ALIAS = OPS["slice.Tensor"], OPS["alias"]
METHODS["__getitem__"] = getitem
METHODS["__setitem__"] = setitem


# ---- masks -------------------------------------------------------------------------------------
def _check_mask(mask, op):
    if mask.dtype not in (np.bool_, np.uint8):
        raise RuntimeError(f"{op}: expected BoolTensor for mask")
    return mask.astype(np.bool_, copy=False)


def _masked_select(x, mask):
    mask = _check_mask(mask, "masked_select")
    from .._size import broadcast_shapes
    broadcast_shapes(mask.shape, x.shape)  # PyTorch's RuntimeError (the mask is "tensor a")
    x, mask = np.broadcast_arrays(x, mask)
    return x[mask]


def _masked_select_vjp(g, out, x, mask):
    from .._size import broadcast_shapes
    shape = broadcast_shapes(x.shape, mask.shape)
    return (g.new_zeros(shape).masked_scatter(mask, g),)


defop("masked_select(Tensor self, Tensor mask) -> Tensor", kernels={"cpu": _masked_select},
      differentiable=("self",), vjp=_masked_select_vjp)


def _masked_scatter(x, mask, source):
    mask = _check_mask(mask, "masked_scatter_")
    if x.dtype != source.dtype:
        raise RuntimeError(f"masked_scatter_: expected self and source to have same dtypes but "
                           f"got {torch_name(D.from_numpy_dtype(x.dtype))} and "
                           f"{torch_name(D.from_numpy_dtype(source.dtype))}")
    out = x.copy()
    mask = np.broadcast_to(mask, x.shape)
    n = int(mask.sum())
    if n > source.size:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    out[mask] = source.reshape(-1)[:n]
    return out


def _masked_scatter_vjp(g, out, x, mask, source):
    picked = g.masked_select(mask)  # (n,)
    rest = g.new_zeros((source.numel() - picked.numel(),))
    gs = FUNCTIONS["cat"]([picked, rest]).reshape(source.shape)
    return g.masked_fill(mask, 0), gs


def _masked_scatter_meta(x, mask, source):
    if mask.dtype not in (D.bool, D.uint8):
        raise RuntimeError("masked_scatter_: expected BoolTensor for mask")
    if x.dtype is not source.dtype:
        raise RuntimeError(f"masked_scatter_: expected self and source to have same dtypes but "
                           f"got {torch_name(x.dtype)} and {torch_name(source.dtype)}")
    return TensorMeta(x.shape, x.dtype)


defop("masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor", inplace=True,
      kernels={"cpu": _masked_scatter}, meta=_masked_scatter_meta,
      differentiable=("self", "source"), vjp=_masked_scatter_vjp)


# ---- take / put ---------------------------------------------------------------------------------
def _flat_index(index, n):
    if index.dtype.kind not in "iu":
        raise RuntimeError(f"take(): Expected a long tensor for index, but got "
                           f"{torch_name(D.from_numpy_dtype(index.dtype))}")
    bad = (index >= n) | (index < -n)
    if bad.any():
        raise IndexError(f"out of range: tried to access index {index[bad].flat[0]} on a tensor "
                         f"of {n} elements.")
    return index.astype(np.int64, copy=False)


defop("take(Tensor self, Tensor index) -> Tensor", differentiable=("self",),
      kernels={"cpu": lambda x, index: x.reshape(-1)[_flat_index(index, x.size)]},
      meta=M.take_meta, vjp=lambda g, out, x, index: (x.new_zeros(x.shape).put(index, g, True),))


def _put(x, index, source, accumulate):
    out = x.copy()
    flat = out.reshape(-1)  # a view: out is contiguous
    if index.size != source.size:
        raise IndexError(f"put_(): Expected source and index to have the same number of "
                           f"elements, but got source.numel() = {source.size}, index.numel() = "
                           f"{index.size}")
    idx = _flat_index(index, x.size).reshape(-1)
    if accumulate:
        np.add.at(flat, idx, source.reshape(-1))
    else:
        flat[idx] = source.reshape(-1)
    return out


def _put_vjp(g, out, x, index, source, accumulate):
    gx = g if accumulate else g.put(index, g.new_zeros(index.shape), False)
    return gx, g.take(index).reshape(source.shape)


defop("put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor",
      inplace=True, kernels={"cpu": _put}, meta=M.put_meta,
      differentiable=("self", "source"), vjp=_put_vjp)


def _take_along_dim(x, indices, dim):
    if dim is None:
        return x.reshape(-1).gather(0, indices.reshape(-1))
    d = normalize_dim(dim, x.ndim)
    if x.ndim != indices.ndim:
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same "
                           "number of dimensions, but got " f"{x.ndim} dimensions for input, and "
                           f"{indices.ndim} dimensions for indices")
    from .._size import broadcast_shapes
    xs, js = list(x.shape), list(indices.shape)
    xs[d] = js[d] = 1
    b = list(broadcast_shapes(xs, js))
    xb = b[:d] + [x.shape[d]] + b[d + 1:]
    ib = b[:d] + [indices.shape[d]] + b[d + 1:]
    if x.shape[d]:  # PyTorch 2.13 reads indices along dim modulo its size (gather would refuse)
        indices = indices.remainder(x.shape[d])
    return x.expand(xb).gather(d, indices.expand(ib))


defop("take_along_dim(Tensor self, Tensor indices, int? dim=None) -> Tensor",
      decomp=_take_along_dim, differentiable=("self",))


# ---- nonzero, searchsorted ----------------------------------------------------------------------
defop("nonzero(Tensor self) -> Tensor", function=False, method=False, differentiable=(),
      kernels={"cpu": lambda x: np.argwhere(x).astype(np.int64)})


def nonzero(input: Tensor, *, out=None, as_tuple: bool = False):  # noqa: A002
    """`ember.nonzero(x)`: (n, ndim) indices of nonzero elements; as_tuple: one 1-D per dim."""
    r = call(OPS["nonzero"], (input,), out)
    if not as_tuple:
        return r
    if input.ndim == 0:  # one index per hit, all 0
        return (r.new_zeros((r.shape[0],)),)
    return tuple(r[:, i].contiguous() for i in range(input.ndim))


def _nonzero_method(self, *, as_tuple=False):
    return nonzero(self, as_tuple=as_tuple)


FUNCTIONS["nonzero"] = nonzero
METHODS["nonzero"] = _nonzero_method
defop("argwhere(Tensor self) -> Tensor", decomp=lambda x: nonzero(x), differentiable=())


def _search_checks(seq_shape, val_shape, right, side):
    """searchsorted's argument checks (shapes and flags): the kernel's and the meta's."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
    if len(seq_shape) > 1 and tuple(seq_shape[:-1]) != tuple(val_shape[:-1]):
        raise RuntimeError(f"torch.searchsorted(): boundaries tensor should be 1 dimension or "
                           f"the first N-1 dimensions of boundaries tensor and input value "
                           f"tensor must match, but we got boundaries tensor "
                           f"{list(seq_shape)} and input value tensor {list(val_shape)}")


def _search_meta(seq, x, i32, right=False, side=None, sorter=None):
    _search_checks(tuple(seq.shape), tuple(x.shape), right, side)
    return TensorMeta(tuple(x.shape), D.int32 if i32 else D.int64)


def _bucketize_meta(x, b, i32, right):
    if b.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({b.ndim})")
    return TensorMeta(tuple(x.shape), D.int32 if i32 else D.int64)


def _searchsorted(seq, values, out_int32, right, side, sorter):
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        right = side == "right"
    side = "right" if right else "left"
    if sorter is not None:
        seq = np.take_along_axis(seq, sorter.astype(np.int64), -1)
    scalar = not isinstance(values, np.ndarray)
    vals = np.asarray(values)
    if seq.ndim == 1:
        r = np.searchsorted(seq, vals, side)
    else:
        if seq.shape[:-1] != vals.shape[:-1]:
            raise RuntimeError(f"torch.searchsorted(): boundaries tensor should be 1 dimension or "
                               f"the first N-1 dimensions of boundaries tensor and input value "
                               f"tensor must match, but we got boundaries tensor "
                               f"{list(seq.shape)} and input value tensor {list(vals.shape)}")
        s2, v2 = seq.reshape(-1, seq.shape[-1]), vals.reshape(-1, vals.shape[-1])
        r = np.stack([np.searchsorted(a, b, side) for a, b in zip(s2, v2)]).reshape(vals.shape)
    r = np.asarray(r, np.int32 if out_int32 else np.int64)
    return r if not scalar else r.reshape(())


defop("searchsorted.Tensor(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, "
      "bool right=False, str? side=None, Tensor? sorter=None) -> Tensor", method=False,
      differentiable=(), kernels={"cpu": _searchsorted}, meta=_search_meta)


def _bucketize(x, boundaries, out_int32, right):
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim"
                           f"({boundaries.ndim})")
    return _searchsorted(boundaries, x, out_int32, right, None, None)


defop("bucketize.Tensor(Tensor self, Tensor boundaries, *, bool out_int32=False, "
      "bool right=False) -> Tensor", differentiable=(), kernels={"cpu": _bucketize},
      meta=_bucketize_meta)
