"""Convolution on the GPU as im2col + cuBLAS matmul (forward and backward), for 1-D, 2-D and 3-D,
any stride/padding/dilation, groups, and transposed convolutions.

im2col is one kernel (conv_tl.im2col_k) writing the (G, N, *out, Cg, *K) columns straight
from the input (any strides; the zero padding as load masks, no padded temporary): a
(G, N*L, Cg*K) batch of matrices; the batched product with the (G, Cg*K, Og) weight gives
(G, N, *out, Og), copied into the (N, G*Og, *out) result. The input gradient is the column gradient
gathered back (col2im_k: each input element sums, in kernel-position order, the column entries
that read it; no atomics, deterministic), accumulated in float32 (float64 for float64). A
transposed convolution is the input gradient of the convolution whose weight it shares, and its
backward swaps the roles the same way (PyTorch's definition). F.unfold / F.fold are the same two
kernels in the (N, C*K, L) layout.
"""
from __future__ import annotations

import math

from ember._ops.registry import Tensor, c_strides
from ember._ops.registry import dtypes as D

from .base import _acc_tl, _launch, _lazy, cuda_kernel
from .reduction import _col_sum


class _AddInto:
    qualname = "add_into"
    pw_idx = (0, 1)
    pointwise = staticmethod(lambda o, a, b: o.add(a, b))


_DTS = (D.float32, D.float16, D.bfloat16, D.float64)


def _supported(x, w, stride, padding, dilation, output_padding, transposed):
    n = w.ndim - 2
    return (1 <= n <= 3 and x.ndim == n + 2 and x.dtype in _DTS and w.dtype is x.dtype
            and len(stride) == len(padding) == len(dilation) == n
            and (not transposed or len(output_padding) == n))


def _acc(dt):
    return D.float64 if dt is D.float64 else D.float32


def _out_size(spatial, ksize, stride, pad, dil):
    return tuple((s + 2 * p - d * (k - 1) - 1) // st + 1
                 for s, k, st, p, d in zip(spatial, ksize, stride, pad, dil))


def _sp3(v, fill):
    """A per-spatial-dim tuple as (D, H, W): leading fills for 1-D and 2-D."""
    return (fill,) * (3 - len(v)) + tuple(v)


def _extent(t):
    """1 + the largest element offset t's view reaches (0 when empty)."""
    if t.numel() == 0:
        return 0
    return 1 + t._offset + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()))


def _im2col_into(be, x, out, groups, ksize, osize, stride, pad, dil, conv):
    """One launch: out (contiguous) = the columns of x (N, C, *S), any strides, the padding as
    masks. conv: out is (G, N, L, Cg, K) (the matmul's (G, N*L, Cg*K)); else (N, C, K, L)."""
    total = out.numel()
    if total == 0:
        return out
    n = len(ksize)
    st = tuple(x.stride())
    xs = _sp3(st[2:], 0)
    big = max(total, _extent(x)) >= 2**31
    _launch(be, _lazy("conv_tl").im2col_k, (-(-total // 512),),
            [x, out, x.shape[0], x.shape[1] // groups, *_sp3(x.shape[2:], 1), *_sp3(osize, 1),
             *_sp3(ksize, 1), st[0], st[1], *xs, *_sp3(stride[:n], 1), *_sp3(pad[:n], 0),
             *_sp3(dil[:n], 1), total],
            (), {"CONV": bool(conv), "BIG": big, "BLOCK": 512})
    return out


def _col2im_into(be, cols, cst, out, groups, ksize, osize, stride, pad, dil, acc):
    """One launch: out (N, C, *S) contiguous = the sum over kernel positions of the column
    entries that read each element. cols' element strides cst = (g, n, l, c, k)."""
    total = out.numel()
    if total == 0:
        return out
    big = max(total, _extent(cols)) >= 2**31
    _launch(be, _lazy("conv_tl").col2im_k, (-(-total // 256),),
            [cols, out, out.shape[1], out.shape[1] // groups, *_sp3(out.shape[2:], 1),
             *_sp3(osize, 1), *_sp3(ksize, 1), *cst, *_sp3(stride, 1), *_sp3(pad, 0),
             *_sp3(dil, 1), total],
            (), {"ACC": _acc_tl(acc), "BIG": big, "BLOCK": 256})
    return out


def _cols(be, x, groups, ksize, out, stride, pad, dil):
    """(G, N*L, Cg*K) im2col matrices of x (N, C, *S)."""
    N, C = x.shape[:2]
    Cg = C // groups
    cols = be._new((groups, N * math.prod(out), Cg * math.prod(ksize)), x.dtype, x.device)
    return _im2col_into(be, x, cols, groups, ksize, out, stride, pad, dil, True)


def _as(t, shape, stride=None, offset=0):
    """A tensor over t's storage (t contiguous unless stride is given): a view without the
    dispatch of reshape/permute (hot: every convolution makes several)."""
    shape = tuple(shape)
    return Tensor._make(t._storage, shape, c_strides(shape) if stride is None else tuple(stride),
                        t._offset + offset, t.dtype, t.device)


def _gmat(be, g, groups):
    """(N, O, *out) -> contiguous (G, N*L, Og)."""
    N, O = g.shape[:2]
    out = tuple(g.shape[2:])
    L = math.prod(out)
    Og = O // groups
    m = be._new((groups, N * L, Og), g.dtype, g.device)
    if m.numel():
        gv = _as(g, (N, groups, Og, L)) if g.is_contiguous() else \
            be._copy_new(g, g.dtype).reshape(N, groups, Og, L)
        be._copy_into(_as(m, (N, groups, Og, L), (L * Og, N * L * Og, 1, Og)), gv)
    return m


def _fwd(be, x, w, stride, pad, dil, groups, b=None):
    """Plain convolution (N, C, *S) * (O, C/G, *K) (+ bias b (O,)) -> (N, O, *out)."""
    from ember import matmul
    N = x.shape[0]
    O, Cg = w.shape[:2]
    ksize = tuple(w.shape[2:])
    out = _out_size(tuple(x.shape[2:]), ksize, stride, pad, dil)
    y = be._new((N, O) + out, x.dtype, x.device)
    if y.numel() == 0:
        return y
    Og = O // groups
    L = math.prod(out)
    CgK = Cg * math.prod(ksize)
    cols = _cols(be, x, groups, ksize, out, stride, pad, dil)               # (G, NL, CgK)
    if not w.is_contiguous():
        w = be._copy_new(w, w.dtype)
    wm = _as(w, (groups, CgK, Og), (Og * CgK, 1, CgK))                      # (G, CgK, Og)
    r = matmul(cols, wm)                                                    # (G, NL, Og)
    src = _as(r, (N, groups, Og, L), (L * Og, N * L * Og, 1, Og))
    dst = _as(y, (N, groups, Og, L))
    if b is None:
        be._copy_into(dst, src)
    else:  # the bias added in the same pass (in the accumulator's precision, then rounded)
        bv = _as(b, (1, groups, Og, 1), (0, Og * b.stride(0), b.stride(0), 0))
        be.pw.run(_AddInto, [be._operand(src), be._operand(bv)], lambda i: True,
                  be._operand(dst), y.dtype, _acc(y.dtype))
    return y


def _input_grad(be, g, w, in_spatial, stride, pad, dil, groups, out_dtype, gm=None):
    """d(conv)/d(input) for g (N, O, *out): columns W^T g, gathered back (col2im, one launch).
    gm: _gmat(g) when the caller has it."""
    from ember import matmul
    N = g.shape[0]
    O, Cg = w.shape[:2]
    ksize = tuple(w.shape[2:])
    out = tuple(g.shape[2:])
    C = Cg * groups
    gi = be._new((N, C) + tuple(in_spatial), out_dtype, g.device)
    if gi.numel() == 0:
        return gi
    if g.numel() == 0:
        return be.fill_(gi, 0)
    Og = O // groups
    KP = math.prod(ksize)
    if gm is None:
        gm = _gmat(be, g, groups)
    if not w.is_contiguous():
        w = be._copy_new(w, w.dtype)
    gcols = matmul(gm, _as(w, (groups, Og, Cg * KP)))           # (G, N*L, Cg*K) contiguous
    L = math.prod(out)
    cst = (N * L * Cg * KP, L * Cg * KP, Cg * KP, KP, 1)
    return _col2im_into(be, gcols, cst, gi, groups, ksize, out, stride, pad, dil, out_dtype)


def _weight_grad(be, x, g, ksize, stride, pad, dil, groups, out_dtype, gm=None):
    """d(conv)/d(weight) = g^T cols per group -> (O, C/G, *K). gm: _gmat(g) when known."""
    from ember import matmul
    O = g.shape[1]
    Cg = x.shape[1] // groups
    out = tuple(g.shape[2:])
    if g.numel() == 0 or x.numel() == 0:
        gw = be._new((O, Cg) + tuple(ksize), out_dtype, g.device)
        return be.fill_(gw, 0)
    cols = _cols(be, x, groups, ksize, out, stride, pad, dil)               # (G, NL, CgK)
    if gm is None:
        gm = _gmat(be, g, groups)
    Og = O // groups
    gw = matmul(_as(gm, (groups, Og, gm.shape[1]), (gm.shape[1] * Og, 1, Og)), cols)
    return _as(gw, (O, Cg) + tuple(ksize))                                  # (G, Og, CgK)


def _transposed_out(in_spatial, ksize, stride, pad, dil, opad):
    return tuple((s - 1) * st - 2 * p + d * (k - 1) + op + 1
                 for s, k, st, p, d, op in zip(in_spatial, ksize, stride, pad, dil, opad))


def convolution(be, op, x, w, b, stride, padding, dilation, transposed, output_padding,
                groups):
    if not _supported(x, w, stride, padding, dilation, output_padding, transposed) or \
            (b is not None and b.dtype is not x.dtype):
        return NotImplemented
    m = op.meta(x, w, b, stride, padding, dilation, transposed, output_padding, groups)  # checks
    stride, padding, dilation = tuple(stride), tuple(padding), tuple(dilation)
    x, w = x.detach(), w.detach()
    if transposed:
        out = _transposed_out(tuple(x.shape[2:]), tuple(w.shape[2:]), stride, padding,
                              dilation, tuple(output_padding))
        y = _input_grad(be, x, w, out, stride, padding, dilation, groups, x.dtype)
    else:
        y = _fwd(be, x, w, stride, padding, dilation, groups,
                 None if b is None or b.ndim != 1 else b.detach())
        b = None if b is None or b.ndim == 1 else b
    assert tuple(y.shape) == tuple(m.shape)
    if b is not None and y.numel():
        O = y.shape[1]
        be.pw.run(_AddInto, [be._operand(y),
                             be._operand(b.detach().reshape((1, O) + (1,) * (y.ndim - 2)))],
                  lambda i: True, be._operand(y), y.dtype, _acc(y.dtype))
    return y


def convolution_backward(be, op, gout, x, w, bias_sizes, stride, padding, dilation, transposed,
                         output_padding, groups, mask):
    if not _supported(x, w, stride, padding, dilation, output_padding, transposed) or \
            gout.dtype is not x.dtype or gout.ndim != x.ndim:
        return NotImplemented
    stride, padding, dilation = tuple(stride), tuple(padding), tuple(dilation)
    gout, x, w = gout.detach(), x.detach(), w.detach()
    ksize = tuple(w.shape[2:])
    gi = gw = gb = None
    # the output gradient as (G, N*L, Og) matrices, shared by both gradients
    gm = _gmat(be, gout, groups) if (not transposed and (mask[0] or mask[1]) and gout.numel()
                                     and x.numel()) else None
    if mask[0]:
        if transposed:
            gi = _fwd(be, gout, w, stride, padding, dilation, groups)
        else:
            gi = _input_grad(be, gout, w, tuple(x.shape[2:]), stride, padding, dilation, groups,
                             x.dtype, gm)
        if tuple(gi.shape) != tuple(x.shape):
            return NotImplemented
    if mask[1]:
        if transposed:  # roles swap: the output's columns times the input
            gw = _weight_grad(be, gout, x, ksize, stride, padding, dilation, groups, w.dtype)
        else:
            gw = _weight_grad(be, x, gout, ksize, stride, padding, dilation, groups, w.dtype,
                              gm)
        if tuple(gw.shape) != tuple(w.shape):
            return NotImplemented
    if mask[2]:
        if gm is not None and groups == 1:  # column sums of the (N*L, O) matrix: no permute
            gb = be._new((gout.shape[1],), gout.dtype, gout.device)
            _col_sum(be, gm, gb, gm.shape[1], gm.shape[2], False)
        elif gout.numel():
            gb = gout.sum((0,) + tuple(range(2, gout.ndim)))
        else:
            gb = be.fill_(be._new((gout.shape[1],), gout.dtype, gout.device), 0)
    return gi, gw, gb


# ---- im2col / col2im (F.unfold / F.fold): the same strided views, without the matmul ------------
def im2col(be, op, x, ksize, dil, pad, stride):
    if x.dtype not in _DTS or x.ndim not in (3, 4) or len(ksize) != 2:
        return NotImplemented
    unb = x.ndim == 3
    xb = x.detach()[None] if unb else x.detach()
    N, C, H, W = xb.shape
    out = _out_size((H, W), tuple(ksize), tuple(stride), tuple(pad), tuple(dil))
    if min(out) < 1 or min(ksize) < 1 or min(stride) < 1 or min(dil) < 1 or min(pad) < 0:
        return NotImplemented  # the CPU kernel raises PyTorch's error
    kh, kw = ksize
    cols = be._new((N, C * kh * kw, out[0] * out[1]), x.dtype, x.device)
    _im2col_into(be, xb, cols, 1, tuple(ksize), out, tuple(stride), tuple(pad), tuple(dil),
                 False)
    return cols[0] if unb else cols


def col2im(be, op, cols, output_size, ksize, dil, pad, stride):
    if cols.dtype not in _DTS or cols.ndim not in (2, 3) or len(ksize) != 2:
        return NotImplemented
    unb = cols.ndim == 2
    c = cols.detach()[None] if unb else cols.detach()
    N, CK, L = c.shape
    kh, kw = ksize
    out = _out_size(tuple(output_size), tuple(ksize), tuple(stride), tuple(pad), tuple(dil))
    if (min(ksize) < 1 or CK % (kh * kw) or min(out) < 1 or out[0] * out[1] != L
            or min(stride) < 1 or min(dil) < 1 or min(pad) < 0):
        return NotImplemented  # the CPU kernel raises PyTorch's error
    C = CK // (kh * kw)
    y = be._new((N, C) + tuple(output_size), cols.dtype, cols.device)
    s0, s1, s2 = c.stride()
    # cols (N, C*K, L) read in place: (g, n, l, c, k) strides (0, s0, s2, K*s1, s1)
    _col2im_into(be, c, (0, s0, s2, kh * kw * s1, s1), y, 1, tuple(ksize), out, tuple(stride),
                 tuple(pad), tuple(dil), cols.dtype)
    return y[0] if unb else y


cuda_kernel("convolution")(convolution)
cuda_kernel("convolution_backward")(convolution_backward)
cuda_kernel("im2col")(im2col)
cuda_kernel("col2im")(col2im)
