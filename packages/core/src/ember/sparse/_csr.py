"""SparseCSRTensor: a 2-D matrix as crow_indices (rows + 1), col_indices and values (nnz), as
PyTorch's sparse CSR layout. Conversions and products go through the COO form."""
from __future__ import annotations

import ember

from ._coo import SparseCOOTensor, _Layout
from ._coo import mm as _coo_mm

__all__ = ["SparseCSRTensor", "sparse_csr_tensor", "sparse_csr", "coo_to_csr"]

sparse_csr = _Layout("sparse_csr")


class SparseCSRTensor:
    is_sparse = False
    is_sparse_csr = True
    layout = sparse_csr

    def __init__(self, crow, col, values, size):
        self._crow, self._col, self._vals = crow, col, values
        self._size = ember.Size(size)

    shape = property(lambda self: self._size)
    dtype = property(lambda self: self._vals.dtype)
    device = property(lambda self: self._vals.device)
    requires_grad = property(lambda self: self._vals.requires_grad)

    def size(self, dim=None):
        return self._size if dim is None else self._size[dim]

    def dim(self) -> int:
        return len(self._size)

    ndim = property(dim)

    def crow_indices(self):
        return self._crow

    def col_indices(self):
        return self._col

    def values(self):
        return self._vals

    def _nnz(self) -> int:
        return self._vals.shape[0]

    def requires_grad_(self, flag: bool = True):
        self._vals.requires_grad_(flag)
        return self

    def to_sparse(self, sparse_dim=None):
        """The COO form (coalesced: CSR entries are row-major and unique)."""
        counts = self._crow[1:] - self._crow[:-1]
        rows = ember.repeat_interleave(ember.arange(self._size[0], device=self._crow.device),
                                       counts)
        return SparseCOOTensor(ember.stack([rows, self._col]), self._vals, self._size,
                               coalesced=True)

    def to_sparse_csr(self):
        return self

    def to_dense(self, dtype=None, *, masked_grad=None):
        return self.to_sparse().to_dense(dtype)

    def mm(self, dense):
        return _coo_mm(self.to_sparse(), dense)

    __matmul__ = matmul = mm

    def mul(self, other):
        if isinstance(other, (int, float)):
            return SparseCSRTensor(self._crow, self._col, self._vals * other, self._size)
        return NotImplemented

    __mul__ = __rmul__ = mul

    def __repr__(self):
        return (f"tensor(crow_indices={self._crow},\n       col_indices={self._col},\n"
                f"       values={self._vals}, size={tuple(self._size)}, nnz={self._nnz()},\n"
                f"       layout=ember.sparse_csr)")


def coo_to_csr(coo: SparseCOOTensor) -> SparseCSRTensor:
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
