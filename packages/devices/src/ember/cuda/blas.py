"""Matrix products through cuBLAS (nvmath-python's low-level bindings: raw pointers, no cupy).

cuBLASLt (`blaslt`, a cached plan per problem) serves what it can; plain cuBLAS the rest.
Row-major C = A @ B is column-major C^T = B^T @ A^T, so B goes first. A row-major operand whose
columns are contiguous is passed as is (op N, ld = row stride); a transposed view (rows
contiguous) is passed with op T; anything else is copied contiguous first.
float32 uses TF32 tensor cores unless ember.get_float32_matmul_precision() is "highest".
"""
from __future__ import annotations

import os

import numpy as np

from ember._ops.registry import Tensor
from ember._ops.registry import dtypes as D

from . import blaslt
from .runtime import driver as rt
from .runtime.streams import current_stream_handle

_handles: dict = {}
_R = {D.float32: 0, D.float64: 1, D.float16: 2, D.bfloat16: 14}   # cudaDataType
_ONE = {np.float32: np.ones(1, np.float32), np.float64: np.ones(1, np.float64)}
_ZERO = {np.float32: np.zeros(1, np.float32), np.float64: np.zeros(1, np.float64)}
_ONE_P = {k: v.ctypes.data for k, v in _ONE.items()}
_ZERO_P = {k: v.ctypes.data for k, v in _ZERO.items()}


# cuBLASLt with cached plans first (EMBER_CUBLASLT=0: plain cuBLAS only)
_LT = os.environ.get("EMBER_CUBLASLT", "1") != "0"
_CT: dict = {}   # "64F"/"32F"/"TF32" -> cublasComputeType_t, and "algo" (looked up once)
_new = None      # the cuda backend's _new(shape, dtype, device): no dispatch for outputs


def _handle(device: int):
    from nvmath.bindings import cublas
    h = _handles.get(device)
    if h is None:
        h = _handles[device] = cublas.create()
        _CT.update({"64F": int(cublas.ComputeType.COMPUTE_64F),
                    "32F": int(cublas.ComputeType.COMPUTE_32F),
                    "TF32": int(cublas.ComputeType.COMPUTE_32F_FAST_TF32),
                    "algo": int(cublas.GemmAlgo.DEFAULT)})
    return cublas, h


def _empty(shape, dtype, device):
    global _new
    if _new is None:
        from ember._ops.registry import get_backend
        _new = get_backend("cuda")._new
    return _new(shape, dtype, device)


def supported(dtype) -> bool:
    return dtype in _R


def _operand(t):
    """(tensor, op, ld) for a 2-D or batched (..., r, c) view, copying when needed."""
    sr, sc = t.stride(-2), t.stride(-1)
    r, c = t.shape[-2], t.shape[-1]
    if sc == 1 and sr >= max(c, 1):
        return t, 0, sr
    if sr == 1 and sc >= max(r, 1):
        return t, 1, sc
    t = t.contiguous()
    return t, 0, max(c, 1)


def gemm(a, b, out, alpha=1.0, beta=0.0, batch=None):
    """out[i] = alpha * a[i] @ b[i] + beta * out[i]; a (B?, M, K), b (B?, K, N), out contiguous
    (B?, M, N). Batch strides: a and b may have batch stride 0 (broadcast)."""
    import ember
    if rt.FAKE:
        return _fake_gemm(a, b, out, alpha, beta)
    dev = out.device.index or 0
    cublas, h = _handle(dev)
    stream = current_stream_handle(dev)
    a, opa, lda = _operand(a)
    b, opb, ldb = _operand(b)
    M, K = a.shape[-2], a.shape[-1]
    N = b.shape[-1]
    dt = out.dtype
    if dt is D.float64:
        ct, st = _CT["64F"], np.float64
    elif dt is D.float32 and ember.get_float32_matmul_precision() != "highest":
        ct, st = _CT["TF32"], np.float32
    else:
        ct, st = _CT["32F"], np.float32
    # host scalars by address (numpy's .ctypes costs microseconds a call: the constants' are cached)
    al = _ONE_P[st] if alpha == 1.0 else np.array([alpha], st)
    be = _ZERO_P[st] if beta == 0.0 else np.array([beta], st)
    keep = (al, be)  # noqa: F841 (the arrays live until the call returns)
    al = al if al.__class__ is int else al.ctypes.data
    be = be if be.__class__ is int else be.ctypes.data
    rt.ensure_context(dev)
    nb = 1 if batch is None else batch
    sa = a.stride(0) if a.ndim == 3 else 0
    sb = b.stride(0) if b.ndim == 3 else 0
    if _LT and blaslt.gemm(a, b, out, opa, lda, opb, ldb, M, N, K, nb, sa, sb, ct, al, be,
                            stream, dev):
        return out
    cublas.set_stream(h, stream)
    cublas.gemm_strided_batched_ex(
        h, opb, opa, N, M, K, al,
        b.data_ptr(), _R[dt], ldb, sb,
        a.data_ptr(), _R[dt], lda, sa,
        be, out.data_ptr(), _R[dt], N, M * N, nb,
        ct, _CT["algo"])
    return out


def _fake_gemm(a, b, out, alpha, beta):
    """The fake device's cuBLAS (its memory is host memory): numpy on views of the operands."""
    if rt.NOLAUNCH:
        return out
    from .runtime.capture import fake_exec
    va, vb, vo = rt.fake_view(a), rt.fake_view(b), rt.fake_view(out)
    acc = np.float64 if out.dtype is D.float64 else np.float32

    def run():  # recorded instead while the stream captures (a CUDA graph)
        r = alpha * np.matmul(va.astype(acc), vb.astype(acc))
        if beta != 0.0:
            r = r + beta * vo.astype(acc)
        vo[...] = r.astype(vo.dtype)
    fake_exec(run, current_stream_handle(out.device.index or 0))
    return out


def _as(t, shape, stride):
    """A view of t's memory with other sizes/strides, made without dispatch: operands handed to
    cuBLAS inside this kernel, never returned (so no view bookkeeping)."""
    return Tensor._make(t._storage, shape, stride, t._offset, t.dtype, t.device)


def _batched(t, bshape, nb):
    """t (..., r, c) broadcast to bshape + (r, c), as an (nb, r, c) operand with one batch stride
    (0 for a broadcast operand); a contiguous copy where the batch dims do not collapse (as
    PyTorch's expand().reshape())."""
    r, c = t._shape[-2], t._shape[-1]
    sr, sc = t._stride[-2], t._stride[-1]
    tb, sb = t._shape[:-2], t._stride[:-2]
    pad = len(bshape) - len(tb)
    strides = (0,) * pad + tuple(0 if n == 1 else st for n, st in zip(tb, sb))
    bs = expect = None
    for n, st in zip(reversed(bshape), reversed(strides)):
        if n == 1:
            continue
        if bs is None:
            bs, expect = st, st * n
        elif st == expect:
            expect = st * n
        else:
            full = _as(t, tuple(bshape) + (r, c), strides + (sr, sc))
            from ember._ops.registry import get_backend
            full = get_backend("cuda")._copy_new(full, t.dtype)
            return _as(full, (nb, r, c), (r * c, c, 1))
    return _as(t, (nb, r, c), (0 if bs is None else bs, sr, sc))


def matmul(x, y):
    """torch.matmul on cuda tensors (1-D, 2-D and broadcast batched cases). The batch is folded
    into M or passed as one batch stride; no op dispatch inside."""
    if x.dtype is not y.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {x.dtype} != "
                           f"{y.dtype}")
    if not supported(x.dtype):
        return None
    xsh, ysh = x._shape, y._shape
    dx, dy = len(xsh), len(ysh)
    if dx == 0 or dy == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{dx}D and {dy}D")
    # 1-D operands as (1, K) and (K, 1) matrices (unit dims strided so cuBLAS takes them as is)
    xs = _as(x, (1,) + xsh, (max(xsh[0], 1) * x._stride[0],) + x._stride) if dx == 1 else x
    ys = _as(y, ysh + (1,), y._stride + (1,)) if dy == 1 else y
    M, K = xs._shape[-2], xs._shape[-1]
    K2, N = ys._shape[-2], ys._shape[-1]
    if K != K2:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({M}x{K} and {K2}x{N})")
    if len(xs._shape) == 2 and len(ys._shape) == 2:
        bshape = ()
    elif len(ys._shape) == 2:
        bshape = xs._shape[:-2]
    else:
        from ember._ops.registry import broadcast_shapes
        bshape = tuple(broadcast_shapes(xs._shape[:-2], ys._shape[:-2]))
    nb = 1
    for n in bshape:
        nb *= n
    # the result in its final shape (1-D operands' unit dims dropped), written as (nb, M, N)
    final = bshape + ((M,) if dx > 1 else ()) + ((N,) if dy > 1 else ())
    out = _empty(final, x.dtype, x.device)
    if not (nb and M and N):
        return out
    if K == 0:
        return out.zero_()
    if not bshape:
        gemm(xs, ys, _as(out, (M, N), (N, 1)))
    elif len(ys._shape) == 2 and x.is_contiguous():  # fold the batch into M
        gemm(_as(xs, (nb * M, K), (K, 1)), ys, _as(out, (nb * M, N), (N, 1)))
    else:
        gemm(_batched(xs, bshape, nb), _batched(ys, bshape, nb), _as(out, (nb, M, N),
                                                                    (M * N, N, 1)), batch=nb)
    return out
