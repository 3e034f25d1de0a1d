"""The op registry's public surface for device backends (ember.cuda, third-party devices).

A backend fills entries' kernel slots (`register_kernel`) and reads each call's arguments exactly
as the entry's meta reads them; it imports these names, never a family module's private helpers,
so core may reorganize its families without breaking a backend. Checks stay the meta's: the
helpers below normalize arguments (they raise only what the meta raised first).

The op table:
- `OPS`, `OpDef`, `lookup(qualname)`, `register_kernel(op, device, fn)`.
- `execute(op, args)`: run an op below autograd and modes (the slot, else the no-kernel rule).
- `DynamicOutputShape`: what a meta raises when the output's shape depends on values.
- `pointwise_prepare(op, args)`, `pointwise_dtypes(op, operands, args)`: a pointwise call's
  checks and (result, compute) dtypes; `torch_name(dtype)`: "float32" for error messages.

Argument readers (the entry's own, so a kernel and the meta agree), by family:
- reduction: `reduce_dims(dim, ndim)`, `reduced_shape(shape, dims, keepdim)`,
  `sum_dtype(x_dtype, dtype)`, `var_args(x, dim, unbiased, correction)` -> (dims, correction),
  `norm_p(p)` -> float order.
- joining: `cat_inputs(shapes_dtypes, dim)`, `flip_dims(ndim, dims)`,
  `roll_args(ndim, shifts, dims)`, `repeat_shape(shape, repeats)`,
  `diag_embed_dims(ndim, offset, dim1, dim2)`.
- movement (view arithmetic, (shape, strides, offset)): `diagonal_view(x, offset, d1, d2)`,
  `select_view(x, dim, index)`, `as_strided_view(x, size, stride, offset)`.
- creation: `scalar_value(v)` (a Python number from a number or a 0-d tensor).
- pool: `pool_args(n, kernel, stride, padding, dilation)`, `avg_pool_args(n, k, s, p)`,
  `check_adaptive(x, n, name)`.
- sample: `src_scale(size_in, size_out, align_corners, scale)`, `upsample_checks(x, out)`,
  `grid_checks(x, grid, padding_mode)`.
- nn: `pad_pairs(pad, ndim, op)`, `check_index_pad(x_shape, pairs, mode)`.
- random: `int_range(dtype)`, `check_int_range(low, high, dtype)`.
- linalg: `solve_vector_case(a, b)`, `rank_cutoff(smax, atol, rtol, m, n, dtype)`.

What a device backend builds on (storage, tensors, devices, generators), so that it imports no
core module but this one:
- tensors: `Tensor` (its `_make`/`_alias`/`_storage`/`_offset` are the backend-facing layout),
  `Storage(buffer, device, nbytes)`, `c_strides(shape)`; `dtypes`: the dtype objects
  (`dtypes.float32`, ...), `dtypes.dtype`, `dtypes.promote_types`, `dtypes.get_default_dtype`.
- devices: `DeviceBackend` (the base a backend subclasses), `register_device(backend)`,
  `get_backend(type)`, `device`.
- sizes: `normalize_dim(dim, ndim)`, `broadcast_shapes(*shapes)`,
  `collapse_dims(shape, strides_list)` (merge dims contiguous in every operand).
- random: `Generator` (a device's generator subclasses it), `DEVICE_GENERATORS` (type -> class),
  `SEED_HOOKS` (called by `manual_seed`), `DEFAULT_SEED`.
"""
from __future__ import annotations

from .. import _dtype as dtypes
from .._device import DeviceBackend, device, get_backend, register_device
from .._dispatch import (
    DynamicOutputShape,
    execute,
    pointwise_dtypes,
    pointwise_prepare,
    torch_name,
)
from .._random import _DEFAULT_SEED as DEFAULT_SEED
from .._random import DEVICE_GENERATORS, SEED_HOOKS, Generator
from .._size import broadcast_shapes, collapse_dims, normalize_dim
from .._tensor import Storage, Tensor, c_strides
from ._registry import OPS, OpDef, lookup, register_kernel
from .creation import _scalar as scalar_value
from .joining import _cat_inputs as cat_inputs
from .joining import _diag_embed_dims as diag_embed_dims
from .joining import _flip_dims as flip_dims
from .joining import _repeat_shape as repeat_shape
from .joining import _roll_args as roll_args
from .linalg_factor import _cutoff as rank_cutoff
from .linalg_factor import _vector_case as solve_vector_case
from .movement import _as_strided as as_strided_view
from .movement import _diagonal as diagonal_view
from .movement import _select as select_view
from .nn import _check_index_pad as check_index_pad
from .nn import _pad_pairs as pad_pairs
from .pool import _avg_args as avg_pool_args
from .pool import _check_adaptive as check_adaptive
from .pool import _norm_args as pool_args
from .random import _int_range as int_range
from .random import check_int_range
from .reduction import _norm_p as norm_p
from .reduction import _sum_dtype as sum_dtype
from .reduction import _var_args as var_args
from .reduction import reduce_dims, reduced_shape
from .sample import _src_scale as src_scale
from .sample import grid_checks, upsample_checks

__all__ = [
    "OPS", "OpDef", "lookup", "register_kernel", "execute", "DynamicOutputShape",
    "pointwise_prepare", "pointwise_dtypes", "torch_name",
    "reduce_dims", "reduced_shape", "sum_dtype", "var_args", "norm_p",
    "cat_inputs", "flip_dims", "roll_args", "repeat_shape", "diag_embed_dims",
    "diagonal_view", "select_view", "as_strided_view", "scalar_value",
    "pool_args", "avg_pool_args", "check_adaptive", "src_scale", "upsample_checks",
    "grid_checks", "pad_pairs", "check_index_pad", "int_range", "check_int_range",
    "solve_vector_case", "rank_cutoff",
    # the device-backend surface
    "Tensor", "Storage", "c_strides", "dtypes", "DeviceBackend", "register_device", "get_backend",
    "device", "normalize_dim", "broadcast_shapes", "collapse_dims", "Generator",
    "DEVICE_GENERATORS", "SEED_HOOKS", "DEFAULT_SEED",
]
