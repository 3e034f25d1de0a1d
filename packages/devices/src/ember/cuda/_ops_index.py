"""GPU kernels: indexing, gather/scatter, masks, search and counting ops.

TABLE maps op qualnames to kernels `f(backend, op, *args)` (see _ops.kernel: return
NotImplemented to fall back); HOST lists the ops of this family that still run their CPU kernel on
host copies, with the reason (test_cuda_opdb.py holds the backend to it)."""
from __future__ import annotations

TABLE: dict = {}

HOST: dict[str, str] = {
    "_embedding_bag": "no GPU kernel yet",
    "_embedding_bag_backward_ember": "no GPU kernel yet",
    "_max_unpool_ember": "no GPU kernel yet",
    "_pad_index": "no GPU kernel yet",
    "_pad_index_backward": "no GPU kernel yet",
    "_pool_gather": "no GPU kernel yet",
    "as_strided_scatter": "no GPU kernel yet",
    "bincount": "no GPU kernel yet",
    "bucketize.Tensor": "no GPU kernel yet",
    "diagonal_scatter": "no GPU kernel yet",
    "embedding_renorm_": "no GPU kernel yet",
    "gather": "no GPU kernel yet",
    "histc": "no GPU kernel yet",
    "index.Tensor": "no GPU kernel yet",
    "index_add": "no GPU kernel yet",
    "index_copy": "no GPU kernel yet",
    "index_fill.int_Scalar": "no GPU kernel yet",
    "index_put": "no GPU kernel yet",
    "index_put_": "no GPU kernel yet",
    "index_select": "no GPU kernel yet",
    "masked_scatter": "no GPU kernel yet",
    "masked_select": "no GPU kernel yet",
    "nonzero": "no GPU kernel yet",
    "one_hot": "no GPU kernel yet",
    "put": "no GPU kernel yet",
    "repeat_interleave.self_Tensor": "no GPU kernel yet",
    "scatter": "no GPU kernel yet",
    "scatter_add": "no GPU kernel yet",
    "scatter_reduce.two": "no GPU kernel yet",
    "searchsorted.Tensor": "no GPU kernel yet",
    "select_scatter": "no GPU kernel yet",
    "take": "no GPU kernel yet",
}
