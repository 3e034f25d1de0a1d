"""Lowerings of index selects the GPT step ran as extern calls: `nll_loss_backward`
(cross-entropy's backward) is -grad (/ total_weight for the mean) at each row's target class
and 0 elsewhere; recomputed by each reader instead of stored, it fuses into the log_softmax
backward that reads it twice (its row sum, then the product), where the extern call wrote a
dense (N, C) tensor: the GPT step's (B*T, vocab) logits gradient, read three times more.
`tril` / `triu` keep an element by its row and column: a causal mask built from
`tril(ones(T, T)) == 0` becomes index arithmetic inside the kernel that reads it.
"""
from __future__ import annotations

import numpy as np
import sympy

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


@register_lowering("tril", "triu")
def _tri(g, op, args, margs, meta):
    x, diagonal = args[0], args[1] if len(args) > 1 else 0
    if not isinstance(x, TBox) or len(x.shape) < 2 or not isinstance(meta, Tensor) or \
            not isinstance(diagonal, int) or isinstance(diagonal, bool) or \
            meta.dtype not in _DTYPES:
        return None
    d, lower = meta.dtype, op.name == "tril"

    def loader(h, idx):
        off = h.index_expr(idx[-1] - idx[-2])   # column - row
        lim = h.index_expr(sympy.Integer(diagonal))
        keep = h.le(off, lim) if lower else h.ge(off, lim)
        return h.where(keep, x.load(h, idx), cast(h, h.v(d.np.type(0)), d))
    return TBox(x.shape, d, loader)


_DTYPES = frozenset({D.float32, D.float64, D.float16, D.bfloat16, D.int64, D.int32, D.int16,
                     D.int8, D.uint8, D.bool})
