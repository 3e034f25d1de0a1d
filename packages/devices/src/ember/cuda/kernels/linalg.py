"""GPU kernels for linear algebra: matmul (cuBLAS/cuBLASLt through `..blas`), the cross product,
cdist and trace. einsum has no kernel here: its entry's decomposition (core's
`_ops/_einsum_decomp.py`) contracts pairwise through this matmul."""
from __future__ import annotations

import math

from ember._ops.registry import Tensor
from ember._ops.registry import dtypes as D

from ..blas import matmul
from .base import (
    _ACC,
    _FLOAT,
    _acc_dt,
    _acc_tl,
    _cont,
    _launch,
    _lazy,
    _ok,
    _on_cuda,
    _pw,
    _rblock,
    _view,
    be_dtypes,
    cuda_kernel,
)


@cuda_kernel("trace")
def _trace(be, op, x):
    m = op.meta(x)
    if not _ok(x.dtype, m.dtype):
        return NotImplemented
    out = be._new((), m.dtype, x.device)
    n = min(x.shape)
    if n == 0:
        be.fill_(out, 0)
        return out
    x = _cont(be, x)
    _launch(be, _lazy("reduction_tl").diag_sum, (1,), [x, out, n, x.shape[1]], (),
            {"ACC": _ACC[m.dtype], "BLOCK": _rblock(n)})
    return out


class _CrossPart:
    qualname = "linalg_cross"
    pw_idx = (0, 1, 2, 3)

    @staticmethod
    def pointwise(o, a1, b2, a2, b1):
        return o.sub(o.mul(a1, b2), o.mul(a2, b1))


@cuda_kernel("linalg_cross")
def _linalg_cross(be, op, a, b, dim=-1):
    from .pointwise import broadcast_strides
    if _on_cuda(a, b) is None:
        return NotImplemented
    if a.ndim != b.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    m = op.meta(a, b, dim)
    ok = be_dtypes()
    if a.dtype not in ok or b.dtype not in ok or m.dtype is D.bool:
        return NotImplemented
    from ember._ops.registry import normalize_dim
    shape = tuple(m.shape)
    d = normalize_dim(dim, len(shape))
    out = be._new(shape, m.dtype, a.device)
    if out.numel() == 0:
        return out
    cdt = D.float32 if m.dtype in (D.float16, D.bfloat16) else m.dtype
    part = list(shape)
    part[d] = 1
    sa = broadcast_strides(tuple(a.shape), a._stride, shape)
    sb = broadcast_strides(tuple(b.shape), b._stride, shape)

    def comp(t, st, c):
        return _view(t, part, st, t._offset + c * st[d])

    for c in range(3):  # out[c] = a[c+1] b[c+2] - a[c+2] b[c+1]: one launch per component
        i, j = (c + 1) % 3, (c + 2) % 3
        _pw(be, _CrossPart, (comp(a, sa, i), comp(b, sb, j), comp(a, sa, j), comp(b, sb, i)),
            {0, 1, 2, 3}, comp(out, list(out._stride), c), m.dtype, cdt)
    return out


# ---- cdist ---------------------------------------------------------------------------------------
@cuda_kernel("cdist")
def _cdist(be, op, x1, x2, p=2.0, compute_mode=None):
    from ..blas import matmul
    from ..runtime.driver import FAKE
    m = op.meta(x1, x2, p, compute_mode)  # PyTorch's checks, the output shape
    if x1.dtype not in _FLOAT or x2.dtype is not x1.dtype:
        return NotImplemented
    shape = tuple(m.shape)
    out = be._new(shape, x1.dtype, x1.device)
    R, Q, M = shape[-2], shape[-1], x1.shape[-1]
    if out.numel() == 0:
        return out
    if M == 0:
        return be.fill_(out, 0)
    B = out.numel() // (R * Q)
    cdt = _acc_dt(x1.dtype)  # fp16/bf16 computed in float32, as core's CPU kernel

    def rows(t, n):
        t = t.detach().expand(shape[:-2] + (n, M))
        if not (t.is_contiguous() and t.dtype is cdt):
            t = be._copy_new(t, cdt)
        return t.reshape(B, n, M)

    a, b = rows(x1, R), rows(x2, Q)
    K = _lazy("linalg_tl")
    acc = _acc_tl(cdt)
    grid = (B, -(-R // 32), -(-Q // 32))
    use_mm = p == 2 and (compute_mode == 1 or (compute_mode in (None, 0) and (R > 25 or Q > 25)))
    if use_mm:  # |a|^2 + |b|^2 - 2 a.b, the product through cuBLAS (PyTorch's and core's way)
        ab = matmul(a, b.transpose(1, 2))
        if ab is None:
            return NotImplemented
        na = be._new((B * R,), cdt, a.device)
        nb = be._new((B * Q,), cdt, a.device)
        _launch(be, K.sqnorm_rows, (-(-(B * R) // 128),), [a, na, B * R, M],
                (), {"ACC": acc, "BLOCK": 128})
        _launch(be, K.sqnorm_rows, (-(-(B * Q) // 128),), [b, nb, B * Q, M],
                (), {"ACC": acc, "BLOCK": 128})
        _launch(be, K.cdist_mm_fin, grid, [ab, na, nb, out, R, Q],
                (), {"ACC": acc, "BLOCK_R": 32, "BLOCK_C": 32})
        return out
    p = float(p)
    mode = 0 if p == 0 else 1 if p == 1 else 2 if p == 2 else 3 if p == math.inf else 4
    import numpy as np
    hi = float(np.float32(p)) if mode == 4 else 1.0
    lo = float(np.float32(p - hi)) if mode == 4 else 0.0
    _launch(be, K.cdist_direct, grid, [a, b, out, R, Q, M, hi, lo],
            (), {"MODE": mode, "ACC": acc, "LIBDEVICE": not FAKE, "BLOCK_R": 32, "BLOCK_C": 32})
    return out


@cuda_kernel("matmul")
def _matmul(be, op, x, y):
    if not (isinstance(y, Tensor) and y.device == x.device):
        return NotImplemented
    r = matmul(x, y)
    return NotImplemented if r is None else r
