"""SparseCOOTensor: indices (sparse_dim, nnz) int64 and values (nnz, *dense_dims), as PyTorch's
sparse COO layout. Not a dense ember.Tensor: dense ops take `.to_dense()`; the operations
graph programs use (mm with a dense matrix, sum, coalesce, transpose, scalar multiply) are
written in ember ops on the values, so gradients flow to the values and the dense operand."""
from __future__ import annotations

import ember

__all__ = ["SparseCOOTensor", "sparse_coo_tensor", "to_sparse"]


class _Layout:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"ember.{self.name}"


sparse_coo = _Layout("sparse_coo")


class SparseCOOTensor:
    is_sparse = True
    layout = sparse_coo
    is_sparse_csr = False

    def __init__(self, indices, values, size, coalesced: bool = False):
        self._idx, self._vals = indices, values
        self._size = ember.Size(size)
        self._coalesced = coalesced

    # ---- metadata ---------------------------------------------------------------------------
    shape = property(lambda self: self._size)
    dtype = property(lambda self: self._vals.dtype)
    device = property(lambda self: self._vals.device)
    requires_grad = property(lambda self: self._vals.requires_grad)
    grad_fn = property(lambda self: self._vals.grad_fn)

    def size(self, dim=None):
        return self._size if dim is None else self._size[dim]

    def dim(self) -> int:
        return len(self._size)

    ndim = property(dim)

    def sparse_dim(self) -> int:
        return self._idx.shape[0]

    def dense_dim(self) -> int:
        return self._vals.dim() - 1

    def _nnz(self) -> int:
        return self._vals.shape[0]

    def numel(self) -> int:
        n = 1
        for s in self._size:
            n *= s
        return n

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

    def requires_grad_(self, flag: bool = True):
        self._vals.requires_grad_(flag)
        return self

    def detach(self):
        return SparseCOOTensor(self._idx, self._vals.detach(), self._size, self._coalesced)

    # ---- conversions ------------------------------------------------------------------------
    def _linear(self, idx=None):
        """Row-major linear index of each entry over the sparse dims."""
        idx = self._idx if idx is None else idx
        lin = ember.zeros(idx.shape[1], dtype=ember.int64, device=idx.device)
        for d in range(idx.shape[0]):
            lin = lin * self._size[d] + idx[d]
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
            idx.append(rest % self._size[d])
            rest = rest // self._size[d]
        idx = ember.stack(idx[::-1]) if idx else uniq.reshape(0, -1)
        return SparseCOOTensor(idx, vals, self._size, coalesced=True)

    def to_dense(self, dtype=None, *, masked_grad=None):
        sd = self.sparse_dim()
        flat_n = 1
        for s in self._size[:sd]:
            flat_n *= s
        dense_shape = tuple(self._size[sd:])
        out = ember.zeros((flat_n,) + dense_shape, dtype=self.dtype, device=self.device)
        out = out.index_add(0, self._linear(), self._vals)
        out = out.reshape(tuple(self._size))
        return out if dtype is None else out.to(dtype)

    def to_sparse(self, sparse_dim=None):
        return self

    def to_sparse_csr(self):
        from ._csr import coo_to_csr
        return coo_to_csr(self)

    def to(self, *args, **kwargs):
        vals = self._vals.to(*args, **kwargs)
        return SparseCOOTensor(self._idx.to(vals.device), vals, self._size, self._coalesced)

    def t(self):
        if self.sparse_dim() != 2 or self.dim() != 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, "
                               f"but got {self.sparse_dim()} sparse and {self.dense_dim()} "
                               "dense dimensions")
        return SparseCOOTensor(self._idx.flip(0), self._vals, (self._size[1], self._size[0]))

    def transpose(self, d0, d1):
        if self.dim() == 2 and {d0 % 2, d1 % 2} == {0, 1}:
            return self.t()
        raise NotImplementedError("SparseCOOTensor.transpose: only the 2-D transpose")

    # ---- arithmetic -------------------------------------------------------------------------
    def mul(self, other):
        if isinstance(other, (int, float)) or (isinstance(other, ember.Tensor)
                                               and other.dim() == 0):
            return SparseCOOTensor(self._idx, self._vals * other, self._size, self._coalesced)
        if isinstance(other, ember.Tensor):        # dense: multiply at the stored entries
            picked = other.expand(self._size)[tuple(self._idx)]
            return SparseCOOTensor(self._idx, self._vals * picked, self._size, self._coalesced)
        return NotImplemented

    __mul__ = __rmul__ = mul

    def __truediv__(self, other):
        return self.mul(1.0 / other) if isinstance(other, (int, float)) else \
            SparseCOOTensor(self._idx, self._vals / other, self._size, self._coalesced)

    def __neg__(self):
        return self.mul(-1)

    def add(self, other):
        if isinstance(other, SparseCOOTensor):
            if other._size != self._size:
                raise RuntimeError(f"add: expected sizes to match, got {tuple(self._size)} "
                                   f"and {tuple(other._size)}")
            return SparseCOOTensor(ember.cat([self._idx, other._idx], 1),
                                   ember.cat([self._vals, other._vals], 0), self._size)
        if isinstance(other, ember.Tensor):
            return self.to_dense() + other
        return NotImplemented

    __add__ = add

    def __radd__(self, other):
        return self.add(other)

    def mm(self, dense):
        return mm(self, dense)

    __matmul__ = matmul = mm

    def sum(self, dim=None, keepdim=False, dtype=None):
        if dim is None:
            return self._vals.sum(dtype=dtype) if dtype else self._vals.sum()
        return sum(self, dim)

    def __repr__(self):
        return (f"tensor(indices={self._idx},\n       values={self._vals},\n       "
                f"size={tuple(self._size)}, nnz={self._nnz()}, layout=ember.sparse_coo)")


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
    """sparse (n, m) @ dense (m, p) -> dense (n, p); differentiable in both values and dense."""
    if isinstance(dense, SparseCOOTensor):
        dense = dense.to_dense()
    if not isinstance(sparse, SparseCOOTensor):
        return ember.mm(sparse, dense)
    if sparse.sparse_dim() != 2 or sparse.dense_dim() != 0:
        raise RuntimeError("sparse.mm: expected a 2-D sparse matrix with no dense dims")
    if dense.dim() != 2 or dense.shape[0] != sparse.shape[1]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({sparse.shape[0]}x"
                           f"{sparse.shape[1]} and {'x'.join(map(str, dense.shape))})")
    rows, cols = sparse._idx[0], sparse._idx[1]
    contrib = sparse._vals.unsqueeze(-1) * dense.index_select(0, cols)   # (nnz, p)
    out = ember.zeros(sparse.shape[0], dense.shape[1], dtype=contrib.dtype,
                      device=dense.device)
    return out.index_add(0, rows, contrib)


def sum(input, dim=None, dtype=None):  # noqa: A001 - torch.sparse.sum
    """Sum of all entries (a dense scalar) or over `dim`: sparse when sparse dims remain."""
    if dim is None:
        return input._vals.sum() if dtype is None else input._vals.sum(dtype=dtype)
    dims = [dim] if isinstance(dim, int) else list(dim)
    dense = input.to_dense().sum(dims)
    if dtype is not None:
        dense = dense.to(dtype)
    left = input.sparse_dim() - len([d for d in dims if d % input.dim() < input.sparse_dim()])
    return to_sparse(dense, left) if left > 0 else dense
