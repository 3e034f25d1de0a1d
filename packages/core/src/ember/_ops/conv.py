"""Convolutions (1d/2d/3d, transposed) and unfold/fold, as im2col + one BLAS matmul per group.

`convolution` is the one kernel op (PyTorch's aten::convolution); conv1d/2d/3d and
conv_transpose1d/2d/3d parse their arguments into it. Its vjp is `convolution_backward`, itself
written with the same im2col/col2im helpers, so no Python loop ever runs over pixels: the only
loops are over kernel offsets (9 for a 3x3 kernel) when scattering columns back (col2im).
"""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .._blas import gemm_threads
from .._dispatch import TensorMeta
from . import _cpu_conv
from ._registry import defop

__all__ = ["im2col", "col2im", "conv_out_size", "ntuple"]


def ntuple(v, n, name="kernel_size"):
    """An int or a sequence -> a tuple of n ints (PyTorch's _pair/_triple)."""
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            return tuple(v) * n
        if len(v) != n:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                               f"values to match the convolution dimensions, but got "
                               f"{name}={list(v)}")
        return tuple(v)
    return (v,) * n


def conv_out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _compute_dtype(a: np.ndarray):
    """fp16/bf16 compute in float32 (numpy's half matmul is slow and inexact)."""
    if a.dtype == np.float16 or a.dtype.name == "bfloat16" or a.dtype.kind == "V":
        return np.dtype(np.float32)
    return a.dtype


def _up(a, dt):
    return a if a.dtype == dt else a.astype(dt)


def _pad_spatial(x, pad, value=0.0):
    if not any(pad):
        return x
    widths = [(0, 0)] * (x.ndim - len(pad)) + [(p, p) for p in pad]
    return np.pad(x, widths, constant_values=value)


def windows(xp, ksize, stride, dil, out):
    """(N, C, *Sp) -> read-only view (N, C, *out, *K) of every kernel window (no copy)."""
    n = len(ksize)
    lead = xp.strides[:-n]
    sp = xp.strides[-n:]
    shape = xp.shape[:-n] + tuple(out) + tuple(ksize)
    strides = lead + tuple(s * st for s, st in zip(sp, stride)) + tuple(s * d for s, d in
                                                                        zip(sp, dil))
    return as_strided(xp, shape, strides, writeable=False)


def im2col(x, ksize, stride, pad, dil):
    """(N, C, *S) -> (C, *K, N, *out) contiguous columns, and out (the output spatial sizes)."""
    n = len(ksize)
    out = tuple(conv_out_size(s, k, st, p, d) for s, k, st, p, d in
                zip(x.shape[2:], ksize, stride, pad, dil))
    w = windows(_pad_spatial(x, pad), ksize, stride, dil, out)   # (N, C, *out, *K)
    perm = (1,) + tuple(range(2 + n, 2 + 2 * n)) + (0,) + tuple(range(2, 2 + n))
    return np.ascontiguousarray(w.transpose(perm)), out


def col2im(cols, in_spatial, ksize, stride, pad, dil):
    """Adjoint of im2col: (C, *K, N, *out) -> (N, C, *S), summing overlapping windows."""
    n = len(ksize)
    C = cols.shape[0]
    out = cols.shape[2 + n:]
    N = cols.shape[1 + n]
    padded = tuple(s + 2 * p for s, p in zip(in_spatial, pad))
    xp = np.zeros((C, N) + padded, cols.dtype)
    for k in np.ndindex(*ksize):
        sl = tuple(slice(ki * d, ki * d + (o - 1) * s + 1, s)
                   for ki, d, o, s in zip(k, dil, out, stride))
        xp[(slice(None), slice(None)) + sl] += cols[(slice(None),) + k]
    crop = tuple(slice(p, p + s) for p, s in zip(pad, in_spatial))
    return xp[(slice(None), slice(None)) + crop].swapaxes(0, 1)


# ---- the convolution kernel ------------------------------------------------------------------
def _conv_fwd(x, w, stride, pad, dil, groups):
    """Plain convolution: x (N, C, *S), w (O, C/g, *K) -> (N, O, *out)."""
    N, O = x.shape[0], w.shape[0]
    ksize = w.shape[2:]
    cols, out = im2col(x, ksize, stride, pad, dil)                   # (C, *K, N, *out)
    L = N * math.prod(out)
    cols = cols.reshape(groups, -1, L)                              # (g, Cg*K, N*L)
    gemm_threads(2 * O * cols.shape[1] * L)
    y = np.matmul(w.reshape(groups, O // groups, -1), cols)          # (g, Og, N*L)
    return y.reshape((O, N) + out).swapaxes(0, 1)


def _conv_input_grad(g, w, in_spatial, stride, pad, dil, groups):
    """d(conv)/d(input): columns W^T g scattered back by col2im. g (N, O, *out)."""
    O, Cg = w.shape[:2]
    ksize = w.shape[2:]
    N = g.shape[0]
    out = g.shape[2:]
    gm = np.ascontiguousarray(g.swapaxes(0, 1)).reshape(groups, O // groups, -1)
    wm = w.reshape(groups, O // groups, -1)
    gemm_threads(2 * O * wm.shape[2] * gm.shape[2])
    cols = np.matmul(wm.transpose(0, 2, 1), gm)                       # (g, Cg*K, N*L)
    cols = cols.reshape((groups * Cg,) + tuple(ksize) + (N,) + tuple(out))
    return col2im(cols, in_spatial, ksize, stride, pad, dil)


def _conv_weight_grad(x, g, ksize, stride, pad, dil, groups):
    """d(conv)/d(weight) = g @ cols^T per group -> (O, C/g, *K)."""
    O = g.shape[1]
    cols, out = im2col(x, ksize, stride, pad, dil)
    if tuple(out) != tuple(g.shape[2:]):   # a transposed conv's output_padding past the stride
        out = tuple(g.shape[2:])
        cols = np.ascontiguousarray(cols[(slice(None),) * (2 + len(ksize))
                                         + tuple(slice(0, q) for q in out)])
    cols = cols.reshape(groups, -1, g.shape[0] * math.prod(out))    # (g, Cg*K, N*L)
    gm = np.ascontiguousarray(g.swapaxes(0, 1)).reshape(groups, O // groups, -1)
    gemm_threads(2 * O * cols.shape[1] * cols.shape[2])
    gw = np.matmul(gm, cols.transpose(0, 2, 1))                      # (g, Og, Cg*K)
    return gw.reshape((O, -1) + tuple(ksize))


def _transposed_out(in_spatial, ksize, stride, pad, dil, opad):
    return tuple((s - 1) * st - 2 * p + d * (k - 1) + op + 1
                 for s, k, st, p, d, op in zip(in_spatial, ksize, stride, pad, dil, opad))


def _shape_str(s):
    return "[" + ", ".join(str(v) for v in s) + "]"


def _check_conv(x, w, b, stride, pad, dil, transposed, opad, groups):
    n = w.ndim - 2
    if x.ndim != n + 2:
        raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to "
                           f"conv{n}d, but got input of size: {_shape_str(x.shape)}")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(p < 0 for p in pad):
        raise RuntimeError("negative padding is not supported")
    if any(d <= 0 for d in dil):
        raise RuntimeError("dilation should be greater than zero")
    if w.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size [{_shape_str(w.shape)}] "
                           f"instead")
    cin = w.shape[0] if transposed else w.shape[1] * groups
    if x.shape[1] != cin:
        what = "transposed=1" if transposed else f"groups={groups}"
        raise RuntimeError(f"Given {what}, weight of size {_shape_str(w.shape)}, expected "
                           f"input{_shape_str(x.shape)} to have {cin} channels, but got "
                           f"{x.shape[1]} channels instead")
    cout = w.shape[1] * groups if transposed else w.shape[0]
    if b is not None and (b.ndim != 1 or b.shape[0] != cout):
        raise RuntimeError(f"Given weight of size {_shape_str(w.shape)}, expected bias to be "
                           f"1-dimensional with {cout} elements, but got bias of size "
                           f"{_shape_str(b.shape)} instead")
    if not transposed:
        padded = [s + 2 * p for s, p in zip(x.shape[2:], pad)]
        eff = [d * (k - 1) + 1 for k, d in zip(w.shape[2:], dil)]
        if any(p < e for p, e in zip(padded, eff)):
            raise RuntimeError(f"Calculated padded input size per channel: "
                               f"({' x '.join(map(str, padded))}). Kernel size: "
                               f"({' x '.join(map(str, eff))}). Kernel size can't be greater "
                               f"than actual input size")
    elif any(op >= max(s, d) for op, s, d in zip(opad, stride, dil)):
        raise RuntimeError("output padding must be smaller than either stride or dilation")


def _conv_meta(x, w, b, stride, pad, dil, transposed, opad, groups):
    _check_conv(x, w, b, stride, pad, dil, transposed, opad, groups)
    ksize = tuple(w.shape[2:])
    if transposed:
        out = _transposed_out(tuple(x.shape[2:]), ksize, stride, pad, dil, opad)
        return TensorMeta((x.shape[0], w.shape[1] * groups) + out, x.dtype)
    out = tuple(conv_out_size(s, k, st, p, d) for s, k, st, p, d in
                zip(x.shape[2:], ksize, stride, pad, dil))
    return TensorMeta((x.shape[0], w.shape[0]) + out, x.dtype)


def _conv_kernel(x, w, b, stride, pad, dil, transposed, opad, groups):
    _check_conv(x, w, b, stride, pad, dil, transposed, opad, groups)
    dt = _compute_dtype(x)
    xc, wc = _up(x, dt), _up(w, dt)
    if transposed:
        out = _transposed_out(x.shape[2:], w.shape[2:], stride, pad, dil, opad)
        y = _cpu_conv.conv_input_grad(xc, wc, out, stride, pad, dil, groups)
        if y is None:
            y = _conv_input_grad(xc, wc, out, stride, pad, dil, groups)
    else:   # the C++ kernel adds the bias itself
        y = _cpu_conv.conv_forward(xc, wc, None if b is None else _up(b, dt), stride, pad, dil,
                                   groups)
        if y is not None:
            return y.astype(x.dtype, copy=False)
        y = _conv_fwd(xc, wc, stride, pad, dil, groups)
    # y is a transposed view: the bias add writes the contiguous result in the same pass
    res = np.empty(y.shape, y.dtype)
    if b is not None:
        np.add(y, _up(b, dt).reshape((1, -1) + (1,) * (y.ndim - 2)), out=res)
    else:
        np.copyto(res, y)
    return res.astype(x.dtype, copy=False)


def _conv_vjp(g, out, x, w, b, stride, pad, dil, transposed, opad, groups):
    mask = [x.requires_grad, w.requires_grad, b is not None and b.requires_grad]
    gi, gw, gb = convolution_backward(g, x, w, None if b is None else b.shape, stride, pad, dil,
                                      transposed, opad, groups, mask)
    return gi, gw, gb


_CONV = ("convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, "
         "SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, "
         "SymInt groups) -> Tensor")
defop(_CONV, method=False, kernels={"cpu": _conv_kernel}, meta=_conv_meta, vjp=_conv_vjp)


def _conv_bwd_kernel(g, x, w, bias_sizes, stride, pad, dil, transposed, opad, groups, mask):
    dt = _compute_dtype(x)
    gc, xc, wc = _up(g, dt), _up(x, dt), _up(w, dt)
    gi = gw = gb = None
    if mask[0]:
        if transposed:   # (an output_padding past the stride adds positions x lacks)
            gi = _cpu_conv.conv_forward(gc, wc, None, stride, pad, dil, groups, x.shape[2:])
            if gi is None:
                gi = _conv_fwd(gc, wc, stride, pad, dil, groups)
                gi = gi[(slice(None),) * 2 + tuple(slice(0, s) for s in x.shape[2:])]
        else:
            gi = _cpu_conv.conv_input_grad(gc, wc, x.shape[2:], stride, pad, dil, groups)
            if gi is None:
                gi = _conv_input_grad(gc, wc, x.shape[2:], stride, pad, dil, groups)
        gi = np.ascontiguousarray(gi).astype(x.dtype, copy=False)
    if mask[1]:
        # roles swap for a transposed conv: the output's columns times the input
        a, b = (gc, xc) if transposed else (xc, gc)
        r = _cpu_conv.conv_weight_grad(a, b, w.shape[2:], stride, pad, dil, groups,
                                       bias=mask[2] and not transposed)
        if r is None:
            gw = _conv_weight_grad(a, b, w.shape[2:], stride, pad, dil, groups)
        else:
            gw, gb = r
            if gb is not None:
                gb = gb.astype(g.dtype, copy=False)
        gw = np.ascontiguousarray(gw).astype(w.dtype, copy=False)
    if mask[2] and gb is None:
        gb = gc.sum(axis=(0,) + tuple(range(2, g.ndim))).astype(g.dtype, copy=False)
    return gi, gw, gb


def _conv_bwd_meta(g, x, w, bias_sizes, *rest):
    mask = rest[-1]
    return (TensorMeta(x.shape, x.dtype) if mask[0] else None,
            TensorMeta(w.shape, w.dtype) if mask[1] else None,
            TensorMeta((g.shape[1],), g.dtype) if mask[2] else None)


def _conv_bwd_vjp(grads, out, g, x, w, bias_sizes, stride, pad, dil, transposed, opad, groups,
                  mask):
    """Double backward. The conv F(x, w) is bilinear with gi = Jx^T g, gw = Jw^T g, gb = sum g,
    so: d/dg = F(ggi, w) + F(x, ggw) + ggb; d/dx = Jx(w=ggw)^T g; d/dw = Jw(x=ggi)^T g."""
    ggi, ggw, ggb = grads
    conv = _op("convolution")
    geo = (stride, pad, dil, transposed, opad, groups)
    gg = None
    if ggi is not None and out[0] is not None:
        gg = conv(ggi, w, None, *geo)
    if ggw is not None and out[1] is not None:
        t = conv(x, ggw, None, *geo)
        gg = t if gg is None else gg + t
    if ggb is not None and out[2] is not None:
        t = ggb.reshape((1, -1) + (1,) * (g.ndim - 2))
        gg = t if gg is None else gg + t
    gx = gw = None
    if ggw is not None and out[1] is not None and x.requires_grad:
        gx = convolution_backward(g, x, ggw, None, *geo, [True, False, False])[0]
    if ggi is not None and out[0] is not None and w.requires_grad:
        gw = convolution_backward(g, ggi, w, None, *geo, [False, True, False])[1]
    return gg, gx, gw


convolution_backward = defop(
    "convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes, "
    "SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, "
    "SymInt[] output_padding, SymInt groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
    function=False, method=False, kernels={"cpu": _conv_bwd_kernel}, meta=_conv_bwd_meta,
    vjp=_conv_bwd_vjp, supports="fc")


# ---- conv1d/2d/3d and conv_transpose1d/2d/3d: argument parsing over `convolution` -----------
def _same_padding(ksize, dil, stride):
    if any(s != 1 for s in stride):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    total = [d * (k - 1) for k, d in zip(ksize, dil)]
    return [t // 2 for t in total], [t - t // 2 for t in total]


def _unbatched(x, n, name):
    if x.ndim == n + 1:
        return x.unsqueeze(0), True
    if x.ndim != n + 2:
        raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to "
                           f"{name}, but got input of size: {_shape_str(x.shape)}")
    return x, False


def _make_conv(n):
    name = f"conv{n}d"

    def decomp(x, w, b, stride, padding, dilation, groups):
        x, unb = _unbatched(x, n, name)
        stride, dil = ntuple(stride, n, "stride"), ntuple(dilation, n, "dilation")
        if isinstance(padding, str):
            if padding == "valid":
                pad = (0,) * n
            elif padding == "same":
                left, right = _same_padding(w.shape[2:], dil, stride)
                if left != right:   # odd total padding: PyTorch pads the extra on the right
                    extra = []
                    for lo, hi in reversed(list(zip(left, right))):
                        extra += [0, hi - lo]
                    from . import OPS
                    x = OPS["constant_pad_nd"](x, extra, 0)
                pad = tuple(left)
            else:
                raise ValueError(f"Invalid padding string '{padding}', should be one of "
                                 f"{{'valid', 'same'}}")
        else:
            pad = ntuple(padding, n, "padding")
        y = _convolution(x, w, b, stride, pad, dil, False, (0,) * n, groups)
        return y.select(0, 0) if unb else y
    defop(f"{name}(Tensor input, Tensor weight, Tensor? bias=None, SymInt[{n}] stride=1, "
          f"SymInt[{n}] padding=0, SymInt[{n}] dilation=1, SymInt groups=1) -> Tensor",
          method=False, functional=name, decomp=decomp)


def _make_conv_transpose(n):
    name = f"conv_transpose{n}d"

    def decomp(x, w, b, stride, padding, output_padding, groups, dilation):
        x, unb = _unbatched(x, n, name)
        y = _convolution(x, w, b, ntuple(stride, n, "stride"), ntuple(padding, n, "padding"),
                         ntuple(dilation, n, "dilation"), True,
                         ntuple(output_padding, n, "output_padding"), groups)
        return y.select(0, 0) if unb else y
    defop(f"{name}(Tensor input, Tensor weight, Tensor? bias=None, SymInt[{n}] stride=1, "
          f"SymInt[{n}] padding=0, SymInt[{n}] output_padding=0, SymInt groups=1, "
          f"SymInt[{n}] dilation=1) -> Tensor", method=False, functional=name, decomp=decomp)


def _convolution(*args):
    from . import OPS
    return OPS["convolution"](*args)


for _n in (1, 2, 3):
    _make_conv(_n)
    _make_conv_transpose(_n)


# ---- unfold / fold (im2col / col2im), adjoint of each other ----------------------------------
def _unfold_args(x, ksize, dil, pad, stride, name, want):
    if x.ndim not in (want - 1, want):
        raise RuntimeError(f"Input Error: Only {'3D or 4D' if want == 4 else '2D or 3D'} input "
                           f"Tensors are supported (got {x.ndim}D)")
    return (ntuple(ksize, 2), ntuple(dil, 2, "dilation"), ntuple(pad, 2, "padding"),
            ntuple(stride, 2, "stride"))


def _im2col_kernel(x, ksize, dil, pad, stride):
    unb = x.ndim == 3
    if unb:
        x = x[None]
    cols, out = im2col(x, ksize, stride, pad, dil)          # (C, *K, N, *out)
    N, C = x.shape[:2]
    cols = cols.reshape(C * math.prod(ksize), N, -1).swapaxes(0, 1)
    cols = np.ascontiguousarray(cols)
    return cols[0].copy() if unb else cols


def _im2col_meta(x, ksize, dil, pad, stride):
    out = [conv_out_size(s, k, st, p, d) for s, k, st, p, d in
           zip(x.shape[-2:], ksize, stride, pad, dil)]
    ck = x.shape[-3] * ksize[0] * ksize[1]
    return TensorMeta(tuple(x.shape[:-3]) + (ck, out[0] * out[1]), x.dtype)


def _col2im_kernel(cols, output_size, ksize, dil, pad, stride):
    unb = cols.ndim == 2
    if unb:
        cols = cols[None]
    N, CK, L = cols.shape
    kp = math.prod(ksize)
    if CK % kp:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product "
                           f"of kernel_size, but got input.size(1)={CK} and "
                           f"kernel_size={tuple(ksize)}")
    out = tuple(conv_out_size(s, k, st, p, d) for s, k, st, p, d in
                zip(output_size, ksize, stride, pad, dil))
    if math.prod(out) != L:
        raise RuntimeError(f"Given output_size={tuple(output_size)}, kernel_size={tuple(ksize)}, "
                           f"dilation={tuple(dil)}, padding={tuple(pad)}, stride={tuple(stride)}, "
                           f"expected size of input's dimension 2 to match the calculated number "
                           f"of sliding blocks {out[0]} * {out[1]} = {math.prod(out)}, but got "
                           f"input.size(2)={L}.")
    dt = _compute_dtype(cols)
    c = _up(cols, dt).swapaxes(0, 1).reshape((CK // kp,) + tuple(ksize) + (N,) + out)
    y = col2im(c, tuple(output_size), ksize, stride, pad, dil).astype(cols.dtype)
    return np.ascontiguousarray(y[0] if unb else y)


def _col2im_meta(cols, output_size, ksize, dil, pad, stride):
    c = cols.shape[-2] // (ksize[0] * ksize[1])
    return TensorMeta(tuple(cols.shape[:-2]) + (c,) + tuple(output_size), cols.dtype)


defop("im2col(Tensor self, int[2] kernel_size, int[2] dilation, int[2] padding, "
      "int[2] stride) -> Tensor", method=False, kernels={"cpu": _im2col_kernel},
      meta=_im2col_meta,
      vjp=lambda g, out, x, k, d, p, s: (_op("col2im")(g, x.shape[-2:], k, d, p, s),),
      supports="fc")
defop("col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, "
      "int[2] padding, int[2] stride) -> Tensor", method=False, kernels={"cpu": _col2im_kernel},
      meta=_col2im_meta,
      vjp=lambda g, out, x, osz, k, d, p, s: (_op("im2col")(g, k, d, p, s),), supports="fc")


def _op(name):
    from . import OPS
    return OPS[name]


def _unfold(x, kernel_size, dilation, padding, stride):
    k, d, p, s = _unfold_args(x, kernel_size, dilation, padding, stride, "unfold", 4)
    return _op("im2col")(x, k, d, p, s)


def _fold(x, output_size, kernel_size, dilation, padding, stride):
    if x.ndim not in (2, 3):
        raise RuntimeError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are "
                           f"supported (got {x.ndim}D)")
    k, d, p, s = (ntuple(kernel_size, 2), ntuple(dilation, 2, "dilation"),
                  ntuple(padding, 2, "padding"), ntuple(stride, 2, "stride"))
    return _op("col2im")(x, ntuple(output_size, 2, "output_size"), k, d, p, s)


# F.unfold / F.fold have no aten op of that name (aten::unfold is Tensor.unfold): functional only
defop("_nn_unfold(Tensor input, int[2] kernel_size, int[2] dilation=1, int[2] padding=0, "
      "int[2] stride=1) -> Tensor", function=False, method=False, functional="unfold",
      decomp=_unfold)
defop("_nn_fold(Tensor input, SymInt[2] output_size, int[2] kernel_size, int[2] dilation=1, "
      "int[2] padding=0, int[2] stride=1) -> Tensor", function=False, method=False,
      functional="fold", decomp=_fold)

