"""GPU kernels of the joining family: cat, flip, roll, repeat, diag, diag_embed, tril/triu,
slice/select/diagonal/as_strided_scatter, repeat_interleave.

`cuda_kernel` fills the op entries' cuda slots with kernels `f(backend, op, *args)`
(NotImplemented declines a call). HOST lists the ops of this family that still run their CPU
kernel on host copies, with the reason (test_cuda_opdb.py holds the backend to it).

Most movement ops here are strided copies through the backend's copy kernel (`_copy_into`, one
pointwise launch, or a device memcpy when both sides are contiguous) between views of the input
and of a fresh output: cat (one copy per input into its slice of the output), flip (a view with
negated strides), roll (one copy per rolled block), repeat (one copy from a zero-stride view into
the output seen as (r0, s0, r1, s1, ...)), diag/diag_embed (a fill and a copy into the
output's diagonal view), the *_scatter ops (a copy, then src copied into the view).
"""
from __future__ import annotations

from ember._ops.registry import Tensor, normalize_dim
from ember._ops.registry import dtypes as D

from .base import _cont, _launch, _lazy, _on_cuda, _view, be_dtypes, cuda_kernel
from .indexing import (
    _BLOCK,
    _INTS,
    _PROGS,
    _along,
    _gather,
    _index_kernel,
    _mm_buffer,
    _ok_dtype,
    _raise,
    _search,
    _zeroed,
)
from .pointwise import Unsupported


# ---- cat ----------------------------------------------------------------------------------------
@cuda_kernel("cat")
def _cat(be, op, tensors, dim=0):
    from ember._ops.registry import cat_inputs
    ts = list(tensors)
    dev = _on_cuda(*ts) if ts else None
    if dev is None:
        return NotImplemented
    keep, d, shape, dtype = cat_inputs([(tuple(t.shape), t.dtype) for t in ts], dim)
    ok = be_dtypes()
    if dtype not in ok or any(ts[i].dtype not in ok for i in keep):
        return NotImplemented  # complex
    out = be._new(shape, dtype, dev)
    if out.numel() == 0:
        return out
    st = out._stride
    start = 0
    for i in keep:  # one copy per input into its slice (a memcpy when both are contiguous)
        t = ts[i]
        n = t.shape[d]
        if n:
            sh = list(shape)
            sh[d] = n
            be._copy_into(_view(out, sh, st, start * st[d]), t)
        start += n
    return out


# ---- flip, roll, repeat -------------------------------------------------------------------------
@cuda_kernel("flip")
def _flip(be, op, x, dims):
    from ember._ops.registry import flip_dims
    dims = flip_dims(x.ndim, dims)
    if x.dtype not in be_dtypes():
        return NotImplemented
    out = be._new(tuple(x.shape), x.dtype, x.device)
    if out.numel() == 0:
        return out
    st, off = list(x._stride), x._offset
    for d in dims:
        off += (x.shape[d] - 1) * st[d]
        st[d] = -st[d]
    be._copy_into(out, _view(x, x.shape, st, off))
    return out


@cuda_kernel("roll")
def _roll(be, op, x, shifts, dims=()):
    from ember._ops.registry import roll_args
    shifts, dims = roll_args(x.ndim, shifts, dims)
    if x.dtype not in be_dtypes():
        return NotImplemented
    out = be._new(tuple(x.shape), x.dtype, x.device)
    if out.numel() == 0:
        return out
    if not dims:  # the flattened tensor rolled
        src = _cont(be, x)
        n = x.numel()
        s = shifts[0] % n
        flat_o, flat_s = _view(out, (n,), (1,), 0), _view(src, (n,), (1,), src._offset)
        _roll_blocks(be, flat_o, flat_s, [(0, s)])
        return out
    per = {}
    for s, d in zip(shifts, dims):  # repeated dims add up (PyTorch rolls once per entry)
        per[d] = per.get(d, 0) + s
    _roll_blocks(be, out, x, [(d, s % x.shape[d]) for d, s in per.items()])
    return out


def _roll_blocks(be, out, x, rolls):
    """out = x rolled by s along each (d, s) of rolls: one copy per block (2 per rolled dim)."""
    blocks = [([], [], [])]  # per block: (dim, out start, in start, length) entries
    for d, s in rolls:
        n = x.shape[d]
        parts = [(s, 0, n - s), (0, n - s, s)] if s else [(0, 0, n)]
        blocks = [(a + [d], b + [p], c) for a, b, c in blocks for p in parts if p[2]]
    ost, ist = out._stride, x._stride
    for ds, ps, _ in blocks:
        shape = list(x.shape)
        oo, io = out._offset, x._offset
        for d, (o0, i0, ln) in zip(ds, ps):
            shape[d] = ln
            oo += o0 * ost[d]
            io += i0 * ist[d]
        be._copy_into(_view(out, shape, ost, oo), _view(x, shape, ist, io))


@cuda_kernel("repeat")
def _repeat(be, op, x, repeats):
    from ember._ops.registry import repeat_shape
    padded, shape = repeat_shape(tuple(x.shape), repeats)
    if x.dtype not in be_dtypes():
        return NotImplemented
    out = be._new(shape, x.dtype, x.device)
    if out.numel() == 0:
        return out
    pad = len(padded) - x.ndim
    xst = (0,) * pad + tuple(x._stride)
    inter = [v for r, p in zip(repeats, padded) for v in (r, p)]
    ist = [v for s in xst for v in (0, s)]
    from ember._ops.registry import c_strides
    # out seen as (r0, p0, r1, p1, ...) is out itself; x broadcast along the r's: one copy
    be._copy_into(_view(out, inter, c_strides(tuple(inter)), 0), _view(x, inter, ist, x._offset))
    return out


# ---- diagonals and eye --------------------------------------------------------------------------
@cuda_kernel("diag")
def _diag(be, op, x, diagonal=0):
    from ember._ops.registry import diagonal_view
    m = op.meta(x, diagonal)  # PyTorch's errors
    if x.dtype not in be_dtypes():
        return NotImplemented
    out = be._new(tuple(m.shape), x.dtype, x.device)
    if x.ndim == 1:
        if out.numel():
            be.fill_(out, 0)
            shape, stride, off = diagonal_view(out, diagonal, 0, 1)
            be._copy_into(_view(out, shape, stride, off), x)
        return out
    shape, stride, off = diagonal_view(x, diagonal, 0, 1)
    be._copy_into(out, _view(x, shape, stride, off))
    return out


@cuda_kernel("diag_embed")
def _diag_embed(be, op, x, offset=0, dim1=-2, dim2=-1):
    from ember._ops.registry import diag_embed_dims, diagonal_view
    m = op.meta(x, offset, dim1, dim2)
    if x.dtype not in be_dtypes():
        return NotImplemented
    d1, d2 = diag_embed_dims(x.ndim, offset, dim1, dim2)
    out = be._new(tuple(m.shape), x.dtype, x.device)
    if out.numel():
        be.fill_(out, 0)
        shape, stride, off = diagonal_view(out, offset, d1, d2)
        be._copy_into(_view(out, shape, stride, off), x)
    return out


# ---- select/diagonal/as_strided_scatter: a copy, then src copied into the view ----------------
def _into_view(rule):
    def f(be, op, x, src, *args):
        if not _ok_dtype(x, src):
            return NotImplemented
        out = be._copy_new(x, x.dtype)
        shape, stride, off = rule(out, *args)[:3]   # (src's shape: the meta checked)
        last = off + sum((s - 1) * st for s, st in zip(shape, stride))
        if off < 0 or (all(shape) and last >= out.numel()):
            return _raise(be, op, (x, src, *args))
        if src.device != x.device:
            src = src.to(x.device)
        try:
            be._copy_into(out._alias(tuple(shape), tuple(stride), off), src)
        except Unsupported:
            return NotImplemented
        return out
    return f


def _view_rules():
    from ember._ops.registry import as_strided_view, diagonal_view, select_view
    return {"select_scatter": select_view, "diagonal_scatter": diagonal_view,
            "as_strided_scatter": as_strided_view}


def _lazy_rule(name):
    def rule(*a):
        return _view_rules()[name](*a)
    return rule


_index_kernel("select_scatter")(_into_view(_lazy_rule("select_scatter")))
_index_kernel("diagonal_scatter")(_into_view(_lazy_rule("diagonal_scatter")))
_index_kernel("as_strided_scatter")(_into_view(_lazy_rule("as_strided_scatter")))


# ---- repeat_interleave -------------------------------------------------------------------------
@_index_kernel("repeat_interleave.self_Tensor")
def _repeat_interleave(be, op, x, repeats=None, dim=None, output_size=None):
    args = (x, repeats, dim, output_size)
    counts = x if repeats is None else repeats
    if isinstance(counts, bool) or not isinstance(counts, (Tensor, int)):
        return NotImplemented
    if isinstance(counts, int):
        if counts < 0:
            return _raise(be, op, args)
    elif counts.dtype not in _INTS or counts.ndim > 1:
        return _raise(be, op, args)
    if repeats is None:
        src, d = None, 0
        k = counts.shape[0] if counts.ndim else 1
    else:
        if not _ok_dtype(x):
            return NotImplemented
        src = _cont(be, x).reshape(-1) if dim is None else x
        d = 0 if dim is None else normalize_dim(dim, x.ndim)
        if src.ndim == 0:
            return NotImplemented
        k = src.shape[d]
        if isinstance(counts, Tensor) and counts.ndim == 1 and counts.shape[0] != k:
            return _raise(be, op, args)
    c = be._new((k,), D.int64, x.device)
    K = _lazy("indexing_tl")
    if isinstance(counts, int):   # the output's size is known: no read
        be.fill_(c, counts)
        total = k * counts
        if k:
            tot = be._new((1,), D.int64, x.device)
            _launch(be, K.exclusive_scan, (1,), [c, k, tot], (), {"BLOCK": _BLOCK})
    elif k:
        # the repeats' min (no negatives) and their sum (the output's size): one read
        be._copy_into(c, counts.reshape(-1) if counts.ndim else counts.expand((k,)))
        mm = _mm_buffer(be, 2, x.device)
        _launch(be, K.minmax, (min(-(-k // _BLOCK), _PROGS),), [c, mm, k], (), {"BLOCK": _BLOCK})
        _launch(be, K.exclusive_scan, (1,), [c, k, mm[2:]], (), {"BLOCK": _BLOCK})
        r = be.to_host(mm)
        if r[0] < 0:
            return _raise(be, op, args)
        total = int(r[2])
    else:
        total = 0
    pos = be._new((total,), D.int64, x.device)   # the source index of each output position
    _search(be, c, c, pos, 1, 0, True, add=-1, iota=True)
    if src is None:
        return pos
    shape = tuple(src.shape[:d]) + (total,) + tuple(src.shape[d + 1:])
    out = be._new(shape, src.dtype, x.device)
    if not _gather(be, out, src, pos, shape, _zeroed(src.stride(), d), _along(src.ndim, d, 1),
                   src.stride()[d], k, wrap=False):
        return NotImplemented
    return out


@cuda_kernel("slice_scatter")
def _slice_scatter(be, op, x, src, dim=0, start=None, end=None, step=1):
    """A copy of x with src written into x[start:end:step] along dim (split's backward)."""
    op.meta(x, src, dim, start, end, step)   # PyTorch's errors (dim, step, src's shape)
    from ember._ops.registry import normalize_dim
    if x.ndim == 0 or step <= 0:
        return NotImplemented
    d = normalize_dim(dim, x.ndim)
    n = x.shape[d]
    s = 0 if start is None else (start + n if start < 0 else start)
    e = n if end is None else (end + n if end < 0 else end)
    s, e = min(max(s, 0), n), min(max(e, 0), n)
    size = max(0, -(-(e - s) // step))
    shape = list(x.shape)
    shape[d] = size
    out = be._copy_new(x, x.dtype)
    st = list(out.stride())
    view = out._alias(tuple(shape), tuple(st[:d] + [st[d] * step] + st[d + 1:]),
                      out._offset + s * st[d])
    be._copy_into(view, src)
    return out


def _tri(upper):
    def f(be, op, x, diagonal=0):
        if x.ndim < 2 or x.dtype not in be_dtypes():
            return NotImplemented
        K = _lazy("joining_tl")
        x = _cont(be, x)
        R, C = x.shape[-2], x.shape[-1]
        out = be._new(tuple(x.shape), x.dtype, x.device)
        if x.numel():
            _launch(be, K.tri_rows, (x.numel() // C, -(-C // 1024)), [x, out, R, C, diagonal],
                    (), {"UPPER": upper, "BLOCK": 1024})
        return out
    return f


cuda_kernel("tril")(_tri(False))
cuda_kernel("triu")(_tri(True))
