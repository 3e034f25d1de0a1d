"""The part COO and CSR tensors share: an ember.Tensor subclass (isinstance, shape, dtype,
device, autograd flags as PyTorch's) holding its index and value tensors. Ops with a sparse rule
are methods of the subclasses; any other ember op sees the dense form (built once from the
values, read-only), so it computes PyTorch's values, and autograd reaches the values through
the dense form's graph."""
from __future__ import annotations

import numpy as np

import ember
from ember import _dispatch
from ember._printing import (
    _OPTS,
    _ComplexFormatter,
    _edges,
    _fmt_array,
    _Formatter,
    _values,
)
from ember._size import contiguous_strides
from ember._tensor import Tensor

__all__ = ["SparseTensor", "Layout"]

_dispatch.subclass_function[0] += 1  # calls with a sparse argument: SparseTensor decides first


class Layout:
    """A tensor layout (`ember.strided`, `ember.sparse_coo`, `ember.sparse_csr`)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"ember.{self.name}"

    def __reduce__(self):
        return (getattr, (ember, self.name))


class SparseTensor(Tensor):
    """Base of SparseCOOTensor and SparseCSRTensor (not constructed directly)."""

    is_sparse = False
    is_sparse_csr = False

    def _setup(self, values, size):
        shape = tuple(int(s) for s in size)
        self._shape, self._stride, self._offset = shape, tuple(contiguous_strides(shape)), 0
        self.dtype, self.device = values.dtype, values.device
        self._st = self._npc = None
        self._vals = values
        self._dense_cache = None

    @classmethod
    def _new(cls, *args, **kwargs):
        t = object.__new__(cls)
        t._init(*args, **kwargs)
        return t

    # ---- the dense form any other op computes on ---------------------------------------------
    def _dense_graph(self):
        """to_dense() built from the values in ember ops (recorded when they need grad)."""
        raise NotImplementedError

    def _dense_nograd(self) -> Tensor:
        key = self._vals._version
        c = self._dense_cache
        if c is None or c[0] != key:
            with ember.no_grad():
                d = self._dense_graph().contiguous()
            d._np.flags.writeable = False  # in-place ops on a sparse tensor: refused by numpy
            c = self._dense_cache = (key, d)
        return c[1]

    @property
    def _np(self) -> np.ndarray:
        return self._dense_nograd()._np

    @property
    def _storage(self):
        return self._dense_nograd()._storage

    # ---- autograd: the values carry the graph --------------------------------------------------
    @property
    def _requires_grad(self):
        return self._vals.requires_grad

    @_requires_grad.setter
    def _requires_grad(self, flag):
        self._vals.requires_grad_(flag)

    @property
    def _grad_fn(self):
        # what the engine follows from an op that read this tensor: a fresh dense form's node
        if not self._vals.requires_grad or not ember.is_grad_enabled():
            return None
        return self._dense_graph()._grad_fn

    @_grad_fn.setter
    def _grad_fn(self, fn):
        raise RuntimeError("ember: a sparse tensor's history is its values' history")

    @property
    def grad_fn(self):
        return self._vals.grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._vals.grad_fn is None

    @property
    def grad(self):
        """The values' gradient as a sparse tensor over the coalesced pattern, as PyTorch's
        (entries repeating one index each hold that location's gradient: averaged once)."""
        g = self._vals.grad
        if g is None:
            return None
        r = self._with_values(g)
        if self.is_sparse and not self.is_coalesced():
            ones = ember.ones((g.shape[0],) + (1,) * (g.dim() - 1), dtype=g.dtype)
            r = r.coalesce()
            r = r._with_values(r._values() / self._with_values(ones.expand(g.shape))
                               .coalesce()._values())
        return r

    @grad.setter
    def grad(self, g):
        self._vals.grad = None if g is None else g._values()

    def requires_grad_(self, requires_grad: bool = True):
        self._vals.requires_grad_(requires_grad)
        return self

    def _with_values(self, values):
        raise NotImplementedError

    def detach(self):
        return self._with_values(self._vals.detach())

    def clone(self, *, memory_format=None):
        return self._with_values(self._vals.clone())

    def to(self, *args, **kwargs):
        return self._with_values(self._vals.to(*args, **kwargs))

    def double(self):
        return self.to(ember.float64)

    def float(self):
        return self.to(ember.float32)

    def half(self):
        return self.to(ember.float16)

    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            name = {ember.float32: "Float", ember.float64: "Double", ember.int64: "Long",
                    ember.float16: "Half", ember.int32: "Int", ember.bool: "Bool"}
            return f"ember.sparse.{name.get(self.dtype, 'Float')}Tensor"
        return self.to(dtype)

    def _nnz(self) -> int:
        return self._vals.shape[0]

    def sum(self, dim=None, keepdim=False, dtype=None):
        from ._coo import sum as sparse_sum
        return sparse_sum(self, dim, dtype)

    def __neg__(self):
        return self._with_values(-self._vals)

    def div(self, other, *, rounding_mode=None):
        if isinstance(other, (int, float)) or (isinstance(other, Tensor) and other.dim() == 0
                                               and not other.is_sparse):
            if rounding_mode is None:
                r = self._with_values(self._vals / other)
                if r.is_sparse:
                    r._coalesced = False  # (as PyTorch marks a quotient)
                return r
            c = self.coalesce()  # (a rounded quotient of a sum: PyTorch coalesces first)
            return c._with_values(c._vals.div(other, rounding_mode=rounding_mode))
        return NotImplemented

    def __truediv__(self, other):
        return self.div(other)

    # ---- the public functions run the methods' sparse rules (see _function) ------------------
    @classmethod
    def __ember_function__(cls, op, args, out):
        from ._function import sparse_function
        return sparse_function(cls, op, args, out)

    @property
    def _version(self) -> int:
        return getattr(self, "_sver", 0)

    def __setitem__(self, key, value):
        raise TypeError("Cannot assign to a sparse tensor")

    # ---- zero-preserving pointwise ops: on the values (PyTorch keeps the layout) -------------
    def _unary(name):
        def f(self, *args, **kwargs):  # (on the coalesced entries: f(a + b), not f(a) + f(b))
            c = self.coalesce()
            return c._with_values(getattr(c._vals, name)(*args, **kwargs))
        f.__name__ = name
        f.__doc__ = f"{name} of the stored values (zeros stay zeros): a sparse result."
        return f

    for _n in ("abs", "neg", "sqrt", "sin", "tan", "tanh", "relu", "sign", "square", "floor",
               "ceil", "round", "trunc", "expm1", "log1p", "asin", "atan", "sinh", "asinh",
               "atanh", "erf", "sgn", "deg2rad", "rad2deg", "frac", "nan_to_num"):
        locals()[_n] = _unary(_n)
    del _n, _unary

    def coalesce(self):
        return self

    def pow(self, exponent):
        if isinstance(exponent, (int, float)) and exponent > 0:
            c = self.coalesce()
            return c._with_values(c._vals.pow(exponent))
        return self.to_dense().pow(exponent)

    __pow__ = pow

    # ---- printing (PyTorch's layout of the pieces) ------------------------------------------
    def _repr_pieces(self) -> list:
        raise NotImplementedError

    def __repr__(self, *, tensor_contents=None):
        indent = len("tensor(")
        parts = []
        for name, t in self._repr_pieces():
            prefix = f"{name}=tensor("
            body = _body(t, indent + len(prefix))
            if t.numel() == 0:
                body += f", size={tuple(t.shape)}"
            parts.append(prefix + body + ")")
        text = "tensor(" + (",\n" + " " * indent).join(parts)
        suffixes = [f"size={tuple(self.shape)}", f"nnz={self._nnz()}"]
        if self.dtype not in (ember.get_default_dtype(), ember.int64, ember.bool):
            suffixes.append(f"dtype={self.dtype}")
        if self.device.type != "cpu":
            suffixes.insert(0, f"device='{self.device}'")
        suffixes.append(f"layout={self.layout}")
        if self._vals.grad_fn is not None:
            suffixes.append(f"grad_fn=<{_node_name(self._vals.grad_fn)}>")
        elif self.requires_grad:
            suffixes.append("requires_grad=True")
        return _add_suffixes(text, suffixes, indent, force_newline=self.is_sparse)

    __str__ = __repr__


def _add_suffixes(text: str, suffixes: list, indent: int, force_newline: bool) -> str:
    """PyTorch's suffix layout: a suffix passing the line width (or the first one of a COO
    tensor) starts a new line at the indent."""
    col = len(text) - text.rfind("\n") + 1
    parts = [text]
    for s in suffixes:
        if force_newline or col + len(s) + 2 > _OPTS.linewidth:
            parts.append(",\n" + " " * indent + s)
            col = indent + len(s)
            force_newline = False
        else:
            parts.append(", " + s)
            col += len(s) + 2
    return "".join(parts) + ")"


def _node_name(fn) -> str:
    return fn.name() if hasattr(fn, "name") else type(fn).__name__


def _body(t, indent: int) -> str:
    """A tensor's bracketed values as PyTorch prints them inside another repr."""
    t = t.detach()
    if t.numel() == 0:
        return "[]"
    dt = t.dtype
    kind = "b" if dt is ember.bool else ("c" if dt.is_complex else (
        "f" if dt.is_floating_point else "i"))
    if t.numel() > _OPTS.threshold:
        a, cut = _edges(t, _OPTS.edgeitems)
    else:
        a, cut = _values(t), (False,) * t.ndim
    fmt = _ComplexFormatter(np.asarray(a)) if kind == "c" else _Formatter(np.asarray(a), kind)
    return _fmt_array(a, fmt, indent, cut)
