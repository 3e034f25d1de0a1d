"""The public functions on sparse tensors (`ember.add(s, s)`, `ember.sin(s)`, `F.relu(s)`,
`s.add_(t)`): the dispatcher hands a call with a sparse argument here first (the class's
`__ember_function__`, as torch's __torch_function__), so a function runs the sparse rule its
method has. In-place ops rebind the sparse tensor's pieces where PyTorch has a sparse rule and
raise PyTorch's error where it has none; an out-of-place op without a sparse rule declines
(the dense form computes it, see _base)."""
from __future__ import annotations

import ember
from ember._tensor import Tensor

__all__ = ["sparse_function"]

# in-place ops PyTorch runs on the stored values of a coalesced COO tensor (and of CSR)
_UNARY_INPLACE = {"abs", "neg", "sqrt", "sin", "tan", "tanh", "relu", "sign", "square", "floor",
                  "ceil", "round", "trunc", "expm1", "log1p", "asin", "atan", "sinh", "asinh",
                  "atanh", "erf", "sgn", "deg2rad", "rad2deg", "frac", "nan_to_num"}


def _call_args(op, args):
    """Schema-order args -> (positional, keyword) for a method: keyword-only ones by name, and
    arguments left at their defaults dropped (methods take fewer options than the schema)."""
    pos, kw = [], {}
    sargs = op.schema.args
    for a, v in zip(sargs[1:], args[1:]):
        if a.has_default and v is a.default or (a.has_default and isinstance(v, (int, float))
                                                 and v == a.default and type(v) is type(
                                                     a.default)):
            continue
        if a.kwonly:
            kw[a.name] = v
        else:
            pos.append(v)
    return pos, kw


def _own_method(cls, name):
    m = getattr(cls, name, None)
    return m if m is not None and m is not getattr(Tensor, name, None) else None


def sparse_function(cls, op, args, out):
    from ._base import SparseTensor
    self = args[0] if op.tensor_idx and op.tensor_idx[0] == 0 else None
    if out is not None:
        return NotImplemented
    if isinstance(self, SparseTensor) and (op.inplace_of is not None or 0 in op.mutated_idx):
        return _inplace(self, op, args)
    if not isinstance(self, SparseTensor):
        other = args[1] if len(args) > 1 else None
        if op.name == "mul" and isinstance(other, SparseTensor) and isinstance(self, Tensor):
            return other.mul(self)  # dense * sparse: sparse, as PyTorch
        return NotImplemented
    m = _own_method(type(self), op.name)
    if m is None:
        return NotImplemented
    pos, kw = _call_args(op, args)
    return m(self, *pos, **kw)


def _backend(t) -> str:
    return "SparseCUDA" if t.device.type == "cuda" else "SparseCPU"


_ATEN_NAME = {"fill_": "fill_.Scalar"}  # ember's overload-free names where aten's differ


def _unsupported(self, op):
    if self.is_sparse_csr:
        raise RuntimeError("unsupported tensor layout: SparseCsr")
    name = _ATEN_NAME.get(op.qualname, op.qualname)
    raise NotImplementedError(
        f"Could not run 'aten::{name}' with arguments from the '{_backend(self)}' "
        "backend. This could be because the operator doesn't exist for this backend, or was "
        "omitted during the selective/custom build process (if using custom build).")


def _inplace(self, op, args):
    """self.<op>_(...) on a sparse tensor: the result's pieces replace self's."""
    name = op.name
    base = op.inplace_of.name if op.inplace_of is not None else name.rstrip("_")
    rest = args[1:]
    if name == "copy_":
        src = args[1]
        if not isinstance(src, ember.Tensor) or not (src.is_sparse or src.is_sparse_csr):
            if self.is_sparse_csr:
                raise RuntimeError("torch.copy_: copy of sparse compressed tensors having "
                                   "different layouts is not supported. self layout is "
                                   "SparseCsr and src layout is Strided")
            raise RuntimeError("copy_() between dense and sparse Tensors is not implemented! "
                               f"Found self type = {self.type()} and src type = "
                               f"{src.type() if isinstance(src, ember.Tensor) else 'scalar'}")
        new = src.to(self.dtype)
        new = new.to_sparse_csr() if self.is_sparse_csr else new.to_sparse()
        return _rebind(self, new)
    if base == "zero":
        return _rebind(self, _zero(self))
    if base == "fill":
        if not self.is_sparse_csr:
            _unsupported(self, op)
        return _rebind(self, self._with_values(ember.full_like(self._vals, args[1])))
    if base in ("add", "sub", "mul", "div"):
        pos, kw = _call_args(op, args)
        r = getattr(type(self), base)(self, *pos, **kw)
        if r is NotImplemented:
            _unsupported(self, op)
        if base == "mul" and self.is_sparse:
            r._coalesced = False  # (PyTorch's mul_ leaves the result marked uncoalesced)
        return _rebind(self, r)
    if base in _UNARY_INPLACE:
        if self.is_sparse and not self.is_coalesced():
            raise RuntimeError(f"{name} requires coalesced input")
        return _rebind(self, self._with_values(getattr(self._vals, base)(*rest)))
    _unsupported(self, op)


def _zero(self):
    if self.is_sparse_csr:
        from ._csr import SparseCSRTensor
        z = ember.zeros(0, dtype=ember.int64, device=self.device)
        return SparseCSRTensor(ember.zeros(self.shape[0] + 1, dtype=ember.int64,
                                           device=self.device), z,
                               self._vals.new_zeros((0,) + tuple(self._vals.shape[1:])),
                               self.shape)
    from ._coo import SparseCOOTensor
    return SparseCOOTensor(self._idx.new_zeros((self._idx.shape[0], 0)),
                           self._vals.new_zeros((0,) + tuple(self._vals.shape[1:])),
                           self.shape, coalesced=True)


def _rebind(self, new):
    """self takes new's indices and values (in place, as PyTorch's sparse in-place ops)."""
    if self.requires_grad and self.is_leaf and ember.is_grad_enabled():
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    new = new if type(new) is type(self) else (
        new.to_sparse_csr() if self.is_sparse_csr else new.to_sparse())
    if self.is_sparse_csr:
        self._crow, self._col = new._crow, new._col
    else:
        self._idx, self._coalesced = new._idx, new._coalesced
    self._vals = new._vals.to(self.dtype) if new._vals.dtype != self.dtype else new._vals
    self._dense_cache = None
    self._sver = getattr(self, "_sver", 0) + 1
    return self
