"""GPU kernels for nll_loss forward and backward (rows of (N, C) log-probabilities) and ctc_loss
forward and backward (alpha/beta recursions over time, `ctc_tl`)."""
from __future__ import annotations

from ember._ops.registry import dtypes as D

from .base import _ACC, _cont, _launch, _lazy, cuda_kernel

# mean/sum over at most this many rows: one program loops over them (one launch in all); more
# rows: a program per row, then reductions
_ONE_PROGRAM_ROWS = 1 << 16


@cuda_kernel("nll_loss_forward")
def _nll_forward(be, op, x, t, w, reduction, ignore_index):
    op.meta(x, t, w, reduction, ignore_index)   # PyTorch's shape and dtype errors
    if x.ndim != 2 or t.ndim != 1 or x.dtype not in _ACC or x.dtype._cat < 2:
        return NotImplemented
    K = _lazy("loss_tl")
    N, C = x.shape
    x, t = _cont(be, x), _cont(be, t)
    if reduction != 0 and N <= _ONE_PROGRAM_ROWS:  # one launch: sums, division, both outputs
        out = be._new((), x.dtype, x.device)
        tot = be._new((), x.dtype, x.device)
        _launch(be, K.nll_reduce, (1,), [x, t, w if w is not None else x, out, tot, N, C,
                                         ignore_index], (),
                {"HAS_W": w is not None, "MEAN": reduction == 1, "BLOCK": 256})
        return out, tot
    loss = be._new((N,), D.float32, x.device)
    wt = be._new((N,), D.float32, x.device)
    if N:
        _launch(be, K.nll_rows, (N,), [x, t, w if w is not None else x, loss, wt, C,
                                       ignore_index], (), {"HAS_W": w is not None})
    tot = wt.sum()
    if reduction == 0:
        out = loss
    elif reduction == 2:
        out = loss.sum()
    else:
        out = loss.sum() / tot
    return (out if out.dtype is x.dtype else be._copy_new(out, x.dtype),
            be._copy_new(tot, x.dtype))


@cuda_kernel("nll_loss_backward")
def _nll_backward(be, op, g, x, t, w, reduction, ignore_index, total_weight):
    if x.ndim != 2 or t.ndim != 1 or x.dtype not in _ACC or x.dtype._cat < 2:
        return NotImplemented
    K = _lazy("loss_tl")
    N, C = x.shape
    t, g = _cont(be, t), _cont(be, g)
    gx = be._new((N, C), x.dtype, x.device)
    if N and C:  # each row written whole, zeros included: one launch
        _launch(be, K.nll_back_dense, (N,), [g, t, w if w is not None else x, total_weight, gx,
                                             C, ignore_index], (),
                {"HAS_W": w is not None, "MODE": int(reduction),
                 "BLOCK_C": max(16, min(1024, 1 << max(C - 1, 0).bit_length()))})
    return gx


# ---- ctc_loss: alpha/beta recursions over time (ctc_tl), float64 as core's numpy kernels -------
def _ctc_inputs(be, lp, targets, il, tl_):
    """(lp contiguous, targets on lp's device, row offsets into targets, input and target
    lengths) as device tensors; None when the call is not for these kernels."""
    import numpy as np

    from ember._ops.registry import Tensor
    if lp.dtype not in (D.float32, D.float64) or lp.ndim != 3 or 0 in lp.shape:
        return None
    dev = lp.device
    if targets.device != dev:
        targets = be.to_copy(targets, targets.dtype, dev)
    targets = _cont(be, targets)
    N = lp.shape[1]
    if targets.ndim == 2:            # padded rows
        off = [n * targets.shape[1] for n in range(N)]
    else:                            # the concatenation
        off = np.concatenate([[0], np.cumsum(tl_)[:-1]]).tolist() if N else []

    def dev_ints(v):
        return be.from_tensor(Tensor._from_np(np.asarray(v, np.int64).reshape(N), D.int64), dev)
    return _cont(be, lp), targets, dev_ints(off), dev_ints(il), dev_ints(tl_)


@cuda_kernel("_ctc_loss")
def _ctc_loss(be, op, lp, targets, il, tl_, blank=0, zero_infinity=False):
    nll_m, alpha_m = op.meta(lp, targets, il, tl_, blank, zero_infinity)
    r = _ctc_inputs(be, lp, targets, il, tl_)
    if r is None:
        return NotImplemented
    lp, targets, off, ilt, tlt = r
    T, N, C = lp.shape
    S = alpha_m.shape[2]
    alpha = be._new((T, N, S), D.float64, lp.device)
    nll = be._new((N,), D.float64, lp.device)
    _launch(be, _lazy("ctc_tl").ctc_alpha, (N,),
            [lp, targets, off, ilt, tlt, alpha, nll, T, N, C, S, blank], (),
            {"ZERO_INF": bool(zero_infinity), "BLOCK_S": _pow2(S)})
    return be._copy_new(nll, lp.dtype), be._copy_new(alpha, lp.dtype)


@cuda_kernel("_ctc_loss_backward_ember")
def _ctc_backward(be, op, g, lp, targets, il, tl_, nll, alpha, blank, zero_infinity):
    r = _ctc_inputs(be, lp, targets, il, tl_)
    if r is None:
        return NotImplemented
    lp, targets, off, ilt, tlt = r
    T, N, C = lp.shape
    S = alpha.shape[2]
    K = _lazy("ctc_tl")
    beta = be._new((T, N, S), D.float64, lp.device)
    _launch(be, K.ctc_beta, (N,), [lp, targets, off, ilt, tlt, beta, T, N, C, S, blank], (),
            {"BLOCK_S": _pow2(S)})
    out = be._new((T, N, C), lp.dtype, lp.device)
    _launch(be, K.ctc_grad, (T, N),
            [lp, targets, off, ilt, tlt, _cont(be, alpha), beta, _cont(be, nll), _cont(be, g),
             out, T, N, C, S, blank], (),
            {"ZERO_INF": bool(zero_infinity), "BLOCK_C": min(_pow2(C), 1024)})
    return out


def _pow2(n):
    return max(16, 1 << max(n - 1, 0).bit_length())
