"""The loop IR: buffers, the lazy values lowering passes around, and the computations that
fill buffers (a pointwise loop nest or a reduction), each a closure over an ops handler.

A `TBox` is a value of the graph: its shape and dtype and a loader `(h, index) -> value` that
emits the ops computing one element with handler h (a code generator). A TBox is either lazy
(its loader inlines the ops that produce it: vertical fusion) or backed by a `Buffer` through a
strided layout (a view is a new layout over the same buffer). `realize` turns a lazy TBox into a
`ComputedBuffer`: the scheduler gives each one a place in a kernel.
"""
from __future__ import annotations

import sympy

from ember import _dtype as D

from .sizevars import contiguous_strides

__all__ = ["Buffer", "InputBuffer", "ComputedBuffer", "ExternBuffer", "TBox", "kdtype",
           "loop_vars"]


def kdtype(d):
    """The dtype a value has inside a kernel (half types compute in float32)."""
    return D.float32 if d in (D.bfloat16, D.float16) else d


def loop_vars(prefix: str, n: int) -> tuple:
    return tuple(sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True) for i in range(n))


class Buffer:
    """Memory: name, shape, dtype; `origins` names the graph nodes that produced it."""

    def __init__(self, name, shape, dtype, origins=()):
        self.name, self.shape, self.dtype = name, tuple(shape), dtype
        self.origins = list(origins)

    def __repr__(self):
        return f"{type(self).__name__}({self.name}, {list(self.shape)}, {self.dtype})"


class InputBuffer(Buffer):
    """A graph input (placeholder or constant), read where it lies (strides from the example)."""

    def __init__(self, name, shape, dtype, index):
        super().__init__(name, shape, dtype)
        self.index = index


class ComputedBuffer(Buffer):
    """A C-contiguous buffer filled by a loop nest. `ranges` are the iteration sizes (the
    output's dims other than size 1), `rranges` the reduced sizes (empty: pointwise).
    `fn(h, vars, rvars)` emits the value of one element (for a reduction: one term),
    `rtype` names the reduction, `post(h, acc)` finishes it (mean's division) and
    `store_index(vars)` is the element's offset."""

    def __init__(self, name, shape, dtype, ranges, fn, store_index, rranges=(), rtype=None,
                 acc_dtype=None, post=None, origins=()):
        super().__init__(name, shape, dtype, origins)
        self.ranges, self.rranges = tuple(ranges), tuple(rranges)
        self.fn, self.store_index = fn, store_index
        self.rtype, self.acc_dtype, self.post = rtype, acc_dtype, post

    @property
    def is_reduction(self) -> bool:
        return self.rtype is not None


class ExternBuffer(Buffer):
    """The result of running an op itself (matmul, conv, random, indexing, anything the
    lowering does not turn into loops). `target` is called with `args`/`kwargs` where TBoxes
    become tensors; `layouts` are the results' (shape, stride) by output index."""

    def __init__(self, name, target, args, kwargs, results, origins=()):
        shape, dtype = (results[0][0], results[0][2]) if results and results[0] else ((), None)
        super().__init__(name, shape, dtype, origins)
        self.target, self.args, self.kwargs = target, args, kwargs
        self.results = results  # [(shape, stride, dtype) or None] per output (None: not a tensor)


class TBox:
    """A graph value: shape, dtype and a loader. Backed by `buf` through (stride, offset) when
    it lives in memory; lazy (buf None) when its loader computes it."""

    def __init__(self, shape, dtype, loader=None, buf=None, stride=None, offset=0):
        self.shape, self.dtype = tuple(shape), dtype
        self.buf, self.stride, self.offset = buf, stride, offset
        self._loader = loader

    @classmethod
    def of(cls, buf, stride=None, offset=0, shape=None):
        shape = buf.shape if shape is None else shape
        stride = contiguous_strides(shape) if stride is None else tuple(stride)
        return cls(shape, buf.dtype, buf=buf, stride=stride, offset=offset)

    def load(self, h, index):
        if self.buf is None:
            return self._loader(h, tuple(index))
        flat = self.offset + sum((i * s for i, s in zip(index, self.stride)), sympy.Integer(0))
        return h.load(self.buf, sympy.expand(flat))

    @property
    def lazy(self) -> bool:
        return self.buf is None

    def __repr__(self):
        where = "lazy" if self.buf is None else self.buf.name
        return f"TBox({list(self.shape)}, {self.dtype}, {where})"
