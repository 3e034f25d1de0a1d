"""GPU kernels for linear algebra: matmul (cuBLAS/cuBLASLt through `..blas`), the cross product,
cdist, trace and einsum (pairwise contractions through the backend's own matmul)."""
from __future__ import annotations

import math

from ember import _dtype as D
from ember._tensor import Tensor

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
    from ember._size import normalize_dim
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


# ---- einsum: pairwise contractions through the backend's own ops (cuBLAS matmul) ----------------
@cuda_kernel("einsum")
def _einsum(be, op, equation, tensors, path=None):
    from ember._ops.einsum import _check
    ts = list(tensors)
    dev = _on_cuda(*ts) if ts else None
    subs, out, size = _check(equation, ts)  # PyTorch's errors
    if dev is None or ts[0].dtype not in (D.float16, D.bfloat16, D.float32, D.float64):
        return NotImplemented  # integers: no cuBLAS path; complex: no codegen
    from ember._grad_mode import no_grad
    with no_grad():
        ops = []
        for t, s in zip(ts, subs):
            t, s = _einsum_prep(t.detach(), s, size)
            ops.append((t, s))
        cur, cs = ops[0]
        for k in range(1, len(ops)):
            later = set(out).union(*(set(s) for _, s in ops[k + 1:]))
            cur, cs = _einsum_pair(cur, cs, ops[k][0], ops[k][1], later, size)
        keep = set(out)
        alone = tuple(i for i, c in enumerate(cs) if c not in keep)
        if alone:
            cur = cur.sum(alone)
            cs = "".join(c for c in cs if c in keep)
        r = cur.permute([cs.index(c) for c in out]) if out else cur
        if not r.is_contiguous() or any(r._storage is t._storage for t in ts):
            r = be._copy_new(r, r.dtype)  # a fresh tensor, never a view of an input
        return r


def _einsum_prep(t, s, size):
    """t with its repeated subscripts reduced to diagonals and size-1 dims broadcast."""
    while True:
        rep = next((c for c in s if s.count(c) > 1), None)
        if rep is None:
            break
        i = s.index(rep)
        j = s.index(rep, i + 1)
        t = t.diagonal(0, i, j)  # the diagonal goes last
        s = "".join(c for k, c in enumerate(s) if k not in (i, j)) + rep
    want = tuple(size[c] for c in s)
    if tuple(t.shape) != want:
        t = t.expand(want)
    return t, s


def _einsum_pair(a, sa, b, sb, later, size):
    """Contract two operands as one batched matmul: batch letters (both, kept), left (a only),
    right (b only), contracted (both, not kept); letters only one side has and nobody needs
    are summed first."""
    def sum_alone(x, s, other):
        alone = tuple(i for i, c in enumerate(s) if c not in later and c not in other)
        if not alone:
            return x, s
        return x.sum(alone), "".join(c for i, c in enumerate(s) if i not in alone)

    a, sa2 = sum_alone(a, sa, sb)
    b, sb = sum_alone(b, sb, sa)
    sa = sa2
    batch = [c for c in sa if c in sb and c in later]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    contr = [c for c in sa if c in sb and c not in later]

    def n(cs):
        p = 1
        for c in cs:
            p *= size[c]
        return p

    a2 = a.permute([sa.index(c) for c in batch + left + contr]).reshape(
        (n(batch), n(left), n(contr)))
    b2 = b.permute([sb.index(c) for c in batch + contr + right]).reshape(
        (n(batch), n(contr), n(right)))
    r = (a2 @ b2).reshape(tuple(size[c] for c in batch + left + right))
    return r, "".join(batch + left + right)


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
