"""`ember.sparse`: sparse COO and CSR matrices for graph programs (torch.sparse's basics).

>>> import ember
>>> a = ember.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
>>> ember.sparse.mm(a, ember.ones(2, 1)).tolist()
[[2.0], [3.0]]
"""
from ._coo import SparseCOOTensor, sparse_coo, sparse_coo_tensor, sum, to_sparse  # noqa: A004
from ._coo import mm as _coo_mm
from ._csr import SparseCSRTensor, coo_to_csr, sparse_csr, sparse_csr_tensor

__all__ = ["SparseCOOTensor", "SparseCSRTensor", "sparse_coo", "sparse_csr", "sparse_coo_tensor",
           "sparse_csr_tensor", "mm", "sum", "spmm", "to_sparse", "to_sparse_csr", "addmm",
           "softmax", "log_softmax"]


def mm(mat1, mat2):
    """sparse (COO or CSR) @ dense -> dense, differentiable in the values and the dense side."""
    return _coo_mm(mat1, mat2)


spmm = mm


def to_sparse_csr(x):
    """The CSR form of a 2-D dense tensor or COO matrix."""
    return coo_to_csr(x if isinstance(x, (SparseCOOTensor, SparseCSRTensor)) else to_sparse(x))


def softmax(input, dim, *, dtype=None):
    """Softmax over dim of the stored entries (unspecified entries count as -inf, as
    torch.sparse.softmax): a sparse result with the input's indices."""
    return _softmax(input, dim, dtype, log=False)


def log_softmax(input, dim, *, dtype=None):
    """log of sparse.softmax at the stored entries."""
    return _softmax(input, dim, dtype, log=True)


def _softmax(input, dim, dtype, log):
    import ember
    x = input.to_sparse().coalesce()
    vals = x._values() if dtype is None else x._values().to(dtype)
    sd = x.sparse_dim()
    dim = dim % x.dim()
    if dim >= sd:  # a dense dim: an ordinary softmax over it
        f = ember.log_softmax if log else ember.softmax
        return x._with_values(f(vals, dim - sd + 1))
    idx = x._indices()
    key = ember.zeros(idx.shape[1], dtype=ember.int64)  # the entry's line along dim
    for d in range(sd):
        if d != dim:
            key = key * x.shape[d] + idx[d]
    n = int(key.max()) + 1 if key.numel() else 0
    shape = (n,) + tuple(vals.shape[1:])
    big = ember.full(shape, float("-inf"), dtype=vals.dtype).scatter_reduce(
        0, key.reshape((-1,) + (1,) * (vals.dim() - 1)).expand(vals.shape), vals, "amax")
    z = vals - big.index_select(0, key).detach()
    tot = ember.zeros(shape, dtype=vals.dtype).index_add(0, key, z.exp())
    r = z - tot.log().index_select(0, key) if log else z.exp() / tot.index_select(0, key)
    out = x._with_values(r)
    return out if isinstance(input, SparseCOOTensor) else out.to_sparse_csr()


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """beta * mat + alpha * (mat1 @ mat2) with a sparse mat1."""
    return beta * mat + alpha * mm(mat1, mat2)
