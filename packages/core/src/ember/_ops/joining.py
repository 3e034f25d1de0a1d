"""Movement ops that copy: joining (cat, stack), flips and rolls, repeats, diagonals, triangles,
and the `*_scatter` ops (a view of a copy overwritten: the functional form of writing a view).

Each has a numpy kernel, a meta, and a vjp in ember ops; composites are decompositions.
"""
from __future__ import annotations

import operator
import warnings

import numpy as np

from .. import _dtype as D
from .._dispatch import DynamicOutputShape, TensorMeta, torch_name
from .._size import normalize_dim
from .._tensor import Tensor
from . import _cpu_strided
from . import movement as M
from ._registry import FUNCTIONS, OPS, defop


def _zeros_like(x):
    return x.new_zeros(x.shape)


# ---- cat / stack -------------------------------------------------------------------------------
def _cat_inputs(shapes_dtypes, dim, op="cat"):
    """Check cat's inputs (PyTorch's rules) -> (kept positions, dim, out shape, out dtype).

    1-D tensors of size 0 are skipped (a legacy rule PyTorch keeps)."""
    if not shapes_dtypes:
        raise ValueError(f"torch.{op}(): expected a non-empty list of Tensors")
    for i, (s, _) in enumerate(shapes_dtypes):
        if len(s) == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be "
                               "concatenated")
    dtype = shapes_dtypes[0][1]
    for _, dt in shapes_dtypes[1:]:
        dtype = D.promote_types(dtype, dt)
    keep = [i for i, (s, _) in enumerate(shapes_dtypes) if tuple(s) != (0,)]
    if not keep:
        normalize_dim(dim, 1)
        return keep, 0, (0,), dtype
    ref = tuple(shapes_dtypes[keep[0]][0])
    d = normalize_dim(dim, len(ref))
    total = 0
    for i in keep:
        s = tuple(shapes_dtypes[i][0])
        if len(s) != len(ref):
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(ref)} "
                               f"and {len(s)}")
        for j in range(len(ref)):
            if j != d and s[j] != ref[j]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. "
                                   f"Expected size {ref[j]} but got size {s[j]} for tensor "
                                   f"number {i} in the list.")
        total = total + s[d]
    return keep, d, ref[:d] + (total,) + ref[d + 1:], dtype


def _cat_kernel(arrays, dim):
    keep, d, shape, dtype = _cat_inputs([(a.shape, D.from_numpy_dtype(a.dtype)) for a in arrays],
                                        dim)
    if not keep:
        return np.empty(shape, dtype.np)
    return np.concatenate([arrays[i].astype(dtype.np, copy=False) for i in keep], axis=d)


def _cat_meta(tensors, dim):
    _, _, shape, dtype = _cat_inputs([(t.shape, t.dtype) for t in tensors], dim)
    return TensorMeta(shape, dtype)


def _cat_vjp(g, out, tensors, dim):
    keep, d, _, _ = _cat_inputs([(t.shape, t.dtype) for t in tensors], dim)
    grads, start = [], 0
    for i, t in enumerate(tensors):
        if i not in keep:
            grads.append(None)
            continue
        n = t.shape[d]
        grads.append(g.narrow(d, start, n))
        start += n
    return (grads,)


defop("cat(Tensor[] tensors, int dim=0) -> Tensor", kernels={"cpu": _cat_kernel},
      meta=_cat_meta, vjp=_cat_vjp, aliases=("concat",))


def concatenate(tensors, axis=0, out=None):
    """`ember.concatenate(tensors, axis=0)`: numpy's name for cat."""
    return FUNCTIONS["cat"](tensors, axis, out=out)


FUNCTIONS["concatenate"] = concatenate


def _stack(tensors, dim):
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    s0 = tuple(tensors[0].shape)
    for i, t in enumerate(tensors[1:], 1):
        if tuple(t.shape) != s0:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(s0)} "
                               f"at entry 0 and {list(t.shape)} at entry {i}")
    d = normalize_dim(dim, len(s0) + 1)
    return FUNCTIONS["cat"]([t.unsqueeze(d) for t in tensors], d)


defop("stack(Tensor[] tensors, int dim=0) -> Tensor", decomp=_stack)


def _hstack(tensors):
    ts = FUNCTIONS["atleast_1d"](tuple(tensors))
    return FUNCTIONS["cat"](ts, 0 if all(t.ndim == 1 for t in ts) else 1)


def _column_stack(tensors):
    ts = [t.reshape(t.numel(), 1) if t.ndim <= 1 else t for t in tensors]
    return FUNCTIONS["cat"](ts, 1)


defop("hstack(Tensor[] tensors) -> Tensor", decomp=_hstack)
defop("vstack(Tensor[] tensors) -> Tensor", aliases=("row_stack",),
      decomp=lambda ts: FUNCTIONS["cat"](FUNCTIONS["atleast_2d"](tuple(ts)), 0))
defop("dstack(Tensor[] tensors) -> Tensor",
      decomp=lambda ts: FUNCTIONS["cat"](FUNCTIONS["atleast_3d"](tuple(ts)), 2))
defop("column_stack(Tensor[] tensors) -> Tensor", decomp=_column_stack)


# ---- flips, rolls, rotations -------------------------------------------------------------------
def _flip_dims(ndim, dims):
    dims = [dims] if isinstance(dims, int) else list(dims)
    out = [normalize_dim(d, ndim) for d in dims]
    for d in out:
        if out.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return tuple(out)


def _same_meta(x, *_):
    return TensorMeta(x.shape, x.dtype)


defop("flip(Tensor self, int[] dims) -> Tensor", meta=_same_meta,
      kernels={"cpu": lambda x, dims: np.flip(x, _flip_dims(x.ndim, dims)).copy()},
      vjp=lambda g, out, x, dims: (g.flip(dims),))


def _fliplr(x):
    if x.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return x.flip(1)


def _flipud(x):
    if x.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return x.flip(0)


defop("fliplr(Tensor self) -> Tensor", decomp=_fliplr)
defop("flipud(Tensor self) -> Tensor", decomp=_flipud)


def _roll_args(ndim, shifts, dims):
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims and len(shifts) == 1:
        return shifts, dims
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:"
                           f"{len(dims)}")
    return shifts, [normalize_dim(d, ndim) for d in dims]


def _roll(x, shifts, dims):
    shifts, dims = _roll_args(x.ndim, shifts, dims)
    if not dims:
        return np.roll(x.reshape(-1), shifts[0]).reshape(x.shape)
    return np.roll(x, shifts, dims)


def _roll_vjp(g, out, x, shifts, dims):
    shifts, dims = _roll_args(x.ndim, shifts, dims)
    return (g.roll([-s for s in shifts], dims),)


defop("roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor", meta=_same_meta,
      kernels={"cpu": _roll}, vjp=_roll_vjp)


def _rot90(x, k, dims):
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if x.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {x.ndim}")
    d0, d1 = normalize_dim(dims[0], x.ndim), normalize_dim(dims[1], x.ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and "
                           f"dim1 = {d1}")
    k = k % 4
    if k == 1:
        return x.flip(d1).transpose(d0, d1)
    if k == 2:
        return x.flip((d0, d1))
    if k == 3:
        return x.flip(d0).transpose(d0, d1)
    return x.clone()


defop("rot90(Tensor self, int k=1, int[] dims=[0,1]) -> Tensor", decomp=_rot90)


# ---- repeats -------------------------------------------------------------------------------------
def _repeat_shape(shape, repeats):
    repeats = tuple(repeats)
    if len(repeats) < len(shape):
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    padded = (1,) * (len(repeats) - len(shape)) + tuple(shape)
    out = tuple(p * r for p, r in zip(padded, repeats))
    for r in repeats:
        if r < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {r}: "
                               f"{list(out)}")
    return padded, out


def _repeat(x, repeats):
    padded, _ = _repeat_shape(x.shape, repeats)
    return np.tile(x.reshape(padded), repeats)


def _repeat_vjp(g, out, x, repeats):
    padded, _ = _repeat_shape(x.shape, repeats)
    inter = [v for r, s in zip(repeats, padded) for v in (r, s)]
    if not inter:
        return (g,)
    return (g.reshape(inter).sum(list(range(0, len(inter), 2))).reshape(x.shape),)


defop("repeat(Tensor self, SymInt[] repeats) -> Tensor", function=False, kernels={"cpu": _repeat},
      meta=lambda x, r: TensorMeta(_repeat_shape(x.shape, r)[1], x.dtype), vjp=_repeat_vjp)


def _tile(x, dims):
    dims = tuple(dims)
    if len(dims) < x.ndim:
        dims = (1,) * (x.ndim - len(dims)) + dims
    return x.repeat(dims)


defop("tile(Tensor self, SymInt[] dims) -> Tensor", decomp=_tile)


def _ri_counts(repeats, n):
    r = np.asarray(repeats)
    if r.dtype.kind not in "iu":  # float repeats are refused, as PyTorch's dtype dispatch does
        raise NotImplementedError(f"\"repeat_interleave_cpu\" not implemented for "
                                  f"'{torch_name(D.from_numpy_dtype(r.dtype))}'")
    r = r.astype(np.int64, copy=False)
    if r.ndim == 0:
        r = np.full(n, int(r), np.int64)
    elif r.ndim > 1:
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    if (r < 0).any():
        raise RuntimeError("repeats can not be negative")
    return r


def _repeat_interleave(x, repeats, dim, output_size):
    if repeats is None:  # repeat_interleave(repeats): the indices, each repeated
        r = _ri_counts(x, x.shape[0] if x.ndim else 1)
        return np.repeat(np.arange(r.shape[0], dtype=np.int64), r)
    if dim is None:
        x, d = x.reshape(-1), 0
    else:
        d = normalize_dim(dim, x.ndim)
    r = _ri_counts(repeats, x.shape[d])
    if r.shape[0] != x.shape[d]:
        raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                           f"repeats.size(0) = {r.shape[0]} and input.size({d}) = {x.shape[d]}")
    return np.repeat(x, r, axis=d)


def _ri_meta(x, repeats, dim, output_size):
    if not isinstance(repeats, int):
        raise DynamicOutputShape("repeat_interleave on meta needs integer repeats")
    shape = (x.numel(),) if dim is None else x.shape
    d = 0 if dim is None else normalize_dim(dim, x.ndim)
    return TensorMeta(tuple(shape[:d]) + (shape[d] * repeats,) + tuple(shape[d + 1:]), x.dtype)


def _ri_vjp(g, out, x, repeats, dim, output_size):
    if repeats is None:
        return (None, None)
    src = x.reshape(-1) if dim is None else x
    d = 0 if dim is None else normalize_dim(dim, x.ndim)
    n = src.shape[d]
    counts = repeats if isinstance(repeats, Tensor) else Tensor._from_np(
        np.full(n, operator.index(repeats), np.int64))
    idx = FUNCTIONS["repeat_interleave"](counts)
    return (_zeros_like(src).index_add(d, idx, g).reshape(x.shape), None)


defop("repeat_interleave.self_Tensor(Tensor self, Tensor? repeats=None, int? dim=None, *, "
      "SymInt? output_size=None) -> Tensor", kernels={"cpu": _repeat_interleave},
      meta=_ri_meta, vjp=_ri_vjp)


# ---- diagonals and triangles ---------------------------------------------------------------------
def _diag(x, diagonal):
    if x.ndim not in (1, 2):
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D")
    return np.diag(x, diagonal).copy()


def _diag_meta(x, k):
    if x.ndim == 1:
        n = x.shape[0] + abs(k)
        return TensorMeta((n, n), x.dtype)
    if x.ndim != 2:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D")
    return TensorMeta(M._diagonal(x, k, 0, 1)[0], x.dtype)


def _diag_vjp(g, out, x, k):
    if x.ndim == 1:
        return (g.diagonal(k),)
    return (_zeros_like(x).diagonal_scatter(g, k),)


defop("diag(Tensor self, int diagonal=0) -> Tensor", kernels={"cpu": _diag}, meta=_diag_meta,
      vjp=_diag_vjp)
defop("diagflat(Tensor self, int offset=0) -> Tensor",
      decomp=lambda x, offset: FUNCTIONS["diag"](x.reshape(-1), offset))


def _diag_embed_dims(ndim, offset, dim1, dim2):
    d1, d2 = normalize_dim(dim1, ndim + 1), normalize_dim(dim2, ndim + 1)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


def _diag_embed_shape(shape, offset, d1, d2):
    n = shape[-1] + abs(offset)
    rest = list(shape[:-1])
    for d in sorted((d1, d2)):
        rest.insert(d, n)
    return tuple(rest)


def _diag_embed(x, offset, dim1, dim2):
    d1, d2 = _diag_embed_dims(x.ndim, offset, dim1, dim2)
    out = Tensor._from_np(np.zeros(_diag_embed_shape(x.shape, offset, d1, d2), x.dtype))
    np.copyto(out._alias(*M._diagonal(out, offset, d1, d2))._np, x)
    return out._np


def _diag_embed_meta(x, offset, dim1, dim2):
    d1, d2 = _diag_embed_dims(x.ndim, offset, dim1, dim2)
    return TensorMeta(_diag_embed_shape(x.shape, offset, d1, d2), x.dtype)


defop("diag_embed(Tensor self, int offset=0, int dim1=-2, int dim2=-1) -> Tensor",
      kernels={"cpu": _diag_embed}, meta=_diag_embed_meta,
      vjp=lambda g, out, x, offset, dim1, dim2: (g.diagonal(offset, dim1, dim2),))


def _tri(name, fn):
    def kernel(x, diagonal):
        if x.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        return fn(x, diagonal)

    def meta(x, diagonal):
        if x.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        return TensorMeta(x.shape, x.dtype)
    defop(f"{name}(Tensor self, int diagonal=0) -> Tensor", kernels={"cpu": kernel}, meta=meta,
          inplace=True, vjp=lambda g, out, x, k: (getattr(g, name)(k),))


_tri("tril", np.tril)
_tri("triu", np.triu)


# ---- meshgrid ------------------------------------------------------------------------------------
def meshgrid(*tensors, indexing: str | None = None):
    """`ember.meshgrid(x, y, indexing="ij")`: expanded views, one per input."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the "
                      "indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                           f"received: {indexing}")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but "
                               f"got: {list(t.shape)}")
    ts = list(tensors)
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.numel() for t in ts)
    n = len(ts)
    out = [t.reshape((1,) * i + (-1,) + (1,) * (n - i - 1)).expand(shape)
           for i, t in enumerate(ts)]
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


FUNCTIONS["meshgrid"] = meshgrid


# ---- *_scatter: the functional form of writing into a view ---------------------------------------
def _scatter_into_view(rule):
    """Kernel of an op that copies self and writes src into the view `rule` names."""
    def kernel(x, src, *args):
        arr = x.copy()
        out = Tensor._from_np(arr)
        view = out._alias(*rule(out, *args))
        if tuple(view.shape) != tuple(src.shape):
            raise RuntimeError(f"expected src to have a size equal to the slice of self. src "
                               f"size = {list(src.shape)}, slice size = {list(view.shape)}")
        np.copyto(view._np, src, casting="unsafe")
        return arr  # the owning array (out._np is a view the dispatcher would copy again)
    return kernel


def _scatter_op(schema, rule, view):
    name = schema.split("(")[0]

    def vjp(g, out, x, src, *args):
        return (FUNCTIONS[name](g, _zeros_like(src), *args), view(g, *args))
    def meta(x, src, *args):  # the view's own errors (index, dims), then src's shape
        shape = tuple(rule(x, *args)[0])
        if shape != tuple(src.shape):
            raise RuntimeError(f"expected src to have a size equal to the slice of self. src "
                               f"size = {list(src.shape)}, slice size = {list(shape)}")
        return _same_meta(x)
    defop(schema, kernels={"cpu": _scatter_into_view(rule)}, meta=meta, vjp=vjp)


_scatter_op("select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor",
            M._select, lambda g, *a: g.select(*a))
_scatter_op("slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, "
            "SymInt? end=None, SymInt step=1) -> Tensor", M._slice,
            lambda g, *a: OPS["slice.Tensor"](g, *a))
_scatter_op("diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) "
            "-> Tensor", M._diagonal, lambda g, *a: g.diagonal(*a))
_scatter_op("as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride, "
            "SymInt? storage_offset=None) -> Tensor", M._as_strided,
            lambda g, *a: g.as_strided(*a))


# ---- slice_backward: a slice's gradient, zeros around it ---------------------------------------
# One zero-filled buffer with g written in (the vjp of slice / narrow, so of split and chunk);
# as zeros(...).slice_scatter(...) it made two full-size buffers and copied one into the other.
# No vjp of its own: the compiler traces, and create_graph=True differentiates, that
# decomposition (the graphs stay as they were).
def _slice_backward_shape(g, sizes, dim, start, end, step):
    sizes = tuple(sizes)
    d = normalize_dim(dim, len(sizes))
    if step <= 0:
        raise ValueError("step must be greater than zero")
    n = sizes[d]
    start, end = start + n if start < 0 else start, end + n if end < 0 else end
    start = min(max(start, 0), n)
    end = min(max(end, start), n)
    want = sizes[:d] + ((end - start + step - 1) // step,) + sizes[d + 1:]
    if tuple(g.shape) != want:
        raise RuntimeError(f"slice_backward: grad_output of size {list(g.shape)} does not match "
                           f"the slice of input_sizes {list(sizes)} (size {list(want)})")
    return d, start, end


def _slice_backward_kernel(g, sizes, dim, start, end, step):
    d, start, end = _slice_backward_shape(g, sizes, dim, start, end, step)
    lead = (slice(None),) * d
    if step != 1:
        out = np.zeros(tuple(sizes), g.dtype)
    else:  # only the rest is zeroed: the slice is written once
        out = np.empty(tuple(sizes), g.dtype)
        _assign(out[lead + (slice(0, start),)], np.zeros((), g.dtype))
        _assign(out[lead + (slice(end, None),)], np.zeros((), g.dtype))
    _assign(out[lead + (slice(start, end, step),)], g)
    return out


def _assign(dst, src):
    """dst[...] = src (large ones on all threads: _cpu_strided)."""
    if not _cpu_strided.copy(dst, src):
        dst[...] = src


def _slice_backward_meta(g, sizes, dim, start, end, step):
    _slice_backward_shape(g, sizes, dim, start, end, step)
    return TensorMeta(tuple(sizes), g.dtype)


slice_backward = defop(
    "slice_backward(Tensor grad_output, SymInt[] input_sizes, int dim, SymInt start, SymInt end, "
    "SymInt step) -> Tensor", function=False, method=False, out=False,
    kernels={"cpu": _slice_backward_kernel}, meta=_slice_backward_meta,
    decomp=lambda g, sizes, dim, start, end, step: g.new_zeros(tuple(sizes)).slice_scatter(
        g, dim, start, end, step),
    differentiable=("grad_output",))
