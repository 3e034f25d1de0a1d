"""2-D convolution on the GPU as im2col + cuBLAS matmul (forward and backward).

im2col is a strided view of the zero-padded input, (N, Ho, Wo, C, kh, kw), copied contiguous
by the pointwise copy kernel; the product with the (O, C*kh*kw) weight gives NHWC, permuted back
to NCHW. The input gradient scatters the column gradient back with kh*kw strided in-place adds
(col2im), accumulated in float32. Groups other than 1, transposed and 1-D/3-D convolutions fall
back to the host.
"""
from __future__ import annotations

from ember import _dtype as D


class _AddInto:
    qualname = "add_into"
    pw_idx = (0, 1)
    pointwise = staticmethod(lambda o, a, b: o.add(a, b))


def _supported(x, w, transposed, groups, stride, padding, dilation):
    return (x.ndim == 4 and w.ndim == 4 and not transposed and groups == 1
            and x.dtype in (D.float32, D.float16, D.bfloat16, D.float64)
            and len(stride) == len(padding) == len(dilation) == 2)


def _geometry(x, w, stride, padding, dilation):
    N, C, H, W = x.shape
    O, _, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    Ho = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    Wo = (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    return N, C, H, W, O, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo


def _cols(be, x, g):
    """(N*Ho*Wo, C*kh*kw) im2col matrix of x."""
    N, C, H, W, O, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo = g
    if ph or pw:
        xp = be._new((N, C, H + 2 * ph, W + 2 * pw), x.dtype, x.device)
        be.fill_(xp, 0)
        st = xp.stride()
        be._copy_into(xp._alias((N, C, H, W), st, ph * st[2] + pw * st[3]), x)
    else:
        xp = x
    sN, sC, sH, sW = xp.stride()
    view = xp._alias((N, Ho, Wo, C, kh, kw), (sN, sH * sh, sW * sw, sC, sH * dh, sW * dw),
                     xp._offset)
    cols = be._new((N, Ho, Wo, C, kh, kw), x.dtype, x.device)
    be._copy_into(cols, view)
    return cols.reshape(N * Ho * Wo, C * kh * kw)


def convolution(be, op, x, w, b, stride, padding, dilation, transposed, output_padding,
                groups):
    from ember import matmul  # cuBLAS on a GPU (the host on the fake device)
    if not _supported(x, w, transposed, groups, stride, padding, dilation) or \
            w.dtype is not x.dtype or (b is not None and b.dtype is not x.dtype):
        return NotImplemented
    op.meta(x, w, b, stride, padding, dilation, transposed, output_padding, groups)  # checks
    g = _geometry(x, w, stride, padding, dilation)
    N, C, H, W, O, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo = g
    x, w = x.detach(), w.detach()
    if N * Ho * Wo == 0:
        return NotImplemented
    y2 = matmul(_cols(be, x, g), w.reshape(O, C * kh * kw).t())       # (N*Ho*Wo, O)
    y = be._new((N, O, Ho, Wo), x.dtype, x.device)
    be._copy_into(y, y2.reshape(N, Ho, Wo, O).permute(0, 3, 1, 2))
    if b is not None:
        be.pw.run(_AddInto, [be._operand(y), be._operand(b.detach().reshape(1, O, 1, 1))],
                  lambda i: True, be._operand(y), y.dtype, _acc(y.dtype))
    return y


def _acc(dt):
    return D.float64 if dt is D.float64 else D.float32


def convolution_backward(be, op, gout, x, w, bias_sizes, stride, padding, dilation, transposed,
                         output_padding, groups, mask):
    from ember import matmul
    if not _supported(x, w, transposed, groups, stride, padding, dilation) or \
            w.dtype is not x.dtype or gout.dtype is not x.dtype:
        return NotImplemented
    g = _geometry(x, w, stride, padding, dilation)
    N, C, H, W, O, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo = g
    if N * Ho * Wo == 0 or tuple(gout.shape) != (N, O, Ho, Wo):
        return NotImplemented
    gout, x, w = gout.detach(), x.detach(), w.detach()
    g2 = gout.permute(0, 2, 3, 1).contiguous().reshape(N * Ho * Wo, O)
    gi = gw = gb = None
    if mask[1]:
        gw = matmul(g2.t(), _cols(be, x, g)).reshape(O, C, kh, kw)
    if mask[2]:
        gb = gout.sum((0, 2, 3))
    if mask[0]:
        gcols = matmul(g2, w.reshape(O, C * kh * kw)).reshape(N, Ho, Wo, C, kh, kw)
        acc = _acc(x.dtype)
        gp = be._new((N, C, H + 2 * ph, W + 2 * pw), acc, x.device)
        be.fill_(gp, 0)
        sN, sC, sH, sW = gp.stride()
        cN, cHo, cWo, cC, ckh, ckw = gcols.stride()
        for i in range(kh):
            for j in range(kw):
                dst = gp._alias((N, C, Ho, Wo), (sN, sC, sH * sh, sW * sw),
                                i * dh * sH + j * dw * sW)
                src = gcols._alias((N, C, Ho, Wo), (cN, cC, cHo, cWo),
                                   gcols._offset + i * ckh + j * ckw)
                be.pw.run(_AddInto, [be._operand(dst), be._operand(src)], lambda k: True,
                          be._operand(dst), acc, acc)
        inner = gp._alias((N, C, H, W), gp.stride(), ph * sH + pw * sW)
        gi = be._new((N, C, H, W), x.dtype, x.device)
        be._copy_into(gi, inner)
    return gi, gw, gb
