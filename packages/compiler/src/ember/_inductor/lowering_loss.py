"""Lowering of `nll_loss_backward` (cross-entropy's backward) as a pointwise select: the
gradient is -grad (/ total_weight for the mean) at each row's target class and 0 elsewhere.
Recomputed by each reader instead of stored, it fuses into the log_softmax backward that reads
it twice (its row sum, then the product), where the extern call wrote a dense (N, C) tensor:
the GPT step's (B*T, vocab) logits gradient, read three times more.
"""
from __future__ import annotations

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor

from .ir import TBox
from .lowering import cast, register_lowering

__all__: list = []

_NONE, _MEAN, _SUM = 0, 1, 2   # (core's loss.py reduction codes)


@register_lowering("nll_loss_backward")
def _nll_loss_backward(g, op, args, margs, meta):
    go, x, t, w, reduction, ignore, tw = args[:7]
    if w is not None or not all(isinstance(a, TBox) for a in (go, x, t, tw)) or \
            not isinstance(meta, Tensor) or meta.dtype._cat != 2 or len(x.shape) != 2 or \
            len(t.shape) != 1 or t.dtype not in (D.int64, D.int32) or \
            not isinstance(ignore, int) or isinstance(ignore, bool) or \
            reduction not in (_NONE, _MEAN, _SUM) or \
            len(go.shape) != (1 if reduction == _NONE else 0):
        return None   # class weights (a gather), 1-D or N-d inputs: the extern call
    cd = D.float64 if x.dtype is D.float64 else D.float32

    def loader(h, idx):
        i, j = idx
        ti = cast(h, t.load(h, [i]), D.int64)
        hit = h.logical_and(h.eq(h.index_expr(j), ti), h.ne(ti, h.v(np.int64(ignore))))
        coef = h.neg(cast(h, go.load(h, [i] if reduction == _NONE else []), cd))
        if reduction == _MEAN:
            coef = h.truediv(coef, cast(h, tw.load(h, []), cd))
        return cast(h, h.where(hit, coef, cast(h, h.v(cd.np.type(0)), cd)), meta.dtype)
    out = TBox(g.sv.shape(meta.shape), meta.dtype, loader)
    out.recompute = True   # a few loads per row: cheaper to recompute than to store (N, C)
    return out
