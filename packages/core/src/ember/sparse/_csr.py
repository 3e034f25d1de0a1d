"""SparseCSRTensor: a 2-D matrix as crow_indices (rows + 1), col_indices and values (nnz), as
PyTorch's sparse CSR layout; an ember.Tensor (see _base). Conversions and products go through
the COO form."""
from __future__ import annotations

import ember

from ._base import Layout, SparseTensor
from ._coo import SparseCOOTensor
from ._coo import mm as _coo_mm

__all__ = ["SparseCSRTensor", "sparse_csr_tensor", "sparse_csr", "coo_to_csr"]

sparse_csr = Layout("sparse_csr")


class SparseCSRTensor(SparseTensor):
    is_sparse_csr = True
    layout = sparse_csr

    def _init(self, crow, col, values, size):
        self._setup(values, size)
        self._crow, self._col = crow, col

    def __init__(self, *args, **kwargs):  # SparseCSRTensor(crow, col, values, size)
        pass

    def __new__(cls, crow, col, values, size):
        return cls._new(crow, col, values, size)

    def _with_values(self, values):
        dev = values.device
        return SparseCSRTensor(self._crow.to(dev), self._col.to(dev), values, self._shape)

    def crow_indices(self):
        return self._crow

    def col_indices(self):
        return self._col

    def values(self):
        return self._vals

    def _repr_pieces(self):
        return [("crow_indices", self._crow), ("col_indices", self._col), ("values", self._vals)]

    def _dense_graph(self):
        return self.to_dense()

    def to_sparse(self, sparse_dim=None):
        """The COO form (coalesced: CSR entries are row-major and unique)."""
        counts = self._crow[1:] - self._crow[:-1]
        rows = ember.repeat_interleave(ember.arange(self._shape[0], device=self._crow.device),
                                       counts)
        return SparseCOOTensor(ember.stack([rows, self._col]), self._vals, self._shape,
                               coalesced=True)

    def to_sparse_csr(self, dense_dim=None):
        return self

    def to_dense(self, dtype=None, *, masked_grad=None):
        return self.to_sparse().to_dense(dtype)

    def mm(self, dense):
        return _coo_mm(self.to_sparse(), dense)

    def matmul(self, other):
        return self.to_sparse().matmul(other)

    __matmul__ = matmul

    def __rmatmul__(self, other):
        return self.to_sparse().__rmatmul__(other)

    def mul(self, other):
        if isinstance(other, (int, float)) or (isinstance(other, ember.Tensor) and
                                               not other.is_sparse and other.dim() == 0):
            return self._with_values(self._vals * other)
        r = self.to_sparse().mul(other)
        return r if r is NotImplemented else coo_to_csr(r)

    __mul__ = __rmul__ = mul

    def add(self, other, *, alpha=1):
        r = self.to_sparse().add(other, alpha=alpha)
        return r if r is NotImplemented else coo_to_csr(r)

    __add__ = add

    def __radd__(self, other):
        return self.to_sparse().__radd__(other)


def coo_to_csr(coo: SparseCOOTensor) -> SparseCSRTensor:
    if isinstance(coo, SparseCSRTensor):
        return coo
    if coo.sparse_dim() != 2 or coo.dense_dim() != 0:
        raise RuntimeError("to_sparse_csr: expected a 2-D sparse COO matrix with no dense dims")
    c = coo.coalesce()
    rows, cols = c._indices()[0], c._indices()[1]
    counts = ember.bincount(rows, minlength=c.shape[0])
    crow = ember.cat([ember.zeros(1, dtype=ember.int64, device=rows.device),
                      counts.cumsum(0)])
    return SparseCSRTensor(crow, cols, c._values(), c.shape)


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None,
                      device=None, requires_grad: bool = False, check_invariants=None):
    """A sparse CSR matrix from compressed row pointers, column indices and values."""
    crow = ember.as_tensor(crow_indices, dtype=ember.int64, device=device)
    col = ember.as_tensor(col_indices, dtype=ember.int64, device=device)
    if not isinstance(values, ember.Tensor):
        values = ember.tensor(values, dtype=dtype, device=device)
    elif dtype is not None or device is not None:
        values = values.to(dtype=dtype, device=device)
    if crow.dim() != 1 or col.dim() != 1 or values.dim() != 1:
        raise RuntimeError("sparse_csr_tensor: expected 1-D crow_indices, col_indices and "
                           "values (batched or hybrid CSR is not supported by ember)")
    if col.shape[0] != values.shape[0]:
        raise RuntimeError(f"col_indices and values must have the same number of elements, "
                           f"but got {col.shape[0]} and {values.shape[0]}")
    if size is None:
        ncols = int(col.max()) + 1 if col.shape[0] else 0
        size = (crow.shape[0] - 1, ncols)
    if check_invariants:
        if crow.shape[0] != size[0] + 1:
            raise RuntimeError("`crow_indices.size(-1) == nrows + 1` is not satisfied.")
        if int(crow[-1]) != col.shape[0]:
            raise RuntimeError("`crow_indices[..., -1] == nnz` is not satisfied.")
    if requires_grad:
        values = values.detach().requires_grad_(True)
    return SparseCSRTensor(crow, col, values, size)
