"""SparseCOOTensor: indices (sparse_dim, nnz) int64 and values (nnz, *dense_dims), as PyTorch's
sparse COO layout; an ember.Tensor (see _base). The operations graph programs use (mm with a
dense matrix, sum, coalesce, transpose, add, multiply by a scalar or a dense tensor) are
written in ember ops on the values, so gradients flow to the values and the dense operand."""
from __future__ import annotations

import ember

from ._base import Layout, SparseTensor

__all__ = ["SparseCOOTensor", "sparse_coo_tensor", "to_sparse"]

_Layout = Layout
sparse_coo = Layout("sparse_coo")


class SparseCOOTensor(SparseTensor):
    is_sparse = True
    layout = sparse_coo

    def _init(self, indices, values, size, coalesced: bool = False):
        self._setup(values, size)
        self._idx = indices
        self._coalesced = coalesced

    def __init__(self, *args, **kwargs):  # SparseCOOTensor(indices, values, size[, coalesced])
        pass

    def __new__(cls, indices, values, size, coalesced: bool = False):
        return cls._new(indices, values, size, coalesced)

    def _with_values(self, values):
        return SparseCOOTensor(self._idx.to(values.device), values, self._shape,
                               self._coalesced)

    def sparse_dim(self) -> int:
        return self._idx.shape[0]

    def dense_dim(self) -> int:
        return self._vals.dim() - 1

    def is_coalesced(self) -> bool:
        return self._coalesced

    def _indices(self):
        return self._idx

    def _values(self):
        return self._vals

    def indices(self):
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._idx

    def values(self):
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._vals

    def _repr_pieces(self):
        return [("indices", self._idx), ("values", self._vals)]

    def _dense_graph(self):
        return self.to_dense()

    # ---- conversions ------------------------------------------------------------------------
    def _linear(self, idx=None):
        """Row-major linear index of each entry over the sparse dims."""
        idx = self._idx if idx is None else idx
        lin = ember.zeros(idx.shape[1], dtype=ember.int64, device=idx.device)
        for d in range(idx.shape[0]):
            lin = lin * self._shape[d] + idx[d]
        return lin

    def coalesce(self):
        """Sorted unique indices, values of duplicates summed."""
        if self._coalesced:
            return self
        lin = self._linear()
        uniq, inverse = ember.unique(lin, sorted=True, return_inverse=True)
        vals = ember.zeros((uniq.shape[0],) + tuple(self._vals.shape[1:]), dtype=self.dtype,
                           device=self.device).index_add(0, inverse, self._vals)
        idx, rest = [], uniq
        for d in reversed(range(self.sparse_dim())):
            idx.append(rest % self._shape[d])
            rest = rest // self._shape[d]
        idx = ember.stack(idx[::-1]) if idx else uniq.reshape(0, -1)
        return SparseCOOTensor(idx, vals, self._shape, coalesced=True)

    def to_dense(self, dtype=None, *, masked_grad=None):
        """The dense tensor (differentiable in the values)."""
        sd = self.sparse_dim()
        flat_n = 1
        for s in self._shape[:sd]:
            flat_n *= s
        dense_shape = tuple(self._shape[sd:])
        out = ember.zeros((flat_n,) + dense_shape, dtype=self.dtype, device=self.device)
        out = out.index_add(0, self._linear(), self._vals)
        out = out.reshape(tuple(self._shape))
        return out if dtype is None else out.to(dtype)

    def to_sparse(self, sparse_dim=None):
        return self

    def to_sparse_csr(self):
        from ._csr import coo_to_csr
        return coo_to_csr(self)

    def t(self):
        if self.sparse_dim() != 2 or self.dim() != 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, "
                               f"but got {self.sparse_dim()} sparse and {self.dense_dim()} "
                               "dense dimensions")
        return SparseCOOTensor(self._idx.flip(0), self._vals, (self._shape[1], self._shape[0]))

    def transpose(self, d0, d1):
        if self.dim() == 2 and {d0 % 2, d1 % 2} == {0, 1}:
            return self.t()
        raise NotImplementedError("SparseCOOTensor.transpose: only the 2-D transpose")

    # ---- arithmetic -------------------------------------------------------------------------
    def mul(self, other):
        """sparse * scalar, sparse * dense (at the stored entries): sparse, as PyTorch."""
        if isinstance(other, (int, float)) or (isinstance(other, ember.Tensor) and
                                               not other.is_sparse and other.dim() == 0):
            return SparseCOOTensor(self._idx, self._vals * other, self._shape, self._coalesced)
        if isinstance(other, SparseTensor):
            return to_sparse(self.to_dense() * other.to_dense(), self.sparse_dim())
        if isinstance(other, ember.Tensor):        # dense: multiply at the stored entries
            picked = other.expand(self._shape)[tuple(self._idx)]
            return SparseCOOTensor(self._idx, self._vals * picked, self._shape, self._coalesced)
        return NotImplemented

    __mul__ = __rmul__ = mul

    def add(self, other, *, alpha=1):
        """sparse + sparse: sparse; sparse + dense: refused, as PyTorch (dense + sparse works)."""
        if isinstance(other, SparseTensor):
            other = other.to_sparse()
            if tuple(other.shape) != self._shape:
                raise RuntimeError(f"add: expected 'self' and 'other' to have same size, but "
                                   f"self has size {list(self._shape)} while other has size "
                                   f"{list(other.shape)} (FYI: dense-sparse addition does not "
                                   "currently support broadcasting)")
            ov = other._vals if alpha == 1 else other._vals * alpha
            if other._idx is self._idx:
                return SparseCOOTensor(self._idx, self._vals + ov, self._shape, self._coalesced)
            r = SparseCOOTensor(ember.cat([self._idx, other._idx], 1),
                                ember.cat([self._vals, ov], 0), self._shape)
            return r.coalesce() if self._coalesced and other._coalesced else r
        if isinstance(other, ember.Tensor):
            raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                               "instead.")
        return NotImplemented

    __add__ = add

    def __radd__(self, other):  # dense + sparse: dense
        if isinstance(other, ember.Tensor):
            return other + self.to_dense()
        return NotImplemented

    def sub(self, other, *, alpha=1):
        return self.add(other, alpha=-alpha)

    __sub__ = sub

    def __rsub__(self, other):
        if isinstance(other, ember.Tensor):
            return other - self.to_dense()
        return NotImplemented

    def mm(self, other):
        return mm(self, other)

    def matmul(self, other):
        if isinstance(other, ember.Tensor) and not other.is_sparse and other.dim() == 1:
            return mm(self, other.unsqueeze(1)).squeeze(1)
        return mm(self, other)

    __matmul__ = matmul

    def __rmatmul__(self, other):  # dense @ sparse = (sparse^T @ dense^T)^T
        if isinstance(other, ember.Tensor):
            return mm(self.t(), other.t()).t()
        return NotImplemented


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None,
                      requires_grad: bool = False, check_invariants=None, is_coalesced=None):
    """A sparse COO tensor from (sparse_dim, nnz) indices and (nnz, ...) values."""
    indices = ember.as_tensor(indices, dtype=ember.int64, device=device)
    if not isinstance(values, ember.Tensor):
        values = ember.tensor(values, dtype=dtype, device=device)
    elif dtype is not None or device is not None:
        values = values.to(dtype=dtype, device=device)
    if indices.dim() != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    if indices.shape[1] != values.shape[0]:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: "
                           f"{indices.shape[1]}, nnz from values: {values.shape[0]}")
    sd = indices.shape[0]
    if size is None:
        maxes = indices.amax(1).tolist() if indices.shape[1] else [-1] * sd
        size = [m + 1 for m in maxes] + list(values.shape[1:])
    size = tuple(size)
    if len(size) != sd + values.dim() - 1:
        raise RuntimeError(f"number of dimensions must be sparse_dim ({sd}) + dense_dim "
                           f"({values.dim() - 1}), but got {len(size)}")
    if indices.shape[1] and check_invariants is not False:
        over = (indices >= ember.tensor(size[:sd]).unsqueeze(1)).any(1)
        if bool(over.any()) or bool((indices < 0).any()):
            d = int(over.nonzero()[0, 0]) if bool(over.any()) else 0
            raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is "
                               f"{size[d]} but found index {int(indices[d].max())}")
    if requires_grad:
        values = values.detach().requires_grad_(True)
    return SparseCOOTensor(indices, values, size, coalesced=bool(is_coalesced))


def to_sparse(dense, sparse_dim=None):
    """The COO form of a dense tensor (entries that are nonzero over the dense dims)."""
    sd = dense.dim() if sparse_dim is None else sparse_dim
    lead = dense.reshape(tuple(dense.shape[:sd]) + (-1,)) if sd < dense.dim() else \
        dense.unsqueeze(-1)
    nz = (lead != 0).any(-1).nonzero()                 # (nnz, sparse_dim)
    idx = nz.T.contiguous()
    values = dense[tuple(idx)] if sd else dense.unsqueeze(0)
    return SparseCOOTensor(idx, values, dense.shape, coalesced=True)


def mm(sparse, dense):
    """sparse (n, m) @ dense (m, p) -> dense (n, p); differentiable in both values and dense.
    sparse @ sparse -> sparse."""
    if isinstance(sparse, SparseTensor) and isinstance(dense, SparseTensor):
        return to_sparse(mm(sparse, dense.to_dense()))
    if isinstance(sparse, SparseTensor) and not isinstance(sparse, SparseCOOTensor):
        sparse = sparse.to_sparse()
    if not isinstance(sparse, SparseCOOTensor):
        return ember.mm(sparse, dense)
    if sparse.sparse_dim() != 2 or sparse.dense_dim() != 0:
        raise RuntimeError("sparse.mm: expected a 2-D sparse matrix with no dense dims")
    if dense.dim() != 2:
        raise RuntimeError(f"addmm: 2D tensor expected, got {dense.dim()}D tensor for "
                           "argument #3 'dense'")
    if dense.shape[0] != sparse.shape[1]:
        raise RuntimeError(f"addmm: Argument #3 (dense): Expected dim 0 size {sparse.shape[1]}"
                           f", got {dense.shape[0]}")
    if dense.dtype != sparse.dtype:
        from ember._dispatch import torch_name
        raise RuntimeError(f"expected scalar type {torch_name(sparse.dtype)} but found "
                           f"{torch_name(dense.dtype)}")
    rows, cols = sparse._idx[0], sparse._idx[1]
    contrib = sparse._vals.unsqueeze(-1) * dense.index_select(0, cols)   # (nnz, p)
    out = ember.zeros(sparse.shape[0], dense.shape[1], dtype=contrib.dtype,
                      device=dense.device)
    return out.index_add(0, rows, contrib)


def sum(input, dim=None, dtype=None):  # noqa: A001 - torch.sparse.sum
    """Sum of all entries (a dense scalar) or over `dim`: sparse when sparse dims remain."""
    if not isinstance(input, SparseCOOTensor):
        input = input.to_sparse()
    if dim is None:
        return input._vals.sum() if dtype is None else input._vals.sum(dtype=dtype)
    dims = [dim] if isinstance(dim, int) else list(dim)
    dense = input.to_dense().sum(dims)
    if dtype is not None:
        dense = dense.to(dtype)
    left = input.sparse_dim() - len([d for d in dims if d % input.dim() < input.sparse_dim()])
    return to_sparse(dense, left) if left > 0 else dense
