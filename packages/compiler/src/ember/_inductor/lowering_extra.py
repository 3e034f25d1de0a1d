"""Lowerings of joins and index reductions (CPU kernels): `cat` and `slice_scatter` (the
backward of split and slicing) as pointwise selects over their pieces (read through masked
loads), so they fuse with their neighbours instead of running as copies; `argmax` / `argmin`
(and `max.dim` / `min.dim`) as a max reduction followed, in the same kernel, by a min
reduction of the indices that reach it; `cumsum` over a short dim as a masked sum per output
element.
"""
from __future__ import annotations

import sympy

from ember import _dtype as D
from ember._tensor import Tensor

from .decompositions import _dims, reduction
from .ir import TBox, kdtype
from .lowering import cast, register_lowering

__all__ = ["MAX_CAT_PIECES", "MAX_SCAN"]

MAX_CAT_PIECES = 8   # more pieces: one extern copy (a chain of selects per element costs more)
MAX_SCAN = 64        # cumsum as masked sums is quadratic in the dim: short dims only


def _cpu(g) -> bool:
    return g.device == "cpu"   # the index reductions' code prints as C only (Triton: extern)


def _joins(g) -> bool:
    return g.device in ("cpu", "cuda")   # masked loads in C++ and Triton kernels


def _int(g, v):
    """A Python int for a static size or argument, else None (SymVals, symbols)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, sympy.Expr) and not v.free_symbols - set(g.sv.values):
        return g.sv.hint(v)
    return None


def _piece_load(g, h, tb, idx, dim, start, length):
    """tb's element at the output index idx shifted by -start along dim, loaded only where
    start <= idx[dim] < start + length (a masked load: elsewhere 0, discarded by the select
    around it; the index stays linear, so views of tb keep their division-free indexing)."""
    j = list(idx)
    j[dim] = idx[dim] - start
    piece = getattr(h, "piece_index", None)   # C++: a symbol known to lie in [0, length)
    if piece is not None:
        j[dim] = piece(j[dim], length)
    inside = _in_range(h, idx[dim], start if start > 0 else None, start + length)
    prev = getattr(h, "mask", None)
    h.mask = inside if prev is None else h.logical_and(prev, inside)
    try:
        return tb.load(h, j)
    finally:
        h.mask = prev


def _in_range(h, i, lo, hi):
    """lo <= i < hi as a kernel bool (either bound None: open)."""
    c = None
    if lo is not None:
        c = h.ge(h.index_expr(i), h.index_expr(sympy.Integer(lo)))
    if hi is not None:
        c2 = h.lt(h.index_expr(i), h.index_expr(sympy.Integer(hi)))
        c = c2 if c is None else h.logical_and(c, c2)
    return c


@register_lowering("cat")
def _cat(g, op, args, margs, meta):
    tensors, dim = args[0], args[1]
    if not _joins(g) or not isinstance(meta, Tensor) or meta.dtype not in _KDT:
        return None
    nd = len(meta.shape)
    dim = dim % nd if nd else 0
    pieces = []
    for tb, m in zip(tensors, margs[0]):
        if not isinstance(tb, TBox) or len(tb.shape) != nd:
            if isinstance(m, Tensor) and m.ndim == 1 and m.shape[0] == 0:
                continue   # legacy empty pieces of any shape
            return None
        n = _int(g, tb.shape[dim])
        if n is None:
            return None
        if n:
            pieces.append((tb, n))
    if not pieces or len(pieces) > MAX_CAT_PIECES:
        return None
    offsets, o = [], 0
    for _, n in pieces:
        offsets.append(o)
        o += n
    d = meta.dtype

    def loader(h, idx):
        last, n = pieces[-1]
        v = cast(h, _piece_load(g, h, last, idx, dim, offsets[-1], n), d)
        for k in range(len(pieces) - 2, -1, -1):
            tb, n = pieces[k]
            here = cast(h, _piece_load(g, h, tb, idx, dim, offsets[k], n), d)
            v = h.where(_in_range(h, idx[dim], None, offsets[k] + n), here, v)
        return v
    return TBox(g.sv.shape(meta.shape), d, loader)


@register_lowering("slice_scatter")
def _slice_scatter(g, op, args, margs, meta):
    x, src, dim, start, end, step = args[:6]
    if not _joins(g) or not isinstance(meta, Tensor) or not isinstance(x, TBox) or \
            not isinstance(src, TBox) or step != 1 or meta.dtype not in _KDT:
        return None
    nd = len(x.shape)
    dim = dim % nd
    size = _int(g, x.shape[dim])
    length = _int(g, src.shape[dim])
    if size is None or length is None or (start is not None and _int(g, start) is None):
        return None
    s = 0 if start is None else _int(g, start)
    s = min(max(s + size if s < 0 else s, 0), size)
    if length == 0:
        return TBox(x.shape, x.dtype, x.load)
    d = meta.dtype

    def loader(h, idx):
        inside = _in_range(h, idx[dim], s if s > 0 else None,
                           s + length if s + length < size else None)
        base = cast(h, x.load(h, idx), d)
        if inside is None:
            return cast(h, _piece_load(g, h, src, idx, dim, s, length), d)
        return h.where(inside, cast(h, _piece_load(g, h, src, idx, dim, s, length), d), base)
    return TBox(x.shape, d, loader)


# ---- argmax / argmin ----------------------------------------------------------------------
def _arg_reduction(g, x, dim, keepdim, best):
    """(extreme values TBox, int64 indices TBox) of x over dim (None: all dims, flat index)."""
    nd = len(x.shape)
    dims = _dims(dim, nd) if nd else []
    if any(_int(g, x.shape[i]) in (0, None) for i in dims):
        return None    # eager raises on an empty dim; symbolic dims stay extern
    cd = kdtype(x.dtype)
    xc = TBox(x.shape, cd, lambda h, idx: cast(h, x.load(h, idx), cd))
    m, _ = reduction(g, xc, dims, True, best, cd)
    # the flat position inside the reduced dims (PyTorch's index for dim=None)
    rstride, acc = {}, sympy.Integer(1)
    for i in reversed(dims):
        rstride[i] = acc
        acc = acc * x.shape[i]
    big = sympy.Integer(2 ** 62)

    def idx_or_big(h, idx):
        v = xc.load(h, idx)
        mv = m.load(h, [sympy.Integer(0) if i in dims else e for i, e in enumerate(idx)])
        hit = h.eq(v, mv)
        if cd._cat == 2:   # NaN is the extreme (the max reduction propagates it)
            hit = h.logical_or(hit, h.logical_and(h.ne(mv, mv), h.ne(v, v)))
        pos = sum((idx[i] * rstride[i] for i in dims), sympy.Integer(0))
        return h.where(hit, h.index_expr(pos), h.index_expr(big))
    cand = TBox(x.shape, D.int64, idx_or_big)
    i, _ = reduction(g, cand, dims, keepdim, "min", D.int64)

    def vals(h, idx):   # m (kept dims) read at the output index
        if not keepdim:
            it = iter(idx)
            idx = [sympy.Integer(0) if k in dims else next(it) for k in range(nd)]
        return cast(h, m.load(h, idx), x.dtype)
    return TBox(i.shape, x.dtype, vals), i


@register_lowering("argmax", "argmin")
def _argmax(g, op, args, margs, meta):
    x, dim, keepdim = args[:3]
    if not _cpu(g) or not isinstance(x, TBox) or x.dtype is D.bool or \
            x.dtype not in _KDT or not isinstance(meta, Tensor):
        return None
    if not x.shape:
        return None
    r = _arg_reduction(g, x, dim, keepdim, "max" if op.name == "argmax" else "min")
    if r is None:
        return None
    i = r[1]
    if dim is None and keepdim:   # (1,) * ndim
        return TBox(g.sv.shape(meta.shape), D.int64, lambda h, idx: i.load(h, ()))
    return i


@register_lowering("max.dim", "min.dim")
def _max_dim(g, op, args, margs, meta):
    x, dim, keepdim = args[:3]
    if not _cpu(g) or not isinstance(x, TBox) or not x.shape or x.dtype not in _KDT or \
            x.dtype is D.bool:
        return None
    r = _arg_reduction(g, x, dim, keepdim, "max" if op.name == "max" else "min")
    return None if r is None else (r[0], r[1])


# ---- cumsum -------------------------------------------------------------------------------
@register_lowering("cumsum")
def _cumsum(g, op, args, margs, meta):
    x, dim = args[:2]
    if not _cpu(g) or not isinstance(x, TBox) or not x.shape or not isinstance(meta, Tensor) \
            or meta.dtype not in _KDT or meta.dtype is D.bool:
        return None
    nd = len(x.shape)
    dim = dim % nd
    n = _int(g, x.shape[dim])
    if n is None or n > MAX_SCAN:
        return None
    od = meta.dtype
    xo = TBox(x.shape, od, lambda h, idx: cast(h, x.load(h, idx), od))
    # out[..., i, ...] = sum over r of (r <= i ? x[..., r, ...] : 0): a reduction over a new
    # trailing dim of size n, for each output element
    ext = TBox(tuple(x.shape) + (x.shape[dim],), od, None)

    def masked(h, idx):
        i, r = idx[dim], idx[-1]
        j = list(idx[:-1])
        j[dim] = r
        return h.where(h.le(h.index_expr(r), h.index_expr(i)), xo.load(h, j),
                       cast(h, h.v(0), od))
    ext._loader = masked
    out, _ = reduction(g, ext, [nd], False, "sum", od)
    return out


_KDT = frozenset({D.float32, D.float64, D.int64, D.int32, D.int16, D.int8, D.uint8, D.bool,
                  D.bfloat16, D.float16})
