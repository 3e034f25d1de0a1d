"""The public functions on nested tensors (`ember.sin(nt)`, `ember.add(nt, x)`, `nt.sin_()`):
the dispatcher hands a call with a nested argument here first (NestedTensor's
`__ember_function__`, as torch's __torch_function__ on its jagged subclass). Pointwise ops run
per component (a dense tensor of the nested tensor's rank gives component i its slice i; any
other broadcasts to every component); ops with a dim run the method's rule; other ops raise
NotImplementedError naming the aten op, as PyTorch's jagged tensor does."""
from __future__ import annotations

from ember import _dispatch
from ember._tensor import Tensor

__all__ = ["nested_function"]

_PER_COMPONENT_DENSE = {"matmul", "mm", "bmm", "linear"}  # dense operands go whole


def _is_pointwise(op) -> bool:
    base = op.inplace_of if op.inplace_of is not None else op
    return base.pointwise is not None or "pointwise" in base.tags


def _aten_name(op) -> str:
    return f"aten.{op.name}.{op.schema.overload or 'default'}"


def nested_function(op, args, out):
    from . import NestedTensor
    if out is not None:
        raise NotImplementedError(f"{_aten_name(op)}: out= is not supported for nested tensors")
    nested = [args[i] for i in op.tensor_idx if isinstance(args[i], NestedTensor)]
    first = nested[0]
    for nt in nested[1:]:
        if len(nt._ts) != len(first._ts):
            raise RuntimeError(f"{op.name}(): expected nested tensors with the same number of "
                               f"components, got {len(first._ts)} and {len(nt._ts)}")
    split_dense = _is_pointwise(op)
    if not split_dense and op.name not in _PER_COMPONENT_DENSE:
        method = _dim_method(op, args)
        if method is not None:
            return method
        raise NotImplementedError(_aten_name(op))
    rank = first.dim()
    results = []
    for i in range(len(first._ts)):
        a = list(args)
        for j in op.tensor_idx:
            v = a[j]
            if isinstance(v, NestedTensor):
                a[j] = v._ts[i]
            elif split_dense and isinstance(v, Tensor) and v.dim() == rank:
                a[j] = v[i] if v.shape[0] != 1 else v[0]
        results.append(_dispatch.call(op, tuple(a)))
    if op.inplace_of is not None or (op.mutated_idx and isinstance(args[0], NestedTensor)):
        return args[0]
    if isinstance(results[0], tuple):
        return tuple(NestedTensor(list(rs), first.layout) for rs in zip(*results))
    return NestedTensor(results, first.layout)


def _dim_method(op, args):
    """`ember.sum(nt, 2)`, `ember.softmax(nt, -1)`: the nested tensor's method with a dim."""
    from . import _DIMMED, NestedTensor
    self = args[0]
    if op.name not in _DIMMED or not isinstance(self, NestedTensor) or len(args) < 2:
        return None
    dim = args[1]
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            return None
        dim = dim[0]
    if dim is None:
        return None
    rest = []
    for a, v in zip(op.schema.args[2:], args[2:]):
        if a.kwonly:
            if v is not a.default:
                return None  # (dtype=...: the methods take the dim and keepdim only)
            continue
        rest.append(v)
    return getattr(self, op.name)(dim, *rest)
