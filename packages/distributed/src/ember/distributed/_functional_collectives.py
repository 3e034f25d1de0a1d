"""Functional collectives (torch.distributed._functional_collectives): they return new tensors
and leave their inputs alone. `group` is a ProcessGroup, a list of ranks, a DeviceMesh,
(mesh, dim) or a group name from `_group_name`.

Each is an op of the op table (`ember.ops._c10d_functional.all_reduce(x, "sum", group_name)`,
all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single, broadcast, wait_tensor) with a
fake kernel, so `ember.compile` records them in its graph like any op (the Python wrappers below
are marked for the compiler to run at capture time: they only resolve the group to its name).
Asynchronous as PyTorch's: a kernel starts its collective (`async_op=True`) and returns the
output at once, its Work registered under the output's storage; the `wait_tensor` op waits for
it. In eager code the Python functions below return an AsyncCollectiveTensor
(_async_tensor.py) that waits on first use; while ember.compile captures, they return
`wait_tensor(result)` instead, so the captured graph waits before any use of the result."""
from __future__ import annotations

import sys

import ember
from ember import library

from . import _collectives as C
from ._types import ReduceOp

__all__ = ["all_reduce", "all_gather_tensor", "reduce_scatter_tensor", "all_to_all_single",
           "broadcast", "wait_tensor", "all_reduce_coalesced", "all_gather_into_tensor_coalesced"]

_NAMES: dict = {}  # group name (a string an op can take) -> ProcessGroup


def _group_name(pg) -> str:
    for n, g in _NAMES.items():
        if g is pg:
            return n
    n = f"g{len(_NAMES)}:" + "-".join(str(r) for r in pg.ranks)
    _NAMES[n] = pg
    return n


def _op(op):
    if isinstance(op, str):
        return getattr(ReduceOp, op.upper())
    return op


def _op_name(op) -> str:
    if isinstance(op, str):
        return op.lower()
    return getattr(op, "name", str(op)).lower()


def _pg(group):
    from ._device_mesh import DeviceMesh
    from ._group import _W, _resolve
    if isinstance(group, str):
        if group not in _NAMES:
            raise ValueError(f"functional collectives: unknown group name {group!r}")
        return _NAMES[group]
    if isinstance(group, tuple) and len(group) == 2 and isinstance(group[0], DeviceMesh):
        return group[0].get_group(group[1])
    if isinstance(group, DeviceMesh):
        if group.ndim != 1:
            raise ValueError("functional collectives: a DeviceMesh group must be 1-D (or pass "
                             "(mesh, dim))")
        return group.get_group(0)
    if isinstance(group, (list, tuple)):
        ranks = sorted(group)
        for g in _W.groups:
            if g.ranks == ranks:
                return g
        raise ValueError(f"functional collectives: no existing group has ranks {ranks}; make "
                         "one with new_group first")
    return _resolve(group)


def _name(group) -> str:
    return _group_name(_pg(group))


# ---- the ops -----------------------------------------------------------------------------------
_NS = "_c10d_functional"
library.define(f"{_NS}::all_reduce", "(Tensor input, str reduce_op, str group_name) -> Tensor")
library.define(f"{_NS}::all_gather_into_tensor",
               "(Tensor input, int group_size, str group_name) -> Tensor")
library.define(f"{_NS}::reduce_scatter_tensor",
               "(Tensor input, str reduce_op, int group_size, str group_name) -> Tensor")
library.define(f"{_NS}::all_to_all_single",
               "(Tensor input, int[] output_split_sizes, int[] input_split_sizes, "
               "str group_name) -> Tensor")
library.define(f"{_NS}::broadcast", "(Tensor input, int src, str group_name) -> Tensor")
library.define(f"{_NS}::wait_tensor", "(Tensor tensor) -> Tensor")
_DEVICES = ("cpu", "cuda")


def _started(out, work):
    """out, its collective (`work`, or None once done) registered for wait_tensor."""
    from ._async_tensor import register_work
    register_work(out, work)
    return out


@library.impl(f"{_NS}::all_reduce", _DEVICES)
def _all_reduce_kernel(x, reduce_op, group_name):
    out = x.clone()
    return _started(out, C.all_reduce(out, _op(reduce_op), group=_NAMES[group_name],
                                      async_op=True))


@library.impl(f"{_NS}::all_gather_into_tensor", _DEVICES)
def _all_gather_kernel(x, group_size, group_name):
    x = x.contiguous()
    out = ember.empty((group_size * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
    return _started(out, C.all_gather_into_tensor(out, x, group=_NAMES[group_name],
                                                  async_op=True))


@library.impl(f"{_NS}::reduce_scatter_tensor", _DEVICES)
def _reduce_scatter_kernel(x, reduce_op, group_size, group_name):
    x = x.contiguous()
    out = ember.empty((x.shape[0] // group_size, *x.shape[1:]), dtype=x.dtype, device=x.device)
    return _started(out, C.reduce_scatter_tensor(out, x, _op(reduce_op),
                                                 group=_NAMES[group_name], async_op=True))


@library.impl(f"{_NS}::all_to_all_single", _DEVICES)
def _all_to_all_kernel(x, out_sizes, in_sizes, group_name):
    rows = sum(out_sizes) if out_sizes else x.shape[0]
    out = ember.empty((rows, *x.shape[1:]), dtype=x.dtype, device=x.device)
    return _started(out, C.all_to_all_single(
        out, x.contiguous(), list(out_sizes) or None, list(in_sizes) or None,
        group=_NAMES[group_name], async_op=True))


@library.impl(f"{_NS}::broadcast", _DEVICES)
def _broadcast_kernel(x, src, group_name):
    out = x.clone()
    return _started(out, C.broadcast(out, src=src, group=_NAMES[group_name], async_op=True))


@library.impl(f"{_NS}::wait_tensor", _DEVICES)
def _wait_kernel(x):
    from ._async_tensor import wait_storage
    wait_storage(x)
    return x.clone()  # (a fresh tensor, as the op's schema says: no alias of its input)


library.register_fake(f"{_NS}::all_reduce", lambda x, op, g: ember.empty_like(x))
library.register_fake(f"{_NS}::broadcast", lambda x, src, g: ember.empty_like(x))
library.register_fake(f"{_NS}::wait_tensor", lambda x: ember.empty_like(x))
library.register_fake(f"{_NS}::all_gather_into_tensor", lambda x, n, g: x.new_empty(
    (n * x.shape[0], *x.shape[1:])))
library.register_fake(f"{_NS}::reduce_scatter_tensor", lambda x, op, n, g: x.new_empty(
    (x.shape[0] // n, *x.shape[1:])))
library.register_fake(f"{_NS}::all_to_all_single", lambda x, o, i, g: x.new_empty(
    (sum(o) if o else x.shape[0], *x.shape[1:])))


def _ops():
    return getattr(ember.ops, _NS)


# ---- torch's Python API ------------------------------------------------------------------------
def _in_graph(fn):
    fn._ember_allow_in_graph = True  # ember.compile runs it at capture (it only resolves groups)
    return fn


def _compiling() -> bool:
    ev = sys.modules.get("ember._dynamo.eval_frame")
    return ev is not None and ev.is_compiling()


def _wrap(out):
    """What the Python functions return: the op's result, waited for on first use."""
    if _compiling():
        return _ops().wait_tensor(out)  # the graph waits right after the collective
    from ._async_tensor import AsyncCollectiveTensor
    return AsyncCollectiveTensor.wrap(out)


@_in_graph
def wait_tensor(tensor):
    """The finished result of a functional collective: waits for it (an AsyncCollectiveTensor
    gives its plain tensor; a plain tensor goes through the wait_tensor op)."""
    from ._async_tensor import AsyncCollectiveTensor
    if isinstance(tensor, AsyncCollectiveTensor):
        return tensor.wait()
    return _ops().wait_tensor(tensor)


@_in_graph
def all_reduce(self, reduceOp, group, tag: str = ""):
    return _wrap(_ops().all_reduce(self, _op_name(reduceOp), _name(group)))


@_in_graph
def all_gather_tensor(self, gather_dim: int, group, tag: str = ""):
    pg = _pg(group)
    out = _wrap(_ops().all_gather_into_tensor(self, pg.size(), _group_name(pg)))
    if gather_dim % max(self.dim(), 1) != 0:
        out = ember.cat(wait_tensor(out).chunk(pg.size()), dim=gather_dim)
    return out


@_in_graph
def reduce_scatter_tensor(self, reduceOp, scatter_dim: int, group, tag: str = ""):
    pg = _pg(group)
    x = self
    if scatter_dim % max(x.dim(), 1) != 0:
        x = ember.cat(x.chunk(pg.size(), dim=scatter_dim), dim=0)
    return _wrap(_ops().reduce_scatter_tensor(x, _op_name(reduceOp), pg.size(),
                                              _group_name(pg)))


@_in_graph
def all_to_all_single(self, output_split_sizes, input_split_sizes, group, tag: str = ""):
    return _wrap(_ops().all_to_all_single(self, list(output_split_sizes or []),
                                          list(input_split_sizes or []), _name(group)))


@_in_graph
def broadcast(self, src: int, group, tag: str = ""):
    return _wrap(_ops().broadcast(self, src, _name(group)))


@_in_graph
def all_reduce_coalesced(self, reduceOp, group, tag: str = ""):
    return [all_reduce(t, reduceOp, group) for t in self]


@_in_graph
def all_gather_into_tensor_coalesced(self, group, tag: str = ""):
    return [all_gather_tensor(t, 0, group) for t in self]


def _plain(t):
    """t finished and unwrapped (autograd's Functions return plain tensors)."""
    from ._async_tensor import AsyncCollectiveTensor
    return t.wait() if isinstance(t, AsyncCollectiveTensor) else t


# ---- differentiable variants (torch's *_autograd): the backward is the transposed collective --
def _autograd_fns():
    from ember.autograd import Function

    class _AllGather(Function):
        @staticmethod
        def forward(ctx, x, gather_dim, group):
            ctx.dim, ctx.group = gather_dim, group
            return _plain(all_gather_tensor(x, gather_dim, group))

        @staticmethod
        def backward(ctx, g):  # each rank's piece gets the sum of its gradients over ranks
            return (_plain(reduce_scatter_tensor(g.contiguous(), "sum", ctx.dim, ctx.group)),
                    None, None)

    class _ReduceScatter(Function):
        @staticmethod
        def forward(ctx, x, scatter_dim, group):
            ctx.dim, ctx.group = scatter_dim, group
            return _plain(reduce_scatter_tensor(x, "sum", scatter_dim, group))

        @staticmethod
        def backward(ctx, g):
            return _plain(all_gather_tensor(g.contiguous(), ctx.dim, ctx.group)), None, None

    class _AllToAll(Function):
        @staticmethod
        def forward(ctx, x, out_splits, in_splits, group):
            ctx.splits, ctx.group = (in_splits, out_splits), group
            return _plain(all_to_all_single(x, out_splits, in_splits, group))

        @staticmethod
        def backward(ctx, g):  # the transpose: the splits swap
            back_out, back_in = ctx.splits
            return (_plain(all_to_all_single(g.contiguous(), back_out, back_in, ctx.group)),
                    None, None, None)
    return _AllGather, _ReduceScatter, _AllToAll


_AUTOGRAD: list = []


def _fn(i):
    if not _AUTOGRAD:
        _AUTOGRAD.extend(_autograd_fns())
    return _AUTOGRAD[i]


def all_gather_tensor_autograd(self, gather_dim: int, group, tag: str = ""):
    """all_gather_tensor that autograd differentiates: the gradient of each rank's input is the
    sum over ranks of the output gradient's piece for that rank (a reduce-scatter)."""
    return _fn(0).apply(self, gather_dim, group)


def reduce_scatter_tensor_autograd(self, reduceOp, scatter_dim: int, group, tag: str = ""):
    """reduce_scatter_tensor that autograd differentiates (sum only, as torch's): the input's
    gradient is the all-gather of the output gradients."""
    if _op_name(reduceOp) != "sum":
        raise RuntimeError(f"reduce_scatter_tensor_autograd: only the 'sum' reduction is "
                           f"differentiable, got {_op_name(reduceOp)!r}")
    return _fn(1).apply(self, scatter_dim, group)


def all_to_all_single_autograd(self, output_split_sizes, input_split_sizes, group,
                               tag: str = ""):
    """all_to_all_single that autograd differentiates: the gradient goes back through the
    all-to-all with the split sizes swapped."""
    return _fn(2).apply(self, output_split_sizes, input_split_sizes, group)


__all__ += ["all_gather_tensor_autograd", "reduce_scatter_tensor_autograd",
            "all_to_all_single_autograd"]


def __getattr__(name):
    # AsyncCollectiveTensor on first use: importing it makes every op check its arguments for one
    if name == "AsyncCollectiveTensor":
        from ._async_tensor import AsyncCollectiveTensor
        return AsyncCollectiveTensor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
