"""Matrix products through cuBLAS (nvmath-python's low-level bindings: raw pointers, no cupy).

cuBLASLt (`_blaslt`, a cached plan per problem) serves what it can; plain cuBLAS the rest.
Row-major C = A @ B is column-major C^T = B^T @ A^T, so B goes first. A row-major operand whose
columns are contiguous is passed as is (op N, ld = row stride); a transposed view (rows
contiguous) is passed with op T; anything else is copied contiguous first.
float32 uses TF32 tensor cores unless ember.get_float32_matmul_precision() is "highest".
"""
from __future__ import annotations

import os

import numpy as np

from ember import _dtype as D

from . import _blaslt
from . import _runtime as rt
from ._streams import current_stream_handle

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
        from ember._device import get_backend
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
    if _LT and _blaslt.gemm(a, b, out, opa, lda, opb, ldb, M, N, K, nb, sa, sb, ct, al, be,
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
    va, vb, vo = rt.fake_view(a), rt.fake_view(b), rt.fake_view(out)
    acc = np.float64 if out.dtype is D.float64 else np.float32
    r = alpha * np.matmul(va.astype(acc), vb.astype(acc))
    if beta != 0.0:
        r = r + beta * vo.astype(acc)
    vo[...] = r.astype(vo.dtype)
    return out


def matmul(x, y):
    """torch.matmul on cuda tensors (1-D, 2-D and broadcast batched cases)."""
    if x.dtype is not y.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {x.dtype} != "
                           f"{y.dtype}")
    if not supported(x.dtype):
        return None
    dx, dy = x.ndim, y.ndim
    if dx == 0 or dy == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{dx}D and {dy}D")
    xs = x.unsqueeze(0) if dx == 1 else x
    ys = y.unsqueeze(-1) if dy == 1 else y
    if xs.shape[-1] != ys.shape[-2]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({xs.shape[-2]}x"
                           f"{xs.shape[-1]} and {ys.shape[-2]}x{ys.shape[-1]})")
    M, K, N = xs.shape[-2], xs.shape[-1], ys.shape[-1]
    if xs.ndim == 2 and ys.ndim == 2:
        out = _empty((M, N), x.dtype, x.device)
        if M and N:
            if K == 0:
                out.zero_()
            else:
                gemm(xs, ys, out)
    elif ys.ndim == 2 and xs.is_contiguous():
        # fold the batch into M
        bshape = tuple(xs.shape[:-2])
        out2 = matmul(xs.reshape(-1, K), ys)
        out = out2.reshape(bshape + (M, N))
    else:
        from ember._size import broadcast_shapes
        bshape = tuple(broadcast_shapes(tuple(xs.shape[:-2]), tuple(ys.shape[:-2])))
        nb = 1
        for s in bshape:
            nb *= s
        xb = xs.expand(bshape + (M, K)).reshape(nb, M, K)
        yb = ys.expand(bshape + (K, N)).reshape(nb, K, N)
        out = _empty((nb, M, N), x.dtype, x.device)
        if nb and M and N:
            if K == 0:
                out.zero_()
            else:
                gemm(xb, yb, out, batch=nb)
        out = out.reshape(bshape + (M, N))
    if dx == 1:
        out = out.squeeze(-2)
    if dy == 1:
        out = out.squeeze(-1)
    return out
