"""Helpers shared by the weight-norm / spectral-norm / orthogonal parametrizations and the
legacy hooks: PyTorch's `norm_except_dim` and `_weight_norm`, a composite matrix exponential and
Householder product (written in ember ops, so they are differentiable)."""
from __future__ import annotations

import math

import ember


def norm_except_dim(v, pow: float = 2, dim: int = 0):
    """The `pow`-norm over every dim but `dim` (kept with size 1 elsewhere); dim=-1: the norm of
    the whole tensor (PyTorch's convention for "no dim")."""
    if dim == -1:
        return ember.linalg.vector_norm(v, pow)
    dims = [d for d in range(v.ndim) if d != dim]
    return ember.linalg.vector_norm(v, pow, dim=dims, keepdim=True)


def weight_norm(v, g, dim: int = 0):
    """v * (g / ||v||) with the norm taken by norm_except_dim (PyTorch's `_weight_norm`)."""
    return v * (g / norm_except_dim(v, 2, dim))


def matrix_exp(A):
    """exp(A) for (batches of) square matrices: Taylor series of degree 18 after scaling A to a
    norm below 1/2, then squaring back (error far below float64 epsilon for skew matrices)."""
    n = A.shape[-1]
    norm = float(A.detach().abs().sum(-2).amax()) if A.numel() else 0.0
    s = max(0, int(math.ceil(math.log2(norm))) + 1) if norm > 0.5 else 0
    B = A / (2.0 ** s)
    eye = ember.eye(n, dtype=A.dtype, device=A.device).expand(A.shape)
    term, out = eye, eye
    for k in range(1, 19):
        term = (term @ B) / k
        out = out + term
    for _ in range(s):
        out = out @ out
    return out


def householder_product(A, tau):
    """Q = H_1 ... H_k with H_i = I - tau_i v_i v_i^H, v_i the i-th column of A below the
    diagonal with an implicit 1 on it; returns Q's first k columns (linalg.householder_product)."""
    n, k = A.shape[-2], A.shape[-1]
    eye = ember.eye(n, dtype=A.dtype, device=A.device)
    mask = ember.ones(n, k, dtype=ember.bool, device=A.device).tril(-1)
    V = ember.where(mask, A, ember.zeros((), dtype=A.dtype, device=A.device)) + eye[:, :k]
    Q = eye.expand(*A.shape[:-2], n, n)
    for i in range(k):
        v = V[..., :, i:i + 1]                                   # (..., n, 1)
        Q = Q - (Q @ v) * tau[..., i:i + 1].unsqueeze(-1) @ v.mH
    return Q[..., :, :k]


def make_orthogonal(A):
    """The Q of A's QR decomposition with R's diagonal made positive."""
    Q, R = ember.linalg.qr(A)
    return Q * R.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)
