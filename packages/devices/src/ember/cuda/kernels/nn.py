"""GPU kernels for the nn family: embedding (forward, backward, bags, renorm), one_hot,
constant and reflect/replicate/circular padding."""
from __future__ import annotations

import math

from ember._ops.registry import dtypes as D

from ..runtime import device_errors
from .base import _ACC, _cont, _launch, _lazy, cuda_kernel
from .indexing import (
    _BLOCK,
    _INTS,
    _PROGS,
    _in_range,
    _index_kernel,
    _minmax,
    _mm_buffer,
    _ok_dtype,
    _raise,
)
from .pointwise import Operand


# ---- constant_pad_nd: a fill and one strided copy ------------------------------------------------
@cuda_kernel("constant_pad_nd")
def _constant_pad(be, op, x, pad, value=0):
    from ember._ops.registry import pad_pairs

    from .pointwise import Unsupported
    m = op.meta(x, pad, value)  # checks and the output shape
    out = be._new(tuple(m.shape), x.dtype, x.device)
    try:
        if out.numel():
            be.fill_(out, value)
    except Unsupported:
        return NotImplemented
    src_shape, src_off, dst_off = list(x.shape), 0, 0
    for d, lo, hi in pad_pairs(pad, x.ndim, "constant_pad_nd"):
        src_off += max(-lo, 0) * x.stride(d)
        dst_off += max(lo, 0) * out.stride(d)
        src_shape[d] = max(0, x.shape[d] - max(-lo, 0) - max(-hi, 0))
    if math.prod(src_shape) and out.numel():
        src = x.detach()._alias(tuple(src_shape), x.stride(), x._offset + src_off)
        dst = out._alias(tuple(src_shape), out.stride(), dst_off)
        be._copy_into(dst, src)
    return out


# ---- one_hot -----------------------------------------------------------------------------------
@_index_kernel("one_hot")
def _one_hot(be, op, x, num_classes=-1):
    args = (x, num_classes)
    (mm,) = _minmax(be, [x]) if x.numel() else [(0, -1)]
    if x.numel() and mm[0] < 0:
        return _raise(be, op, args)
    if num_classes == -1:
        if x.numel() == 0:
            return _raise(be, op, args)
        num_classes = mm[1] + 1
    elif x.numel() and mm[1] >= num_classes:
        return _raise(be, op, args)
    xc = _cont(be, x)
    n = x.numel()
    out = be._new(tuple(x.shape) + (num_classes,), D.int64, x.device)
    if n * num_classes:
        _launch(be, _lazy("indexing_tl").one_hot, (-(-(n * num_classes) // _BLOCK),),
                [xc, out, n, num_classes], (), {"BLOCK": _BLOCK})
    return out


# ---- reflect / replicate / circular padding ----------------------------------------------------
_PAD_MODE = {"reflect": 0, "replicate": 1, "circular": 2}


def _pad_geometry(shape, pad, mode):
    """(M, (N1, N2, N3), (L1, L2, L3), (O1, O2, O3)) with the padded dims last, unpadded ones
    as size 1; PyTorch's errors from core's checks."""
    from ember._ops.registry import check_index_pad, pad_pairs
    pairs = pad_pairs(pad, len(shape), mode)
    check_index_pad(shape, pairs, mode)
    k = len(pairs)
    if k > 3:
        return None
    lows = {d: (lo, hi) for d, lo, hi in pairs}
    first = len(shape) - k
    M = 1
    for s in shape[:first]:
        M *= s
    N, L, O = [1, 1, 1], [0, 0, 0], [1, 1, 1]
    for j, d in enumerate(range(first, len(shape))):
        lo, hi = lows.get(d, (0, 0))
        N[3 - k + j], L[3 - k + j], O[3 - k + j] = shape[d], lo, shape[d] + lo + hi
    return M, N, L, O, first


def _pad_launch(be, src, dst, N, L, O, mode, backward):
    total = src.numel() if backward else dst.numel()
    if total:
        _launch(be, _lazy("indexing_tl").pad_index, (-(-total // _BLOCK),),
                [src, dst, total, *N, *O, *L], (),
                {"MODE": _PAD_MODE[mode], "BACKWARD": backward, "BLOCK": _BLOCK})


@_index_kernel("_pad_index")
def _pad_index(be, op, x, pad, mode):
    args = (x, pad, mode)
    if mode not in _PAD_MODE or not _ok_dtype(x):
        return NotImplemented
    try:
        geo = _pad_geometry(tuple(x.shape), list(pad), mode)
    except (RuntimeError, ValueError, IndexError):
        return _raise(be, op, args)
    if geo is None:
        return NotImplemented
    M, N, L, O, first = geo
    shape = tuple(x.shape[:first]) + tuple(O[3 - (x.ndim - first):])
    if any(s < 0 for s in shape):
        return _raise(be, op, args)
    out = be._new(shape, x.dtype, x.device)
    _pad_launch(be, _cont(be, x), out, N, L, O, mode, False)
    return out


@_index_kernel("_pad_index_backward")
def _pad_index_backward(be, op, g, input_size, pad, mode):
    args = (g, input_size, pad, mode)
    if mode not in _PAD_MODE or not _ok_dtype(g) or not g.dtype.is_floating_point:
        return NotImplemented
    size = tuple(input_size)
    try:
        geo = _pad_geometry(size, list(pad), mode)
    except (RuntimeError, ValueError, IndexError):
        return _raise(be, op, args)
    if geo is None:
        return NotImplemented
    M, N, L, O, first = geo
    if tuple(g.shape) != size[:first] + tuple(O[3 - (len(size) - first):]):
        return _raise(be, op, args)
    acc_dt = D.float64 if g.dtype is D.float64 else D.float32
    acc = be._new(size, acc_dt, g.device)
    be.fill_(acc, 0)
    _pad_launch(be, _cont(be, g), acc, N, L, O, mode, True)
    return acc if acc_dt is g.dtype else be._copy_new(acc, g.dtype)


# ---- embedding_bag / embedding_renorm_ ---------------------------------------------------------
@_index_kernel("_embedding_bag")
def _embedding_bag(be, op, w, idx, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   psw=None, include_last_offset=False, padding_idx=-1):
    args = (w, idx, offsets, scale_grad_by_freq, mode, sparse, psw, include_last_offset,
            padding_idx)
    if idx.dtype not in _INTS or offsets.dtype not in _INTS:
        return _raise(be, op, args)
    if (w.ndim != 2 or idx.ndim != 1 or offsets.ndim != 1 or mode not in (0, 1, 2)
            or not _ok_dtype(w) or not w.dtype.is_floating_point
            or (psw is not None and (tuple(psw.shape) != tuple(idx.shape) or not _ok_dtype(psw)))):
        return NotImplemented
    V, Dm = w.shape
    n, no = idx.numel(), offsets.numel()
    B = no - 1 if include_last_offset else no
    # idx's min/max and offsets[0]: one read
    mm = _mm_buffer(be, 2, w.device)
    ic, oc = _cont(be, idx), _cont(be, offsets)
    if n:
        _launch(be, _lazy("indexing_tl").minmax, (min(-(-n // _BLOCK), _PROGS),), [ic, mm, n], (),
                {"BLOCK": _BLOCK})
    if no:
        be._copy_into(mm[2:3], oc[0:1])
    if n or no:
        r = be.to_host(mm)
        if (n and (r[0] < 0 or r[1] >= V)) or (no and r[2] != 0):
            return _raise(be, op, args)
    if B < 0:
        return NotImplemented
    acc_dt = D.float64 if w.dtype is D.float64 else D.float32
    out = be._new((B, Dm), acc_dt, w.device)
    bag = be._new((n,), D.int64, w.device)
    be.fill_(bag, -1)
    cnt = be._new((B,), D.int64, w.device)
    maxi = be._new((B, Dm) if mode == 2 else (0,), D.int64, w.device)
    wc = _cont(be, w)
    blk = 128
    if B:
        _launch(be, _lazy("indexing_tl").embedding_bag, (B, max(1, -(-Dm // blk))),
                [wc, ic, oc, _cont(be, psw) if psw is not None else wc, out, bag, cnt,
                 maxi if mode == 2 else cnt, Dm, n, no, padding_idx], (),
                {"MODE": mode, "HAS_PSW": psw is not None, "LAST": bool(include_last_offset),
                 "BLOCK": blk})
    if acc_dt is not w.dtype:
        out = be._copy_new(out, w.dtype)
    return out, bag, cnt, maxi


@_index_kernel("_embedding_bag_backward_ember")
def _embedding_bag_backward(be, op, g, w, idx, bag, count, max_idx, scale_grad_by_freq, mode,
                            psw, padding_idx):
    if (g.ndim != 2 or w.ndim != 2 or idx.ndim != 1 or idx.dtype not in _INTS
            or not _ok_dtype(g, w) or not g.dtype.is_floating_point
            or (psw is not None and not _ok_dtype(psw))):
        return NotImplemented
    V, Dm = w.shape
    n = idx.numel()
    acc_dt = D.float64 if g.dtype is D.float64 else D.float32
    gw = be._new((V, Dm), acc_dt, w.device)
    be.fill_(gw, 0)
    gc, ic = _cont(be, g), _cont(be, idx)
    gpsw = None
    if mode == 2:
        mi = _cont(be, max_idx)
        total = mi.numel()
        if total:
            _launch(be, _lazy("indexing_tl").embedding_bag_bwd_max, (-(-total // _BLOCK),),
                    [gc, mi, gw, total, Dm, V], (), {"BLOCK": _BLOCK})
    else:
        freq = None
        if scale_grad_by_freq and n:
            freq = be._new((V,), D.int64, w.device)
            be.fill_(freq, 0)
            _launch(be, _lazy("indexing_tl").bincount, (-(-n // _BLOCK),), [ic, ic, freq, n, V], (),
                    {"HAS_W": False, "BLOCK": _BLOCK})
        if psw is not None:
            gpsw = be._new((n,), acc_dt, w.device)
        if n:
            _launch(be, _lazy("indexing_tl").embedding_bag_bwd, (n,),
                    [gc, _cont(be, w), ic, _cont(be, bag), _cont(be, count),
                     _cont(be, psw) if psw is not None else gc, freq if freq is not None else ic,
                     gw, gpsw if gpsw is not None else gw, Dm, V, padding_idx], (),
                    {"MEAN": mode == 1, "HAS_PSW": psw is not None, "FREQ": freq is not None,
                     "BLOCK": 128})
    if psw is not None:
        if gpsw is None:
            gpsw = be._new((n,), psw.dtype, w.device)
            be.fill_(gpsw, 0)
        elif gpsw.dtype is not psw.dtype:
            gpsw = be._copy_new(gpsw, psw.dtype)
    return (gw if gw.dtype is w.dtype else be._copy_new(gw, w.dtype)), gpsw


@_index_kernel("embedding_renorm_")
def _embedding_renorm(be, op, w, idx, max_norm, norm_type):
    args = (w, idx, max_norm, norm_type)
    if idx.dtype not in _INTS:
        return _raise(be, op, args)
    if w.ndim != 2 or not _ok_dtype(w) or not w.dtype.is_floating_point:
        return NotImplemented
    norm = {2.0: 0, 1.0: 1, float("inf"): 2}.get(float(norm_type), 3)
    if norm == 3 and not norm_type > 0:
        return NotImplemented
    V, Dm = w.shape
    n = idx.numel()
    if n == 0:
        return w
    (mm,) = _minmax(be, [idx])
    if not _in_range(mm, 0, V):   # numpy wraps negatives on the host, PyTorch refuses them
        return be._host_call(op, args) if mm[0] >= -V and mm[1] < V else _raise(be, op, args)
    wt = w if w.stride()[1] == 1 or Dm <= 1 else be._copy_new(w, w.dtype)
    claim = be._new((V,), D.int32, w.device)
    be.fill_(claim, 0)
    _launch(be, _lazy("indexing_tl").embedding_renorm, (n,),
            [wt, _cont(be, idx).reshape(-1), claim, Dm, wt.stride()[0] if V > 1 else Dm,
             float(max_norm), float(norm_type)], (), {"NORM": norm, "BLOCK": 128})
    if wt is not w:
        be._copy_into(w, wt)
    return w


@cuda_kernel("embedding")
def _embedding(be, op, w, idx, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    op.meta(w, idx, padding_idx, scale_grad_by_freq, sparse)   # PyTorch's rank/dtype errors
    if w.ndim != 2 or idx.dtype not in (D.int64, D.int32) or w.dtype not in _ACC:
        return NotImplemented
    K = _lazy("nn_tl")
    w, flat = _cont(be, w), _cont(be, idx).reshape(-1)
    # out-of-range ids: no bounds read here (a wait for the GPU on every call); the kernel
    # flags them and the CPU op's IndexError is raised at the next wait for the device
    # (runtime/device_errors.py says why; PyTorch's CUDA embedding asserts on the device)
    D_ = w.shape[1]
    out = be._new((flat.numel(), D_), w.dtype, w.device)
    if flat.numel() and D_:
        err = Operand(None, device_errors.word(w.device.index or 0), (), (), D.int32)
        _launch(be, K.gather_rows, (flat.numel(), -(-D_ // 256)),
                [w, flat, out, err, D_, w.shape[0]], (), {"BLOCK": 256})
    return out.reshape(tuple(idx.shape) + (D_,))


@cuda_kernel("embedding_dense_backward")
def _embedding_backward(be, op, g, idx, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq or idx.dtype not in (D.int64, D.int32) or g.dtype not in _ACC:
        return NotImplemented
    K = _lazy("nn_tl")
    flat = _cont(be, idx).reshape(-1)
    D_ = g.shape[-1]
    g2 = _cont(be, g).reshape(flat.numel(), D_)
    acc = be._new((num_weights, D_), D.float32, g.device)
    be.fill_(acc, 0)
    if flat.numel() and D_:
        _launch(be, K.scatter_add_rows, (flat.numel(), -(-D_ // 256)),
                [g2, flat, acc, D_, padding_idx], (), {"BLOCK": 256})
    return acc if g.dtype is D.float32 else be._copy_new(acc, g.dtype)
