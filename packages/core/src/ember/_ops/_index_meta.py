"""Meta functions (the validators) of the gather/scatter/index ops: PyTorch's errors for index
dtypes, ranks and shapes, raised from sizes and dtypes alone, so meta tensors, fake tensors and
every device get them. Index values (out-of-range entries) are checked by the kernels: a meta
tensor has none.

The CPU kernels in scatter.py and indexing.py still run their own copies of these checks (on
numpy arrays, before their value checks); the messages here are theirs.
"""
from __future__ import annotations

from .. import _dtype as D
from .._dispatch import TensorMeta, torch_name
from .._size import broadcast_shapes, normalize_dim
from .._tensor import Tensor


def _is_int(t) -> bool:
    return t.dtype._cat == 1  # integer dtypes, uint8 included (not bool)


# ---- gather / scatter along a dim ---------------------------------------------------------------
def gather_meta(x, dim, index, sparse_grad=False):
    d = normalize_dim(dim, x.ndim)
    if not _is_int(index):
        raise RuntimeError("gather(): Expected dtype int64 for index")
    if index.numel() != 0:
        if max(x.ndim, 1) != max(index.ndim, 1):
            raise RuntimeError("Index tensor must have the same number of dimensions as input "
                               "tensor")
        for i in range(index.ndim):
            if i != d and index.shape[i] > x.shape[i]:
                raise RuntimeError(f"Size does not match at dimension {i} expected index "
                                   f"{list(index.shape)} to be no larger than self "
                                   f"{list(x.shape)} apart from dimension {d}")
    return TensorMeta(index.shape, x.dtype)


def _scatter_checks(x, dim, index, src, op):
    """Returns whether the call scatters anything (a non-empty index)."""
    d = normalize_dim(dim, x.ndim)
    if index.dtype is not D.int64:
        raise RuntimeError(f"{op}(): Expected dtype int64 for index")
    src_t = isinstance(src, Tensor)
    if src_t and src.dtype != x.dtype:
        raise RuntimeError(f"{op}(): Expected self.dtype to be equal to src.dtype")
    if index.numel() == 0:
        return False
    if max(x.ndim, 1) != max(index.ndim, 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    src_bad = src_t and any(i >= src.ndim or index.shape[i] > src.shape[i]
                            for i in range(index.ndim))
    if src_bad or any(i != d and index.shape[i] > x.shape[i] for i in range(index.ndim)):
        tail = f" and to be no larger size than src {list(src.shape)}" if src_t else ""
        raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self "
                           f"{list(x.shape)} apart from dimension {d}{tail}")
    return True


def scatter_meta(x, dim, index, src=None, value=None, reduce=None):
    if _scatter_checks(x, dim, index, src if src is not None else value, "scatter") and \
            reduce not in (None, "add", "multiply"):
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    return TensorMeta(x.shape, x.dtype)


def scatter_add_meta(x, dim, index, src):
    _scatter_checks(x, dim, index, src, "scatter_add")
    return TensorMeta(x.shape, x.dtype)


def scatter_reduce_meta(x, dim, index, src, reduce, include_self=True):
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    _scatter_checks(x, dim, index, src, "scatter_reduce")
    return TensorMeta(x.shape, x.dtype)


# ---- index_select / index_add / index_copy / index_fill ----------------------------------------
def _index_vector(index, op):
    if index.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector")
    if not _is_int(index):
        if op == "index_fill_":  # PyTorch raises IndexError for this one
            raise IndexError(f"{op}(): Expected dtype int64 for index.")
        raise RuntimeError(f"{op}(): Expected dtype int32 or int64 for index")


def index_select_meta(x, dim, index):
    d = normalize_dim(dim, x.ndim)
    _index_vector(index, "index_select")
    if x.ndim == 0:
        if index.numel() != 1:
            raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got "
                               f"{index.numel()} value(s)")
        return TensorMeta((), x.dtype)
    return TensorMeta(tuple(x.shape[:d]) + (index.numel(),) + tuple(x.shape[d + 1:]), x.dtype)


def _index_source(x, dim, index, source, op, exc=RuntimeError):
    d = normalize_dim(dim, x.ndim)
    _index_vector(index, op)
    ns = source.shape[d] if source.ndim else 1
    if index.numel() != ns:
        if op == "index_add_":
            raise exc(f"{op}(): Number of indices ({index.numel()}) should be equal to "
                      f"source.size(dim): ({ns}), for dim: {d}")
        raise exc(f"{op}(): Number of indices ({index.numel()}) should be equal to "
                  f"source.size(dim) ({ns})")
    if source.dtype != x.dtype:
        raise RuntimeError(f"{op}(): self ({torch_name(x.dtype)}) and source "
                           f"({torch_name(source.dtype)}) must have the same scalar type")
    return TensorMeta(x.shape, x.dtype)


def index_add_meta(x, dim, index, source, alpha=1):
    return _index_source(x, dim, index, source, "index_add_")


def index_copy_meta(x, dim, index, source):
    return _index_source(x, dim, index, source, "index_copy_", IndexError)


def index_fill_meta(x, dim, index, value):
    normalize_dim(dim, x.ndim)
    _index_vector(index, "index_fill_")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.ndim} dimension(s).")
    return TensorMeta(x.shape, x.dtype)


# ---- take / put ---------------------------------------------------------------------------------
def _flat_index(index):
    if not _is_int(index):
        raise RuntimeError(f"take(): Expected a long tensor for index, but got "
                           f"{torch_name(index.dtype)}")


def take_meta(x, index):
    _flat_index(index)
    return TensorMeta(index.shape, x.dtype)


def put_meta(x, index, source, accumulate=False):
    if index.numel() != source.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of "
                         f"elements, but got source.numel() = {source.numel()}, index.numel() = "
                         f"{index.numel()}")
    _flat_index(index)
    return TensorMeta(x.shape, x.dtype)


# ---- x[indices] / index_put ---------------------------------------------------------------------
def index_checks(x_shape, indices):
    """PyTorch's checks of advanced indices (dtypes, count, mask shapes, broadcasting)."""
    dim, shapes = 0, []
    for i in indices:
        if i is None:
            dim += 1
            continue
        if i.dtype in (D.bool, D.uint8):
            k = i.ndim
            for j in range(k):
                if dim + j >= len(x_shape) or i.shape[j] != x_shape[dim + j]:
                    raise IndexError(f"The shape of the mask {list(i.shape)} at index {j} does "
                                     f"not match the shape of the indexed tensor "
                                     f"{list(x_shape[dim:dim + k])} at index {dim + j}")
            dim += k
            continue
        if not _is_int(i):
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if dim >= len(x_shape):
            raise IndexError(f"too many indices for tensor of dimension {len(x_shape)}")
        shapes.append(tuple(i.shape))
        dim += 1
    if dim > len(x_shape):
        raise IndexError(f"too many indices for tensor of dimension {len(x_shape)}")
    try:
        broadcast_shapes(*shapes)
    except RuntimeError:
        raise IndexError(f"shape mismatch: indexing tensors could not be broadcast together "
                         f"with shapes {', '.join(str(list(s)) for s in shapes)}") from None


def _has_mask(indices) -> bool:
    return any(i is not None and i.dtype in (D.bool, D.uint8) for i in indices)


def index_meta(x, indices, shape_of):
    """shape_of(x_shape, indices): the result's shape (integer indices only)."""
    index_checks(x.shape, indices)
    return TensorMeta(shape_of(x.shape, indices), x.dtype)


def index_put_meta(x, indices, values, accumulate, shape_of):
    if values.dtype != x.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{torch_name(x.dtype)} for the destination and "
                           f"{torch_name(values.dtype)} for the source.")
    index_checks(x.shape, indices)
    if any(i is not None for i in indices) and not _has_mask(indices):
        target = tuple(shape_of(x.shape, indices))
        try:
            ok = tuple(broadcast_shapes(values.shape, target)) == target
        except RuntimeError:
            ok = False
        if not ok:
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} "
                               f"cannot be broadcast to indexing result of shape {list(target)}")
    return TensorMeta(x.shape, x.dtype)
