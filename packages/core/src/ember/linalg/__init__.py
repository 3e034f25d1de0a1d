"""`ember.linalg`: PyTorch's torch.linalg namespace.

Each function here is bound from one table op named `linalg_<name>` (registered with
function=False, so it is not also `ember.linalg_<name>`); a few names are the table's own
public functions (`matmul`, `diagonal`), as in PyTorch.

>>> import ember
>>> ember.linalg.det(ember.eye(3)).item()
1.0
"""
from __future__ import annotations

from .._ops import FUNCTIONS as _FUNCTIONS
from .._ops import OPS as _OPS
from .._ops._codegen import make_function as _make_function
from .._ops.linalg import LinAlgError

_NAMES = ("norm", "vector_norm", "matrix_norm", "cond", "inv", "det", "slogdet", "solve",
          "solve_triangular", "cholesky", "qr", "svd", "svdvals", "eigh", "eigvalsh", "eig",
          "eigvals", "pinv", "matrix_rank", "lstsq", "cross", "matrix_power", "multi_dot",
          "vecdot")

for _name in _NAMES:
    _op = _OPS["linalg_" + _name]
    globals()[_name] = _make_function(_op, _name, as_method=False, with_out=_op.has_out)
    globals()[_name].__module__ = "ember.linalg"

matmul = _FUNCTIONS["matmul"]


def diagonal(A, *, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """`torch.linalg.diagonal`: `ember.diagonal` with the last two dims as defaults."""
    return A.diagonal(offset, dim1, dim2)


__all__ = ["LinAlgError", "matmul", "diagonal", *_NAMES]
