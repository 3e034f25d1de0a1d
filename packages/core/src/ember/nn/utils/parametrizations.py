"""`torch.nn.utils.parametrizations`: weight_norm, spectral_norm and orthogonal, each a
parametrization module registered through `parametrize` (the state dict holds
`parametrizations.<name>.original*`).

>>> import ember
>>> m = ember.nn.utils.parametrizations.weight_norm(ember.nn.Linear(3, 2))
>>> sorted(m.state_dict())
['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
"""
from __future__ import annotations

from enum import Enum, auto

import ember
import ember.nn.functional as F

from ..modules.module import Module
from . import parametrize
from ._norms import householder_product, make_orthogonal, matrix_exp, norm_except_dim
from ._norms import weight_norm as _weight_norm

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def _is_orthogonal(Q) -> bool:
    n, k = Q.size(-2), Q.size(-1)
    eye = ember.eye(k, dtype=Q.dtype, device=Q.device)
    eps = 10.0 * n * ember.finfo(Q.dtype).eps
    return bool(((Q.mH @ Q - eye).abs() <= eps + 1e-5 * eye.abs()).all())   # allclose


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map: _OrthMaps, *, use_trivialization=True) -> None:
        super().__init__()
        if weight.is_complex() and orthogonal_map == _OrthMaps.householder:
            raise ValueError("The householder parametrization does not support complex "
                             "tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                X = ember.cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mH                                    # skew-symmetric
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = matrix_exp(A)
            else:
                eye = ember.eye(n, dtype=A.dtype, device=A.device)
                Q = ember.linalg.solve(eye - 0.5 * A, eye + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if "base" in self._buffers:
            Q = self.base @ Q
        return Q.mT if transposed else Q

    @ember.no_grad()
    def right_inverse(self, Q):
        if Q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {Q.shape}.")
        Q_init = Q
        n, k = Q.size(-2), Q.size(-1)
        transpose = n < k
        if transpose:
            Q = Q.mT
            n, k = k, n
        if "base" not in self._buffers:
            if self.orthogonal_map != _OrthMaps.householder:
                raise NotImplementedError("It is not possible to assign to the matrix "
                                          "exponential or the Cayley parametrizations when "
                                          "use_trivialization=False.")
            A = _householder_reflectors(Q)
            return A.mT if transpose else A
        if n == k:
            Q = Q.clone() if _is_orthogonal(Q) else make_orthogonal(Q)
        else:
            N = ember.randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype, device=Q.device)
            Q = make_orthogonal(ember.cat([Q, N], dim=-1))
        self.base = Q
        neg_id = ember.zeros_like(Q_init)
        neg_id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return neg_id


def _householder_reflectors(Q):
    """geqrf(Q)'s reflectors with the diagonal set to the signs that make householder_product
    give back Q (LAPACK's geqrf through numpy's raw QR)."""
    import numpy as np
    q = Q.detach().cpu().numpy()
    flat = q.reshape(-1, *q.shape[-2:])
    out = np.empty_like(flat)
    for i, m in enumerate(flat):
        h, tau = np.linalg.qr(m, mode="raw")     # h: the reflectors, transposed (Fortran order)
        a = h.T.copy()
        d = np.sign(np.diagonal(a)).copy()
        d[tau == 0.0] *= -1
        np.fill_diagonal(a, d)
        out[i] = a
    return ember.tensor(out.reshape(q.shape), dtype=Q.dtype, device=Q.device)


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Constrain `module.<name>` to orthogonal (unitary) matrices (columns or rows orthonormal).

    >>> import ember
    >>> m = ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(4, 4))
    >>> w = m.weight
    >>> bool(((w @ w.T - ember.eye(4)).abs() < 1e-5).all())
    True
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, ember.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError("Expected a matrix or batch of matrices. "
                         f"Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        square = weight.size(-2) == weight.size(-1)
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int = 0):
    """weight = g * v / ||v||, with magnitude g (original0) and direction v (original1)."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def _compat_hook(state_dict, prefix, local_metadata, strict, missing_keys,
                     unexpected_keys, error_msgs) -> None:
        # checkpoints from the legacy weight_norm hold <name>_g / <name>_v
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)
    module._register_load_state_dict_pre_hook(_compat_hook)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, "
                             f"{ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.size()
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    @ember.no_grad()
    def _power_method(self, weight_mat, n_power_iterations: int) -> None:
        for _ in range(n_power_iterations):
            self._u.copy_(F.normalize(ember.mv(weight_mat, self._v), dim=0, eps=self.eps))
            self._v.copy_(F.normalize(ember.mv(weight_mat.mH, self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = ember.vdot(u, ember.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def _default_dim(module) -> int:
    from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
    return 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """weight / sigma(weight), sigma estimated by power iteration (one step per training call)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, ember.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    dim = _default_dim(module) if dim is None else dim
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
