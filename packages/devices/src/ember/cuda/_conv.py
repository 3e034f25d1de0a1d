"""Convolution on the GPU as im2col + cuBLAS matmul (forward and backward), for 1-D, 2-D and 3-D,
any stride/padding/dilation, groups, and transposed convolutions.

im2col is a strided view of the zero-padded input, (G, N, *out, Cg, *K), copied contiguous by the
pointwise copy kernel: a (G, N*L, Cg*K) batch of matrices; the batched product with the
(G, Cg*K, Og) weight gives (G, N, *out, Og), copied into the (N, G*Og, *out) result. The input
gradient is the column gradient scattered back (col2im) with prod(K) strided in-place adds,
accumulated in float32 (float64 for float64). A transposed convolution is the input gradient of the
convolution whose weight it shares, and its backward swaps the roles the same way (PyTorch's
definition).
"""
from __future__ import annotations

import math

from ember import _dtype as D


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


def _padded(be, x, pad):
    """x (N, C, *S) zero-padded by pad on both sides of every spatial dim."""
    if not any(pad):
        return x
    shape = tuple(x.shape[:2]) + tuple(s + 2 * p for s, p in zip(x.shape[2:], pad))
    xp = be._new(shape, x.dtype, x.device)
    be.fill_(xp, 0)
    st = xp.stride()
    off = sum(p * st[2 + i] for i, p in enumerate(pad))
    be._copy_into(xp._alias(tuple(x.shape), st, off), x)
    return xp


def _cols(be, x, groups, ksize, out, stride, pad, dil):
    """(G, N*L, Cg*K) im2col matrices of x (N, C, *S)."""
    N, C = x.shape[:2]
    n = len(ksize)
    Cg = C // groups
    xp = _padded(be, x, pad)
    st = xp.stride()
    sN, sC, sp = st[0], st[1], st[2:]
    view = xp._alias((groups, N) + tuple(out) + (Cg,) + tuple(ksize),
                     (Cg * sC, sN) + tuple(sp[i] * stride[i] for i in range(n)) + (sC,)
                     + tuple(sp[i] * dil[i] for i in range(n)), xp._offset)
    cols = be._new(tuple(view.shape), x.dtype, x.device)
    be._copy_into(cols, view)
    return cols.reshape(groups, N * math.prod(out), Cg * math.prod(ksize))


def _gmat(be, g, groups):
    """(N, O, *out) -> contiguous (G, N*L, Og)."""
    N, O = g.shape[:2]
    out = tuple(g.shape[2:])
    n = len(out)
    v = g.reshape((N, groups, O // groups) + out).permute(
        (1, 0) + tuple(range(3, 3 + n)) + (2,))
    return v.contiguous().reshape(groups, N * math.prod(out), O // groups)


def _fwd(be, x, w, stride, pad, dil, groups):
    """Plain convolution (N, C, *S) * (O, C/G, *K) -> (N, O, *out), no bias."""
    from ember import matmul
    N = x.shape[0]
    O, Cg = w.shape[:2]
    ksize = tuple(w.shape[2:])
    n = len(ksize)
    out = _out_size(tuple(x.shape[2:]), ksize, stride, pad, dil)
    y = be._new((N, O) + out, x.dtype, x.device)
    if y.numel() == 0:
        return y
    Og = O // groups
    cols = _cols(be, x, groups, ksize, out, stride, pad, dil)               # (G, NL, CgK)
    wm = w.reshape(groups, Og, Cg * math.prod(ksize)).transpose(1, 2)       # (G, CgK, Og)
    r = matmul(cols, wm).reshape((groups, N) + out + (Og,))
    src = r.permute((1, 0, n + 2) + tuple(range(2, 2 + n)))                 # (N, G, Og, *out)
    be._copy_into(y.reshape((N, groups, Og) + out), src)
    return y


def _input_grad(be, g, w, in_spatial, stride, pad, dil, groups, out_dtype):
    """d(conv)/d(input) for g (N, O, *out): columns W^T g, scattered back (col2im)."""
    from ember import matmul
    N = g.shape[0]
    O, Cg = w.shape[:2]
    ksize = tuple(w.shape[2:])
    out = tuple(g.shape[2:])
    n = len(ksize)
    C = Cg * groups
    gi = be._new((N, C) + tuple(in_spatial), out_dtype, g.device)
    if gi.numel() == 0:
        return gi
    acc = _acc(out_dtype)
    # the padded buffer covers every window, also ones the forward's floor left out
    padded = tuple(max(s + 2 * p, (o - 1) * st + d * (k - 1) + 1)
                   for s, p, o, st, d, k in zip(in_spatial, pad, out, stride, dil, ksize))
    gp = be._new((N, C) + padded, acc, g.device)
    be.fill_(gp, 0)
    if g.numel():
        Og = O // groups
        gcols = matmul(_gmat(be, g, groups), w.reshape(groups, Og, Cg * math.prod(ksize)))
        gcols = gcols.reshape((groups, N) + out + (Cg,) + ksize)
        cst = gcols.stride()
        sN, sC, sp = gp.stride()[0], gp.stride()[1], gp.stride()[2:]
        dst_shape = (groups, N) + out + (Cg,)
        dst_st = (Cg * sC, sN) + tuple(sp[i] * stride[i] for i in range(n)) + (sC,)
        for koff in _ndindex(ksize):
            dst = gp._alias(dst_shape, dst_st, sum(koff[i] * dil[i] * sp[i] for i in range(n)))
            src = gcols._alias(dst_shape, cst[:n + 3],
                               gcols._offset + sum(koff[i] * cst[n + 3 + i] for i in range(n)))
            be.pw.run(_AddInto, [be._operand(dst), be._operand(src)], lambda k: True,
                      be._operand(dst), acc, acc)
    inner = gp._alias((N, C) + tuple(in_spatial), gp.stride(),
                      sum(pad[i] * gp.stride()[2 + i] for i in range(n)))
    be._copy_into(gi, inner)
    return gi


def _weight_grad(be, x, g, ksize, stride, pad, dil, groups, out_dtype):
    """d(conv)/d(weight) = g^T cols per group -> (O, C/G, *K)."""
    from ember import matmul
    O = g.shape[1]
    Cg = x.shape[1] // groups
    out = tuple(g.shape[2:])
    if g.numel() == 0 or x.numel() == 0:
        gw = be._new((O, Cg) + tuple(ksize), out_dtype, g.device)
        return be.fill_(gw, 0)
    cols = _cols(be, x, groups, ksize, out, stride, pad, dil)               # (G, NL, CgK)
    gw = matmul(_gmat(be, g, groups).transpose(1, 2), cols)                 # (G, Og, CgK)
    return gw.reshape((O, Cg) + tuple(ksize))


def _ndindex(shape):
    if not shape:
        yield ()
        return
    for i in range(shape[0]):
        for rest in _ndindex(shape[1:]):
            yield (i,) + rest


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
        y = _fwd(be, x, w, stride, padding, dilation, groups)
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
    if mask[0]:
        if transposed:
            gi = _fwd(be, gout, w, stride, padding, dilation, groups)
        else:
            gi = _input_grad(be, gout, w, tuple(x.shape[2:]), stride, padding, dilation, groups,
                             x.dtype)
        if tuple(gi.shape) != tuple(x.shape):
            return NotImplemented
    if mask[1]:
        if transposed:  # roles swap: the output's columns times the input
            gw = _weight_grad(be, gout, x, ksize, stride, padding, dilation, groups, w.dtype)
        else:
            gw = _weight_grad(be, x, gout, ksize, stride, padding, dilation, groups, w.dtype)
        if tuple(gw.shape) != tuple(w.shape):
            return NotImplemented
    if mask[2]:
        if gout.numel():
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
    xp = _padded(be, xb, tuple(pad))
    sN, sC, sH, sW = xp.stride()
    kh, kw = ksize
    view = xp._alias((N, C, kh, kw) + out, (sN, sC, sH * dil[0], sW * dil[1], sH * stride[0],
                                            sW * stride[1]), xp._offset)
    cols = be._new(tuple(view.shape), x.dtype, x.device)
    be._copy_into(cols, view)
    cols = cols.reshape(N, C * kh * kw, out[0] * out[1])
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
    H, W = output_size
    acc = _acc(cols.dtype)
    ph, pw = pad
    padded = (max(H + 2 * ph, (out[0] - 1) * stride[0] + dil[0] * (kh - 1) + 1),
              max(W + 2 * pw, (out[1] - 1) * stride[1] + dil[1] * (kw - 1) + 1))
    gp = be._new((N, C) + padded, acc, cols.device)
    be.fill_(gp, 0)
    c = c.contiguous().reshape((N, C, kh, kw) + out)
    cst = c.stride()
    sN, sC, sH, sW = gp.stride()
    shape = (N, C) + out
    dst_st = (sN, sC, sH * stride[0], sW * stride[1])
    for i in range(kh):
        for j in range(kw):
            dst = gp._alias(shape, dst_st, i * dil[0] * sH + j * dil[1] * sW)
            src = c._alias(shape, (cst[0], cst[1], cst[4], cst[5]),
                           c._offset + i * cst[2] + j * cst[3])
            be.pw.run(_AddInto, [be._operand(dst), be._operand(src)], lambda k: True,
                      be._operand(dst), acc, acc)
    y = be._new((N, C, H, W), cols.dtype, cols.device)
    be._copy_into(y, gp._alias((N, C, H, W), gp.stride(), ph * sH + pw * sW))
    return y[0] if unb else y
