"""GPU kernels: creation, movement, complex views, special functions and linear algebra.

TABLE maps op qualnames to kernels `f(backend, op, *args)` (see _ops.kernel: return
NotImplemented to fall back); HOST lists the ops of this family that still run their CPU kernel on
host copies, with the reason (test_cuda_opdb.py holds the backend to it)."""
from __future__ import annotations

TABLE: dict = {}

HOST: dict[str, str] = {
    "angle": "no GPU kernel yet",
    "cat": "no GPU kernel yet",
    "conj_physical": "no GPU kernel yet",
    "diag": "no GPU kernel yet",
    "diag_embed": "no GPU kernel yet",
    "digamma": "no GPU kernel yet",
    "polygamma": "no GPU kernel yet",
    "einsum": "no GPU kernel yet",
    "eye": "no GPU kernel yet",
    "flip": "no GPU kernel yet",
    "linspace": "no GPU kernel yet",
    "logspace": "no GPU kernel yet",
    "mul": "no GPU kernel yet",
    "nan_to_num": "no GPU kernel yet",
    "repeat": "no GPU kernel yet",
    "roll": "no GPU kernel yet",
    "linalg_cholesky": "no GPU kernel yet",
    "linalg_cross": "no GPU kernel yet",
    "linalg_det": "no GPU kernel yet",
    "linalg_eig": "no GPU kernel yet",
    "linalg_eigh": "no GPU kernel yet",
    "linalg_eigvals": "no GPU kernel yet",
    "linalg_eigvalsh": "no GPU kernel yet",
    "linalg_inv": "no GPU kernel yet",
    "linalg_lstsq": "no GPU kernel yet",
    "linalg_matrix_rank": "no GPU kernel yet",
    "linalg_qr": "no GPU kernel yet",
    "linalg_slogdet": "no GPU kernel yet",
    "linalg_solve": "no GPU kernel yet",
    "linalg_solve_triangular": "no GPU kernel yet",
    "linalg_svd": "no GPU kernel yet",
    "linalg_svdvals": "no GPU kernel yet",
}
