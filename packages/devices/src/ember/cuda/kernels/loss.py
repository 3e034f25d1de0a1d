"""GPU kernels for nll_loss forward and backward (rows of (N, C) log-probabilities)."""
from __future__ import annotations

from ember._ops.registry import dtypes as D

from .base import _ACC, _cont, _launch, _lazy, cuda_kernel


@cuda_kernel("nll_loss_forward")
def _nll_forward(be, op, x, t, w, reduction, ignore_index):
    op.meta(x, t, w, reduction, ignore_index)   # PyTorch's shape and dtype errors
    if x.ndim != 2 or t.ndim != 1 or x.dtype not in _ACC or x.dtype._cat < 2:
        return NotImplemented
    K = _lazy("loss_tl")
    N, C = x.shape
    x, t = _cont(be, x), _cont(be, t)
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
    be.fill_(gx, 0)
    if N:
        _launch(be, K.nll_back_rows, (N,), [g, t, w if w is not None else x, total_weight, gx,
                                            C, ignore_index], (),
                {"HAS_W": w is not None, "MODE": int(reduction)})
    return gx
