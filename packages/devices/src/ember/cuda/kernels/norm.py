"""GPU kernels for normalization: layer norm, batch norm, group norm (forward and backward).
Statistics accumulate in float32 (float64 for float64).

Batch norm is one program per channel (two passes for the statistics, one for the output), or,
for few channels of many values, P programs per channel (per-chunk mean and squared deviations
combined by Chan's formula; the backward's sums as per-chunk partials, summed in a fixed order:
deterministic); group norm is one program per (sample, group)."""
from __future__ import annotations

from ember._ops.registry import dtypes as D

from .base import _ACC, _FLOAT, _acc_dt, _acc_tl, _block, _cont, _launch, _lazy, cuda_kernel
from .reduction import _col_sum

# ---- batch norm ---------------------------------------------------------------------------------
_BN_MIN_CHUNK = 2048   # values a program handles at least when a channel is split
_BN_PROGRAMS = 528     # programs to aim for (about four per SM of an H100/H200)


def _bn_split(C, M):
    """(P, chunk): each channel's M values over P programs of chunk values (P == 1: one program
    per channel, the plain kernels). Few channels with many values each are split, as core's
    reductions split long rows."""
    P = min(-(-_BN_PROGRAMS // C), -(-M // _BN_MIN_CHUNK), 256)
    if P <= 1:
        return 1, M
    chunk = -(-M // P)
    chunk = -(-chunk // 1024) * 1024    # whole blocks
    return -(-M // chunk), chunk


@cuda_kernel("_native_batch_norm_legit_functional")
def _bn(be, op, x, w, b, rm, rv, training, momentum, eps):
    if x.dtype not in _FLOAT or x.ndim < 2 or x.numel() == 0:
        return NotImplemented
    C = x.shape[1]
    for t in (w, b, rm, rv):
        if t is not None and (t.numel() != C or t.dtype not in _FLOAT):
            return NotImplemented  # the CPU kernel raises numpy's error
    if not training and (rm is None or rv is None):
        return NotImplemented
    N = x.shape[0]
    S = x.numel() // (N * C)
    if training and N * S <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                         f"[{', '.join(str(s) for s in x.shape)}]")
    x = _cont(be, x.detach())
    sdt = D.float32 if x.dtype in (D.float16, D.bfloat16) else x.dtype
    y = be._new(tuple(x.shape), x.dtype, x.device)
    sm = be._new((C,), sdt, x.device)
    si = be._new((C,), sdt, x.device)
    nrm = be._new((C,), rm.dtype, x.device) if training and rm is not None else None
    nrv = be._new((C,), rv.dtype, x.device) if training and rv is not None else None
    dummy = x
    args = [x, w if w is not None else dummy, b if b is not None else dummy,
            _cont(be, rm) if rm is not None else dummy, _cont(be, rv) if rv is not None else dummy,
            y, sm, si, nrm if nrm is not None else dummy, nrv if nrv is not None else dummy,
            N, C, S, float(momentum), float(eps)]
    args[1] = _cont(be, args[1].detach())
    args[2] = _cont(be, args[2].detach())
    P, chunk = _bn_split(C, N * S)
    if P > 1:
        K = _lazy("norm_tl")
        acc = _acc_tl(x.dtype)
        p1 = p2 = x
        if training:
            p1 = be._new((C, P), _acc_dt(x.dtype), x.device)
            p2 = be._new((C, P), _acc_dt(x.dtype), x.device)
            _launch(be, K.bn_partial, (C, P), [x, x, x, p1, p2, N, C, S, chunk, P],
                    (), {"BWD": False, "ACC": acc, "BLOCK": 1024})
        _launch(be, K.bn_fwd_split, (C, P), args[:10] + [p1, p2, N, C, S, chunk, P] + args[13:],
                (), {"TRAIN": bool(training), "HAS_W": w is not None, "HAS_B": b is not None,
                 "HAS_RM": rm is not None, "HAS_RV": rv is not None, "ACC": acc,
                 "BLOCK": 1024, "BLOCK_P": _block(P, 16, 256)})
        return y, sm, si, nrm, nrv
    _launch(be, _lazy("norm_tl").bn_fwd, (C,), args,
            (), {"TRAIN": bool(training), "HAS_W": w is not None, "HAS_B": b is not None,
             "HAS_RM": rm is not None, "HAS_RV": rv is not None, "ACC": _acc_tl(x.dtype),
             "BLOCK": _block(N * S)})
    return y, sm, si, nrm, nrv


@cuda_kernel("native_batch_norm_backward")
def _bn_backward(be, op, g, x, w, rm, rv, save_mean, save_invstd, train, eps, mask):
    if (x.dtype not in _FLOAT or g.dtype is not x.dtype or x.ndim < 2 or x.numel() == 0
            or save_mean is None or save_invstd is None or tuple(g.shape) != tuple(x.shape)):
        return NotImplemented
    C = x.shape[1]
    N = x.shape[0]
    S = x.numel() // (N * C)
    x, g = _cont(be, x.detach()), _cont(be, g.detach())
    need_dx, need_dw, need_db = bool(mask[0]), bool(mask[1]) and w is not None, bool(mask[2])
    dx = be._new(tuple(x.shape), x.dtype, x.device) if need_dx else None
    dw = be._new((C,), w.dtype, x.device) if need_dw else None
    db = be._new((C,), x.dtype if w is None else w.dtype, x.device) if need_db else None
    d = x
    P, chunk = _bn_split(C, N * S)
    if P > 1:
        K = _lazy("norm_tl")
        acc = _acc_tl(x.dtype)
        sm, si = _cont(be, save_mean), _cont(be, save_invstd)
        p1 = be._new((C, P), _acc_dt(x.dtype), x.device)
        p2 = be._new((C, P), _acc_dt(x.dtype), x.device)
        _launch(be, K.bn_partial, (C, P), [x, g, sm, p1, p2, N, C, S, chunk, P],
                (), {"BWD": True, "ACC": acc, "BLOCK": 1024})
        _launch(be, K.bn_bwd_split, (C, P),
                [g, x, _cont(be, w.detach()) if w is not None else d, sm, si,
                 dx if need_dx else d, dw if need_dw else d, db if need_db else d, p1, p2,
                 N, C, S, chunk, P],
                (), {"TRAIN": bool(train), "HAS_W": w is not None, "NEED_DX": need_dx,
                 "NEED_DW": need_dw, "NEED_DB": need_db, "ACC": acc, "BLOCK": 1024,
                 "BLOCK_P": _block(P, 16, 256)})
        return dx, dw, db
    _launch(be, _lazy("norm_tl").bn_bwd, (C,),
            [g, x, _cont(be, w.detach()) if w is not None else d, _cont(be, save_mean),
             _cont(be, save_invstd), dx if need_dx else d, dw if need_dw else d,
             db if need_db else d, N, C, S],
            (), {"TRAIN": bool(train), "HAS_W": w is not None, "NEED_DX": need_dx,
             "NEED_DW": need_dw, "NEED_DB": need_db, "ACC": _acc_tl(x.dtype),
             "BLOCK": _block(N * S)})
    return dx, dw, db


# ---- group norm ---------------------------------------------------------------------------------
@cuda_kernel("native_group_norm")
def _gn(be, op, x, w, b, N, C, HxW, group, eps):
    if (x.dtype not in _FLOAT or x.numel() == 0 or group <= 0 or C % group
            or x.numel() != N * C * HxW or x.ndim < 2):
        return NotImplemented
    x = _cont(be, x.detach())
    y = be._new(tuple(x.shape), x.dtype, x.device)
    mean = be._new((N, group), x.dtype, x.device)
    rstd = be._new((N, group), x.dtype, x.device)
    Cg = C // group
    _launch(be, _lazy("norm_tl").gn_fwd, (N * group,),
            [x, _cont(be, w.detach()) if w is not None else x,
             _cont(be, b.detach()) if b is not None else x, y, mean, rstd, C, HxW, Cg, group,
             float(eps)],
            (), {"HAS_W": w is not None, "HAS_B": b is not None, "ACC": _acc_tl(x.dtype),
             "BLOCK": _block(Cg * HxW)})
    return y, mean, rstd


@cuda_kernel("native_group_norm_backward")
def _gn_backward(be, op, g, x, mean, rstd, w, N, C, HxW, group, mask):
    if (x.dtype not in _FLOAT or g.dtype is not x.dtype or x.numel() == 0 or group <= 0
            or C % group or x.numel() != N * C * HxW or tuple(g.shape) != tuple(x.shape)):
        return NotImplemented
    x, g = _cont(be, x.detach()), _cont(be, g.detach())
    mean, rstd = _cont(be, mean.detach()), _cont(be, rstd.detach())
    Cg = C // group
    K = _lazy("norm_tl")
    acc = _acc_tl(x.dtype)
    gi = gw = gb = None
    if mask[0]:
        gi = be._new(tuple(x.shape), x.dtype, x.device)
        _launch(be, K.gn_bwd_dx, (N * group,),
                [g, x, _cont(be, w.detach()) if w is not None else x, mean, rstd, gi, C, HxW,
                 Cg, group], (), {"HAS_W": w is not None, "ACC": acc, "BLOCK": _block(Cg * HxW)})
    if mask[1] or mask[2]:
        gw = be._new((C,), g.dtype, x.device) if mask[1] else None
        gb = be._new((C,), g.dtype, x.device) if mask[2] else None
        _launch(be, K.gn_bwd_dwb, (C,),
                [g, x, mean, rstd, gw if gw is not None else x, gb if gb is not None else x,
                 N, C, HxW, Cg, group],
                (), {"NEED_DW": bool(mask[1]), "NEED_DB": bool(mask[2]), "ACC": acc,
                 "BLOCK": _block(N * HxW)})
    return gi, gw, gb


@cuda_kernel("native_layer_norm")
def _layer_norm(be, op, x, normalized_shape, w, b, eps):
    if x.dtype not in _ACC or x.dtype._cat < 2 or not len(normalized_shape):
        return NotImplemented
    K = _lazy("norm_tl")
    metas = op.meta(x, normalized_shape, w, b, eps)  # PyTorch's shape checks and dtypes
    N = 1
    for s in normalized_shape:
        N *= s
    x = _cont(be, x)
    R = x.numel() // N if N else 0
    y = be._new(tuple(metas[0].shape), metas[0].dtype, x.device)
    mean = be._new(tuple(metas[1].shape), metas[1].dtype, x.device)
    rstd = be._new(tuple(metas[2].shape), metas[2].dtype, x.device)
    if R and N:
        wc = _cont(be, w) if w is not None else x
        bc = _cont(be, b) if b is not None else x
        _launch(be, K.layer_norm_fwd, (R,), [x, wc, bc, y, mean, rstd, N, float(eps)], (),
                {"HAS_W": w is not None, "HAS_B": b is not None, "BLOCK": 1024})
    return y, mean, rstd


@cuda_kernel("native_layer_norm_backward")
def _layer_norm_backward(be, op, g, x, normalized_shape, mean, rstd, w, b, mask):
    """dx in one kernel (a row per step, ROWS rows a program) plus per-program partial weight
    and bias grads, summed by _col_sum; rows longer than 8192 take the decomposition."""
    if (x.dtype not in (D.float32, D.float16, D.bfloat16) or g.dtype is not x.dtype
            or not len(normalized_shape)):
        return NotImplemented
    N = 1
    for s in normalized_shape:
        N *= s
    if N == 0 or N > 8192 or x.numel() == 0:
        return NotImplemented
    K = _lazy("norm_tl")
    op.meta(g, x, normalized_shape, mean, rstd, w, b, mask)  # PyTorch's checks
    x, g, mean, rstd = _cont(be, x), _cont(be, g), _cont(be, mean), _cont(be, rstd)
    M = x.numel() // N
    P = min(M, 528)
    rows = -(-M // P)
    P = -(-M // rows)
    dx = be._new(tuple(x.shape), x.dtype, x.device)
    dwp = be._new((P, N), D.float32, x.device)
    dbp = be._new((P, N), D.float32, x.device)
    block = max(16, 1 << (N - 1).bit_length())
    wc = _cont(be, w) if w is not None else x
    _launch(be, K.layer_norm_bwd, (P,), [g, x, wc, mean, rstd, dx, dwp, dbp, M, N, rows], (),
            {"HAS_W": w is not None, "BLOCK": block})
    dw = db = None
    if mask[1] and w is not None:
        dw = be._new(tuple(w.shape), w.dtype, x.device)
        _col_sum(be, dwp, dw, P, N, False)
    if mask[2] and b is not None:
        db = be._new(tuple(b.shape), b.dtype, x.device)
        _col_sum(be, dbp, db, P, N, False)
    return (dx if mask[0] else None), dw, db
