"""`ember.sparse`: sparse COO tensors for graph programs (torch.sparse's basics).

>>> import ember
>>> a = ember.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
>>> ember.sparse.mm(a, ember.ones(2, 1)).tolist()
[[2.0], [3.0]]
"""
from ._coo import SparseCOOTensor, mm, sparse_coo, sparse_coo_tensor, sum, to_sparse  # noqa: A004

__all__ = ["SparseCOOTensor", "sparse_coo", "sparse_coo_tensor", "mm", "sum", "spmm", "to_sparse",
           "addmm"]

spmm = mm


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """beta * mat + alpha * (mat1 @ mat2) with a sparse mat1."""
    return beta * mat + alpha * mm(mat1, mat2)
