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
           "sparse_csr_tensor", "mm", "sum", "spmm", "to_sparse", "to_sparse_csr", "addmm"]


def mm(mat1, mat2):
    """sparse (COO or CSR) @ dense -> dense, differentiable in the values and the dense side."""
    if isinstance(mat1, SparseCSRTensor):
        mat1 = mat1.to_sparse()
    return _coo_mm(mat1, mat2)


spmm = mm


def to_sparse_csr(x):
    """The CSR form of a 2-D dense tensor or COO matrix."""
    return coo_to_csr(x if isinstance(x, SparseCOOTensor) else to_sparse(x))


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """beta * mat + alpha * (mat1 @ mat2) with a sparse mat1."""
    return beta * mat + alpha * mm(mat1, mat2)
