"""Lowerings of reductions and of the composite ops the compiler fuses (softmax, log_softmax,
layer norm, copies, constants): each builds reduction buffers and lazy pointwise TBoxes, so
the scheduler can put a reduction with its prologue and epilogue in one kernel.
"""
from __future__ import annotations

import math

import sympy

from ember import _dtype as D
from ember._tensor import Tensor

from .ir import ComputedBuffer, TBox, kdtype
from .lowering import bcast_load, cast, register_lowering
from .sizevars import contiguous_strides

__all__ = ["reduction"]


def _acc(rtype, d):
    if rtype in ("any", "all"):
        return D.bool
    if rtype in ("sum", "prod"):
        if d._cat < 2:
            return D.int64
        return D.float64
    return kdtype(d)


def _dims(dim, nd):
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(nd))
    if isinstance(dim, int):
        dim = [dim]
    return sorted({d % nd if nd else 0 for d in dim})


_SPLIT = ("sum", "max", "min")
SPLIT_MIN, SPLIT_PARTS = 1 << 18, 1024


def _split_full(g, x, red, rtype, out_dtype, value, post, origins, acc):
    """A CUDA reduction of every element of a large static-sized x in two stages: SPLIT_PARTS
    programs each reduce one contiguous chunk of the flat index into a partial, then one
    program reduces the partials (a single program over all of x is one SM's bandwidth).
    None where it does not apply (CPU: OpenMP splits the loop itself)."""
    if getattr(g, "device", "cpu") != "cuda":
        return None
    shape = list(x.shape)
    try:   # (sizes by their values: a symbolic compile's two lowerings then differ, and it
        n = g.sv.hint(sympy.Mul(*shape))   # specializes, as for any size-dependent lowering)
    except (TypeError, KeyError):
        return None
    if n < SPLIT_MIN or n % SPLIT_PARTS:
        return None
    chunk = n // SPLIT_PARTS
    from .sizevars import decompose

    def part(h, vars_, rvars):
        flat = vars_[0] * chunk + rvars[0]
        idx = decompose(flat, shape, {vars_[0]: SPLIT_PARTS, rvars[0]: chunk}, g.sv)
        v = x.load(h, list(idx))
        if value is not None:
            v = value(h, v, ())
        return cast(h, v, acc)
    buf = ComputedBuffer(g.new_name(), [sympy.Integer(SPLIT_PARTS)], acc,
                         [sympy.Integer(SPLIT_PARTS)], part, lambda vars_: vars_[0],
                         rranges=[sympy.Integer(chunk)], rtype=rtype, acc_dtype=acc,
                         origins=origins)
    g.buffers.append(buf)
    return reduction(g, TBox.of(buf), [0], False, rtype, out_dtype, post=post,
                     origins=origins, acc_dtype=acc)


# few long rows (a bias gradient: sum(dim=0) of (B*T, C)): one program per output is too
# few programs for the GPU; the rows are cut into chunks reduced in a first stage. Partials:
# about SPLIT_PROGRAMS (row programs, chunks of SPLIT_CHUNK_MIN terms or more), or for outer
# reductions (column tiles, 64 outputs a program) SPLIT_PARTIALS_COLUMN (chunks of 32 or more)
SPLIT_ROWS_MIN, SPLIT_KEPT_MAX, SPLIT_CHUNK_MIN, SPLIT_PROGRAMS = 4096, 4096, 64, 1 << 15
SPLIT_ROWS_MIN_COLUMN, SPLIT_KEPT_MAX_COLUMN = 1024, 1 << 15
SPLIT_PARTIALS_COLUMN, SPLIT_CHUNK_MIN_COLUMN = 1 << 17, 32


def _outer(g, kept, red) -> bool:
    """A CUDA reduction whose kept dims are innermost (its terms lie a row apart): column
    tiles (triton.py's `column_body`) read it coalesced."""
    return getattr(g, "device", "cpu") == "cuda" and bool(kept) and bool(red) and \
        max(kept) > max(red)


def _split_rows(g, x, kept, red, keepdim, dims, rtype, out_dtype, value, post, origins, acc):
    """A CUDA reduction of at most SPLIT_KEPT_MAX outputs over rows of SPLIT_ROWS_MIN or more
    (static sizes; outer reductions: the _COLUMN limits) in two stages: S x outputs partials,
    each the reduction of one chunk of the flat reduced index (S a power of two: about
    SPLIT_PROGRAMS of them, chunks of SPLIT_CHUNK_MIN or more), then each output's S
    partials. None where it does not apply."""
    if getattr(g, "device", "cpu") != "cuda" or rtype not in _SPLIT or not kept:
        return None
    shape = list(x.shape)
    try:
        kn = g.sv.hint(sympy.Mul(*[shape[i] for i in kept]))
        rn = g.sv.hint(sympy.Mul(*[shape[i] for i in red]))
    except (TypeError, KeyError):
        return None
    col = _outer(g, kept, red)
    if col and (kn > SPLIT_KEPT_MAX_COLUMN or rn < SPLIT_ROWS_MIN_COLUMN):
        return None
    if not col and (kn > SPLIT_KEPT_MAX or rn < SPLIT_ROWS_MIN):
        return None
    least, most = (SPLIT_CHUNK_MIN_COLUMN, SPLIT_PARTIALS_COLUMN) if col else \
        (SPLIT_CHUNK_MIN, SPLIT_PROGRAMS)
    parts = 1
    while rn % (parts * 2) == 0 and rn // (parts * 2) >= least and parts * 2 * kn <= most:
        parts *= 2
    if parts < 2:
        return None
    chunk = rn // parts
    rshape = [shape[i] for i in red]
    kshape = [sympy.Integer(1) if i in dims else shape[i] for i in range(len(shape))]
    kst = contiguous_strides([shape[i] for i in kept])
    part_acc = D.float32 if acc is D.float64 and kdtype(out_dtype) is not D.float64 else acc
    P, K = sympy.Integer(parts), sympy.Integer(chunk)
    from .sizevars import decompose

    def part(h, vars_, rvars):
        ridx = decompose(vars_[0] * K + rvars[0], rshape, {vars_[0]: P, rvars[0]: K}, g.sv)
        idx = [sympy.Integer(0)] * len(shape)
        for j, i in enumerate(kept):
            idx[i] = vars_[1 + j]
        for j, i in enumerate(red):
            idx[i] = ridx[j]
        v = x.load(h, idx)
        if value is not None:
            v = value(h, v, vars_[1:])
        return cast(h, v, part_acc)

    def store_index(vars_):
        return sympy.expand(vars_[0] * kn + sum((v * s for v, s in zip(vars_[1:], kst)),
                                                sympy.Integer(0)))
    buf = ComputedBuffer(g.new_name(), [P] + kshape, part_acc,
                         [P] + [shape[i] for i in kept], part, store_index, rranges=[K],
                         rtype=rtype, acc_dtype=part_acc, origins=origins)
    buf.column = col
    g.buffers.append(buf)
    out, buf2 = reduction(g, TBox.of(buf), [0], False, rtype, out_dtype, post=post,
                          origins=origins, acc_dtype=part_acc)   # shape kshape
    if keepdim:
        return out, buf2
    oshape = [s for i, s in enumerate(shape) if i not in dims]
    return TBox.of(buf2, shape=oshape, stride=contiguous_strides(oshape)), buf2


def reduction(g, x: TBox, dims, keepdim, rtype, out_dtype, value=None, post=None,
              origins=(), acc_dtype=None):
    """A reduction buffer of x over dims; `value(h, v, vars)` maps each term, `post(h, acc)`
    the result. Returns (TBox of the result, the buffer)."""
    shape, nd = x.shape, len(x.shape)
    dims = _dims(dims, nd)
    out_shape = [sympy.Integer(1) if i in dims else s for i, s in enumerate(shape)] if keepdim \
        else [s for i, s in enumerate(shape) if i not in dims]
    kept = [i for i in range(nd) if i not in dims and shape[i] != 1]
    red = [i for i in dims if shape[i] != 1]
    acc = acc_dtype or _acc(rtype, x.dtype)
    if not kept and not keepdim and red and rtype in _SPLIT:
        split = _split_full(g, x, red, rtype, out_dtype, value, post, origins, acc)
        if split is not None:
            return split
    if red:
        split = _split_rows(g, x, kept, red, keepdim, dims, rtype, out_dtype, value, post,
                            origins, acc)
        if split is not None:
            return split
    # positions of the kept dims in the output, for the store offset
    out_pos = [i if keepdim else sum(1 for j in range(i) if j not in dims) for i in kept]
    cst = contiguous_strides(out_shape)

    def fn(h, vars_, rvars):
        idx = [sympy.Integer(0)] * nd
        for j, i in enumerate(kept):
            idx[i] = vars_[j]
        for j, i in enumerate(red):
            idx[i] = rvars[j]
        v = x.load(h, idx)
        if value is not None:
            v = value(h, v, vars_)
        return cast(h, v, acc)

    def store_index(vars_):
        return sympy.expand(sum((vars_[j] * cst[p] for j, p in enumerate(out_pos)),
                                sympy.Integer(0)))
    if not red:  # only size-1 dims reduced: one term per output element, no loop
        def one(h, idx):
            vs = [idx[p] for p in out_pos]
            rvars = ()
            acc_v = fn(h, vs, rvars)
            return cast(h, post(h, acc_v) if post is not None else acc_v, out_dtype)
        return TBox(out_shape, out_dtype, one), None
    buf = ComputedBuffer(g.new_name(), out_shape, out_dtype, [shape[i] for i in kept], fn,
                         store_index, rranges=[shape[i] for i in red], rtype=rtype,
                         acc_dtype=acc, post=post, origins=origins)
    buf.column = _outer(g, kept, red)
    g.buffers.append(buf)
    return TBox.of(buf), buf


def _numel(shape, dims):
    n = sympy.Integer(1)
    for i in _dims(dims, len(shape)):
        n = n * shape[i]
    return n


def _origins(meta):
    return []


@register_lowering("sum", "mean")
def _sum(g, op, args, margs, meta):
    x, dim, keepdim, dtype = args[:4]
    if not isinstance(x, TBox) or not isinstance(meta, Tensor):
        return None
    post = None
    if op.name == "mean":
        n = _numel(x.shape, dim)
        post = lambda h, acc: h.truediv(acc, h.index_expr(n))  # noqa: E731
        if meta.dtype._cat < 2:
            return None
    if dtype is not None:
        x = _to(x, dtype)
    return reduction(g, x, dim, keepdim, "sum", meta.dtype, post=post)[0]


@register_lowering("amax", "amin", "max", "min")
def _amax(g, op, args, margs, meta):
    if not isinstance(meta, Tensor) or (op.name in ("max", "min") and len(args) != 1):
        return None
    x = args[0]
    dim, keepdim = (args[1], args[2]) if len(args) > 2 else (None, False)
    rtype = "max" if op.name in ("amax", "max") else "min"
    if any(s == 0 for s in x.shape):
        return None  # eager raises (no identity)
    return reduction(g, x, dim, keepdim, rtype, meta.dtype)[0]


@register_lowering("any", "all")
def _any(g, op, args, margs, meta):
    x, dim, keepdim = args[:3]
    xb = TBox(x.shape, D.bool, lambda h, idx: cast(h, x.load(h, idx), D.bool))
    return reduction(g, xb, dim, keepdim, op.name, meta.dtype)[0]


@register_lowering("prod")
def _prod(g, op, args, margs, meta):
    x, dim, keepdim, dtype = args[:4]
    if dtype is not None:
        x = _to(x, dtype)
    return reduction(g, x, dim, keepdim, "prod", meta.dtype)[0]


def _var_parts(g, x, dim, correction, keepdim, origins=()):
    """(mean TBox, variance-sum buffer TBox) of x over dim, in one reduction group."""
    n = _numel(x.shape, dim)
    if all(x.shape[i] == 1 for i in _dims(dim, len(x.shape))):
        return None, None
    mean, mbuf = reduction(g, x, dim, True, "sum", D.float64 if x.dtype is D.float64 else
                           D.float32, post=lambda h, acc: h.truediv(acc, h.index_expr(n)))

    def value(h, v, vars_):
        m = h.load(mbuf, mbuf.store_index(vars_))
        d = h.sub(cast(h, v, mbuf.dtype), m)
        return h.mul(d, d)
    div = n - correction

    def post(h, acc):
        return h.truediv(acc, h.index_expr(div) if correction != 0 else h.index_expr(n))
    var, _ = reduction(g, x, dim, keepdim, "sum", mbuf.dtype, value=value, post=post)
    return mean, var


@register_lowering("var", "std")
def _var(g, op, args, margs, meta):
    x, dim, unbiased, keepdim, correction = args[:5]
    if not isinstance(meta, Tensor) or x.dtype._cat != 2:
        return None
    if correction is None:
        correction = 0 if unbiased is False else 1
    if isinstance(correction, float):
        if correction != int(correction):
            return None
        correction = int(correction)
    if g.sv.numel([s for i, s in enumerate(x.shape) if i in _dims(dim, len(x.shape))]) <= \
            correction:
        return None  # eager's nan / warning path
    _, var = _var_parts(g, x, dim, correction, keepdim)
    if var is None:
        return None
    if op.name == "std":
        return TBox(var.shape, meta.dtype,
                    lambda h, idx: cast(h, h.sqrt(var.load(h, idx)), meta.dtype))
    return TBox(var.shape, meta.dtype, lambda h, idx: cast(h, var.load(h, idx), meta.dtype))


def _to(x: TBox, dtype) -> TBox:
    if dtype is None or dtype is x.dtype:
        return x
    return TBox(x.shape, dtype, lambda h, idx: cast(h, x.load(h, idx), dtype))


@register_lowering("softmax", "log_softmax")
def _softmax(g, op, args, margs, meta):
    x, dim, dtype = args[:3]
    if not isinstance(meta, Tensor) or meta.dtype._cat != 2 or x.dtype._cat != 2:
        return None
    cd = kdtype(meta.dtype)
    x = _to(x, dtype)
    xc = TBox(x.shape, cd, lambda h, idx: cast(h, x.load(h, idx), cd))
    m, _ = reduction(g, xc, dim, True, "max", cd)

    def shifted(h, idx):
        return h.sub(xc.load(h, idx), bcast_load(h, m, idx))
    e = TBox(x.shape, cd, lambda h, idx: h.exp(shifted(h, idx)))
    s, _ = reduction(g, e, dim, True, "sum", cd)
    if op.name == "softmax":
        def out(h, idx):
            return cast(h, h.truediv(e.load(h, idx), cast(h, bcast_load(h, s, idx), cd)),
                        meta.dtype)
    else:
        def out(h, idx):
            return cast(h, h.sub(shifted(h, idx), h.log(cast(h, bcast_load(h, s, idx), cd))),
                        meta.dtype)
    return TBox(x.shape, meta.dtype, out)


@register_lowering("native_layer_norm")
def _layer_norm(g, op, args, margs, meta):
    x, normalized_shape, weight, bias, eps = args[:5]
    if not isinstance(x, TBox) or x.dtype._cat != 2:
        return None
    nd, k = len(x.shape), len(normalized_shape)
    dims = list(range(nd - k, nd))
    cd = kdtype(x.dtype)
    xc = TBox(x.shape, cd, lambda h, idx: cast(h, x.load(h, idx), cd))
    mean, var = _var_parts(g, xc, dims, 0, True)
    if var is None:
        return None
    sd = var.dtype

    def rstd_at(h, idx):
        return h.rsqrt(h.add(var.load(h, idx), cast(h, h.v(float(eps)), sd)))

    def out(h, idx):
        v = h.mul(h.sub(cast(h, xc.load(h, idx), sd), bcast_load(h, mean, idx)),
                  bcast_load(h, TBox(var.shape, sd, rstd_at), idx))
        if weight is not None:
            v = h.mul(v, cast(h, bcast_load(h, weight, idx), sd))
        if bias is not None:
            v = h.add(v, cast(h, bcast_load(h, bias, idx), sd))
        return cast(h, v, meta[0].dtype)
    md = meta[1].dtype
    return (TBox(x.shape, meta[0].dtype, out),
            TBox(mean.shape, md, lambda h, idx: cast(h, mean.load(h, idx), md)),
            TBox(var.shape, md, lambda h, idx: cast(h, rstd_at(h, idx), md)))


@register_lowering("clone", "contiguous", "_to_copy", "alias_copy")
def _copy(g, op, args, margs, meta):
    x = args[0]
    if not isinstance(meta, Tensor) or not isinstance(x, TBox) or meta.device.type != "meta":
        return None
    if op.name == "_to_copy":
        names = op.arg_names
        for k in ("layout", "device", "pin_memory"):
            if k in names and args[names.index(k)] not in (None, False) and not (
                    k == "device" and str(args[names.index(k)]) == "cpu"):
                return None
    return _to(TBox(x.shape, x.dtype, x.load), meta.dtype)


def _constant(g, meta, value):
    if not isinstance(meta, Tensor):
        return None
    d = meta.dtype
    if isinstance(value, complex) or (isinstance(value, float) and d._cat < 2 and
                                      not math.isfinite(value)):
        return None
    try:
        c = d.np.type(value)
    except (OverflowError, ValueError, TypeError):
        return None
    if d in (D.bfloat16, D.float16):
        import numpy as np
        c = np.float32(c)
    return TBox(g.sv.shape(meta.shape), d, lambda h, idx: h.v(c))


@register_lowering("zeros", "zeros_like", "new_zeros")
def _zeros(g, op, args, margs, meta):
    return _constant(g, meta, 0)


@register_lowering("ones", "ones_like", "new_ones")
def _ones(g, op, args, margs, meta):
    return _constant(g, meta, 1)


@register_lowering("full", "full_like", "new_full")
def _full(g, op, args, margs, meta):
    v = args[op.arg_names.index("fill_value")]
    return _constant(g, meta, v) if isinstance(v, (bool, int, float)) else None


@register_lowering("scalar_tensor")
def _scalar_tensor(g, op, args, margs, meta):
    return _constant(g, meta, args[0]) if isinstance(args[0], (bool, int, float)) else None


@register_lowering("layer_norm")
def _layer_norm_composite(g, op, args, margs, meta):
    x, normalized_shape, weight, bias, eps = args[:5]
    from ember._ops import OPS
    metas = (meta, meta, meta)
    r = _layer_norm(g, OPS["native_layer_norm"], (x, normalized_shape, weight, bias, eps),
                    None, metas)
    return None if r is None else r[0]


@register_lowering("logsumexp")
def _logsumexp(g, op, args, margs, meta):
    """max, then sum of exp(x - max) (a slice of infinities shifts by 0, as eager)."""
    x, dim, keepdim = args[:3]
    if not isinstance(meta, Tensor) or meta.dtype._cat != 2 or not isinstance(x, TBox) or \
            any(s == 0 for s in x.shape):
        return None
    cd = kdtype(meta.dtype)
    nd = len(x.shape)
    dims = _dims(dim, nd)
    xc = TBox(x.shape, cd, lambda h, idx: cast(h, x.load(h, idx), cd))
    m, _ = reduction(g, xc, dims, True, "max", cd)

    def shift(h, idx):   # the max, 0 where it is infinite
        v = bcast_load(h, m, idx)
        return h.where(h.isinf(v), cd.np.type(0.0), v)
    e = TBox(x.shape, cd, lambda h, idx: h.exp(h.sub(xc.load(h, idx), shift(h, idx))))
    s, _ = reduction(g, e, dims, True, "sum", cd)

    def out(h, idx):
        full = list(idx)
        if not keepdim:   # the reduced dims back, at 0
            it = iter(idx)
            full = [sympy.Integer(0) if i in dims else next(it) for i in range(nd)]
        r = h.add(h.log(cast(h, s.load(h, full), cd)), shift(h, full))
        return cast(h, r, meta.dtype)
    return TBox(g.sv.shape(meta.shape), meta.dtype, out)
