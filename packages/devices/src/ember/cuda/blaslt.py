"""Matrix products through cuBLASLt with a cached plan per problem (nvmath-python's low-level
bindings: raw pointers, no cupy/torch).

cuBLAS's gemm_ex picks its kernel by heuristics on every call (~20 us of host time on the H200's
host, measured by gpu_gemm_bench.py); here the descriptors, layouts and the heuristic's algorithm
are made once per (shapes, strides, ops, dtype, alignment) and each call is one cublasLtMatmul.
`gemm` returns False when it cannot serve a problem; `blas` then uses plain cuBLAS.
"""
from __future__ import annotations

import numpy as np

from ember._ops.registry import dtypes as D

_R = {D.float32: 0, D.float64: 1, D.float16: 2, D.bfloat16: 14}   # cudaDataType
_WS = 32 << 20       # workspace per (device, stream), as PyTorch's default on Hopper
_state: dict = {}    # device -> Lt handle
_plans: dict = {}
_ws: dict = {}       # (device, stream) -> buffer (kept alive)
_failed = [False]


_mod: list = []


def _lt():
    if not _mod:
        from nvmath.bindings import cublasLt
        _mod.append(cublasLt)
    return _mod[0]


def _set(fn, obj, attr, value, dt):
    a = np.array([value], dt)
    fn(obj, int(attr), a.ctypes.data, a.nbytes)


def _layout(lt, dt, rows, cols, ld, batch, stride):
    lay = lt.matrix_layout_create(dt, rows, cols, ld)
    if batch > 1:
        A = lt.MatrixLayoutAttribute
        _set(lt.matrix_layout_set_attribute, lay, A.BATCH_COUNT, batch, np.int32)
        _set(lt.matrix_layout_set_attribute, lay, A.STRIDED_BATCH_OFFSET, stride, np.int64)
    return lay


def _align(p: int) -> int:
    return min(256, p & -p)


def _plan(lt, h, key):
    (dev, rdt, ct, opa, opb, M, N, K, lda, ldb, nb, sa, sb, ala, alb, alc) = key
    st = 1 if rdt == 1 else 0  # scale type: double for float64, else float
    desc = lt.matmul_desc_create(ct, st)
    A = lt.MatmulDescAttribute
    _set(lt.matmul_desc_set_attribute, desc, A.TRANSA, opb, np.int32)
    _set(lt.matmul_desc_set_attribute, desc, A.TRANSB, opa, np.int32)
    # column-major C^T (N x M) = op(B^T) (N x K) @ op(A^T) (K x M), as blas.gemm
    la = _layout(lt, rdt, *((N, K) if opb == 0 else (K, N)), ldb, nb, sb)
    lb = _layout(lt, rdt, *((K, M) if opa == 0 else (M, K)), lda, nb, sa)
    lc = _layout(lt, rdt, N, M, N, nb, M * N)
    pref = lt.matmul_preference_create()
    P = lt.MatmulPreferenceAttribute
    for attr, v in ((P.MAX_WORKSPACE_BYTES, _WS), (P.MIN_ALIGNMENT_A_BYTES, alb),
                    (P.MIN_ALIGNMENT_B_BYTES, ala), (P.MIN_ALIGNMENT_C_BYTES, alc),
                    (P.MIN_ALIGNMENT_D_BYTES, alc)):
        # the heuristic assumes 256-byte aligned buffers unless told: views may be less
        _set(lt.matmul_preference_set_attribute, pref, attr, v,
             np.uint64 if attr == P.MAX_WORKSPACE_BYTES else np.uint32)
    res = lt.MatmulHeuristicResult(1)
    count = np.zeros(1, np.int32)
    lt.matmul_algo_get_heuristic(h, desc, la, lb, lc, lc, pref, 1, res.ptr, count.ctypes.data)
    lt.matmul_preference_destroy(pref)
    if count[0] < 1 or int(res.state) != 0:
        return None
    return (desc, la, lb, lc, res)  # res holds the algorithm (its first field)


def gemm(a, b, out, opa, lda, opb, ldb, M, N, K, nb, sa, sb, ct, al, be, stream, dev) -> bool:
    """out = al * a @ b + be * out via a cached Lt plan; False: not served (use cuBLAS).
    al, be: host addresses of the scalars."""
    if _failed[0]:
        return False
    dt = out.dtype
    rdt = _R.get(dt)
    pa, pb, pc = a.data_ptr(), b.data_ptr(), out.data_ptr()
    if rdt is None or (pa | pb | pc) & 15:
        return False
    key = (dev, rdt, ct, opa, opb, M, N, K, lda, ldb, nb, sa, sb, _align(pa), _align(pb),
           _align(pc))
    plan = _plans.get(key)
    try:
        lt = _lt()
        h = _state.get(dev)
        if h is None:
            h = _state[dev] = lt.create()
        if plan is None:
            plan = _plans[key] = _plan(lt, h, key)
        if plan is False or plan is None:
            _plans[key] = False
            return False
        ws = _ws.get((dev, stream))
        if ws is None:
            from ember._ops.registry import device as Device
            from ember._ops.registry import get_backend
            ws = _ws[(dev, stream)] = get_backend("cuda").empty(_WS, Device("cuda", dev))
        desc, la, lb, lc, res = plan
        lt.matmul(h, desc, al, pb, la, pa, lb, be, pc, lc, pc, lc, res.ptr, ws.ptr, _WS,
                  stream)
        return True
    except Exception:  # an older library or binding: plain cuBLAS from now on
        _failed[0] = True
        return False
