"""Resampling: interpolate (nearest, nearest-exact, (bi/tri)linear, bicubic, area), grid_sample
(2-D, bilinear/nearest, zeros/border padding) and affine_grid.

Interpolation is separable: along each spatial dim it is a small (out, in) matrix, so the kernel
contracts one matrix per dim (a BLAS call each) and the backward contracts the transposes.
"""
from __future__ import annotations

import math

import numpy as np

from .._dispatch import TensorMeta
from ._registry import OPS, defop
from .pool import _apply_per_dim, _cdt

_A = -0.75   # PyTorch's bicubic coefficient


def _src_scale(size_in, size_out, align_corners, scale):
    if align_corners:
        return (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else size_in / size_out


def _interp_matrix(size_in, size_out, mode, align_corners, scale):
    """(size_out, size_in) matrix M with out = M @ in along one dim."""
    m = np.zeros((size_out, size_in), np.float64)
    dst = np.arange(size_out)
    if mode in ("nearest", "nearest-exact"):
        # PyTorch computes these indices in float32: mirror it so boundaries land alike
        s = np.float32(_src_scale(size_in, size_out, False, scale))
        off = np.float32(0.5 if mode == "nearest-exact" else 0.0)
        src = np.floor((dst.astype(np.float32) + off) * s).astype(np.int64)
        m[dst, np.minimum(src, size_in - 1)] = 1.0
        return m
    s = _src_scale(size_in, size_out, align_corners, scale)
    if mode == "linear":
        src = dst * s if align_corners else np.maximum(s * (dst + 0.5) - 0.5, 0.0)
        i0 = np.floor(src).astype(np.int64)
        i0 = np.minimum(i0, size_in - 1)
        i1 = np.minimum(i0 + 1, size_in - 1)
        l1 = src - i0
        np.add.at(m, (dst, i0), 1 - l1)
        np.add.at(m, (dst, i1), l1)
        return m
    if mode == "cubic":
        src = dst * s if align_corners else s * (dst + 0.5) - 0.5
        i = np.floor(src).astype(np.int64)
        t = src - i

        def c1(x):
            return ((_A + 2) * x - (_A + 3)) * x * x + 1

        def c2(x):
            return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A
        ws = (c2(t + 1), c1(t), c1(1 - t), c2(2 - t))
        for k, w in enumerate(ws):
            np.add.at(m, (dst, np.clip(i - 1 + k, 0, size_in - 1)), w)
        return m
    raise AssertionError(mode)


def _matrices(in_sizes, out_sizes, mode, align_corners, scales, dt):
    sc = scales if scales else [None] * len(out_sizes)
    return [_interp_matrix(i, o, mode, align_corners, s).astype(dt)
            for i, o, s in zip(in_sizes, out_sizes, sc)]


def _upsample_kernel(x, output_size, mode, align_corners, scales):
    upsample_checks(x, output_size)
    n = len(output_size)
    dt = _cdt(x)
    mats = _matrices(x.shape[-n:], output_size, mode, align_corners, scales, dt)
    return np.ascontiguousarray(_apply_per_dim(x.astype(dt), mats)).astype(x.dtype)


def _upsample_backward_kernel(g, input_size, mode, align_corners, scales):
    n = len(input_size)
    dt = _cdt(g)
    mats = _matrices(input_size, g.shape[-n:], mode, align_corners, scales, dt)
    return np.ascontiguousarray(_apply_per_dim(g.astype(dt), [m.T for m in mats])).astype(g.dtype)


def upsample_checks(x, o) -> None:
    """PyTorch's size check of the upsample kernels (x: anything with ndim/shape; shared with
    device kernels): every input and output spatial size > 0."""
    sizes_in = tuple(x.shape[x.ndim - len(o):])
    if any(s <= 0 for s in sizes_in) or any(s <= 0 for s in o):
        names = ("D", "H", "W")[3 - len(o):]

        def fmt(sizes):
            return ", ".join(f"{n}: {s}" for n, s in zip(names, sizes))
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                           f"({fmt(sizes_in)}){' and' if len(o) == 1 else ''} output ({fmt(o)})")


def _upsample_meta(x, o, *rest):
    upsample_checks(x, o)
    return TensorMeta(tuple(x.shape[:x.ndim - len(o)]) + tuple(o), x.dtype)


_upsample = defop(
    "_upsample(Tensor self, SymInt[] output_size, str mode, bool align_corners, float[]? scales) "
    "-> Tensor", function=False, method=False, kernels={"cpu": _upsample_kernel},
    meta=_upsample_meta,
    vjp=lambda g, out, x, o, mode, ac, sc: (
        _upsample_backward(g, x.shape[x.ndim - len(o):], mode, ac, sc),))
_upsample_backward = defop(
    "_upsample_backward(Tensor grad_output, SymInt[] input_size, str mode, bool align_corners, "
    "float[]? scales) -> Tensor", function=False, method=False,
    kernels={"cpu": _upsample_backward_kernel},
    meta=lambda g, s, *rest: TensorMeta(tuple(g.shape[:g.ndim - len(s)]) + tuple(s), g.dtype),
    vjp=lambda gg, out, g, s, mode, ac, sc: (
        _upsample(gg, g.shape[g.ndim - len(s):], mode, ac, sc),))

_MODE_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def interpolate(x, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias):
    """F.interpolate: argument checks and output size, then one `_upsample` (or adaptive pool)."""
    n = x.ndim - 2
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    if antialias:
        raise NotImplementedError("interpolate(antialias=True) is not supported by ember yet")
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if n < 1:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported "
                                  f"(got {x.ndim}D) for the modes: nearest | linear | bilinear | "
                                  f"bicubic | trilinear | area | nearest-exact (got {mode})")
    if size is not None:
        out = tuple(size) if isinstance(size, (list, tuple)) else (size,) * n
        if len(out) != n:
            raise ValueError(f"Input and output must have the same number of spatial dimensions,"
                             f" but got input with spatial dimensions of {list(x.shape[2:])} and "
                             f"output size of {list(out)}. Please provide input tensor in (N, C, "
                             f"d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format.")
        scales = None
    else:
        sf = tuple(scale_factor) if isinstance(scale_factor, (list, tuple)) else \
            (scale_factor,) * n
        if len(sf) != n:
            raise ValueError(f"Input and scale_factor must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of "
                             f"{list(x.shape[2:])} and scale_factor of shape {list(sf)}. Please "
                             f"provide input tensor in (N, C, d1, d2, ...,dK) format and "
                             f"scale_factor in (s1, s2, ...,sK) format.")
        out = tuple(int(math.floor(float(s) * float(f))) for s, f in zip(x.shape[2:], sf))
        scales = None if recompute_scale_factor else [float(f) for f in sf]
    if mode == "area":
        from .pool import _adaptive_avg
        return _adaptive_avg(x, out)
    if mode in ("nearest", "nearest-exact"):
        return _upsample(x, out, mode, False, scales)
    want = _MODE_DIMS.get(mode)
    if want is None:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported "
                                  f"(got {x.ndim}D) for the modes: nearest | linear | bilinear | "
                                  f"bicubic | trilinear | area | nearest-exact (got {mode})")
    if n != want:
        raise NotImplementedError(f"Got {x.ndim}D input, but {mode} mode needs {want + 2}D input")
    return _upsample(x, out, "cubic" if mode == "bicubic" else "linear", align_corners, scales)


# ---- grid_sample (2-D) ---------------------------------------------------------------------------
def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1) / 2 * (size - 1), (size - 1) / 2
    return ((coord + 1) * size - 1) / 2, size / 2


def grid_checks(x, grid, padding_mode):
    """grid_sampler's argument checks, shared with device kernels (x, grid: anything with
    ndim/shape)."""
    if x.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2:
        raise RuntimeError(f"grid_sampler(): expected 4D input and grid with last dimension 2 "
                           f"(ember supports 2-D grid_sample), but got input with sizes "
                           f"{list(x.shape)} and grid with sizes {list(grid.shape)}")
    if x.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {list(x.shape)} and grid with sizes "
                           f"{list(grid.shape)}")
    if padding_mode == 2:
        raise NotImplementedError("grid_sample(padding_mode='reflection') is not supported by "
                                  "ember yet")


def _grid_setup(x, grid, padding_mode, align_corners):
    grid_checks(x, grid, padding_mode)
    H, W = x.shape[2:]
    dt = _cdt(x)
    ix, sx = _unnormalize(grid[..., 0].astype(dt), W, align_corners)
    iy, sy = _unnormalize(grid[..., 1].astype(dt), H, align_corners)
    gx = np.ones_like(ix)
    gy = np.ones_like(iy)
    if padding_mode == 1:    # border: clip, and no gradient where clipped
        gx = ((ix > 0) & (ix < W - 1)).astype(dt)
        gy = ((iy > 0) & (iy < H - 1)).astype(dt)
        ix, iy = np.clip(ix, 0, W - 1), np.clip(iy, 0, H - 1)
    return dt, H, W, ix, iy, sx * gx, sy * gy


def _corners(ix, iy, H, W, mode):
    """[(flat index, valid, weight, dweight/dix, dweight/diy)] for each sampled corner."""
    if mode == 1:   # nearest (round half to even, as nearbyint)
        x0, y0 = np.rint(ix).astype(np.int64), np.rint(iy).astype(np.int64)
        ok = (x0 >= 0) & (x0 < W) & (y0 >= 0) & (y0 < H)
        z = np.zeros_like(ix)
        return [(np.where(ok, y0 * W + x0, 0), ok, np.ones_like(ix), z, z)]
    x0, y0 = np.floor(ix), np.floor(iy)
    x1, y1 = x0 + 1, y0 + 1
    out = []
    for cx, cy, w, dwx, dwy in ((x0, y0, (x1 - ix) * (y1 - iy), -(y1 - iy), -(x1 - ix)),
                                (x1, y0, (ix - x0) * (y1 - iy), (y1 - iy), -(ix - x0)),
                                (x0, y1, (x1 - ix) * (iy - y0), -(iy - y0), (x1 - ix)),
                                (x1, y1, (ix - x0) * (iy - y0), (iy - y0), (ix - x0))):
        cxi, cyi = cx.astype(np.int64), cy.astype(np.int64)
        ok = (cxi >= 0) & (cxi < W) & (cyi >= 0) & (cyi < H)
        out.append((np.where(ok, cyi * W + cxi, 0), ok, w, dwx, dwy))
    return out


def _grid_kernel(x, grid, mode, padding_mode, align_corners):
    if mode == 2:
        raise NotImplementedError("grid_sample(mode='bicubic') is not supported by ember yet")
    dt, H, W, ix, iy, _, _ = _grid_setup(x, grid, padding_mode, align_corners)
    N, C = x.shape[:2]
    xf = x.astype(dt).reshape(N, C, H * W)
    out = np.zeros((N, C) + ix.shape[1:], dt)
    for idx, ok, w, _, _ in _corners(ix, iy, H, W, mode):
        v = np.take_along_axis(xf, idx.reshape(N, 1, -1), 2).reshape(out.shape)
        out += v * (w * ok)[:, None]
    return out.astype(x.dtype)


def _grid_backward_kernel(g, x, grid, mode, padding_mode, align_corners, mask):
    dt, H, W, ix, iy, sx, sy = _grid_setup(x, grid, padding_mode, align_corners)
    N, C = x.shape[:2]
    xf = x.astype(dt).reshape(N, C, H * W)
    gf = g.astype(dt).reshape(N, C, -1)
    gi = np.zeros(N * C * H * W, np.float64) if mask[0] else None
    ggx = np.zeros(ix.shape, dt)
    ggy = np.zeros(iy.shape, dt)
    base = (np.arange(N * C) * (H * W)).reshape(N, C, 1)
    for idx, ok, w, dwx, dwy in _corners(ix, iy, H, W, mode):
        idx2 = idx.reshape(N, 1, -1)
        if mask[0]:
            wts = gf * (w * ok).reshape(N, 1, -1)
            gi += np.bincount((idx2 + base).ravel(), weights=wts.ravel(), minlength=gi.size)
        if mask[1] and mode == 0:
            v = np.take_along_axis(xf, idx2, 2)                  # (N, C, Ho*Wo)
            s = (v * gf).sum(1).reshape(ix.shape) * ok
            ggx += s * dwx
            ggy += s * dwy
    ginp = gi.reshape(x.shape).astype(x.dtype) if mask[0] else None
    ggrid = np.stack([ggx * sx, ggy * sy], -1).astype(grid.dtype) if mask[1] else None
    return ginp, ggrid


def _grid_coord(c, size, pm, ac):
    """One grid coordinate in pixels (ember ops) and d pixel / d coordinate (0 where border
    padding clips)."""
    pix, scale = _unnormalize(c, size, ac)
    if pm == 1:
        inside = (pix > 0) & (pix < size - 1)
        return pix.clamp(0, size - 1), inside.to(c.dtype) * scale
    return pix, scale


def _grid_backward_vjp(grads, out, g, x, grid, mode, pm, ac, mask):
    """Double backward of grid_sample. ginp = A(grid)^T g gives g grid_sample(gg_inp) and grid
    the grid gradient of that sampling; ggrid (bilinear only: zero for nearest) is
    sum over corners c of s_c * dw_c/d(ix, iy), s_c = <x at c, g>, whose weights' derivatives are
    linear in the other coordinate (d2w/dix diy = e_c = +-1)."""
    gg_inp, gg_grid = grads
    grad_g = grad_x = grad_grid = None
    if gg_inp is not None and mask[0]:
        grad_g = OPS["grid_sampler"](gg_inp, grid, mode, pm, ac)
        grad_grid = grid_sampler_2d_backward(g, gg_inp, grid, mode, pm, ac, [False, True])[1]
    if gg_grid is None or not mask[1] or mode != 0:
        return grad_g, grad_x, grad_grid
    N, C, H, W = x.shape
    P = grid.shape[1] * grid.shape[2]
    ix, sx = _grid_coord(grid[..., 0].reshape(N, P), W, pm, ac)
    iy, sy = _grid_coord(grid[..., 1].reshape(N, P), H, pm, ac)
    tx, ty = gg_grid[..., 0].reshape(N, P) * sx, gg_grid[..., 1].reshape(N, P) * sy
    x0, y0 = ix.floor(), iy.floor()
    x1, y1 = x0 + 1, y0 + 1
    xf, gf = x.reshape(N, C, H * W), g.reshape(N, C, P)
    gx_acc = x.new_zeros((N, C, H * W))
    dg = 0
    big_s = 0
    for cx, cy, dwx, dwy, e in ((x0, y0, iy - y1, ix - x1, 1), (x1, y0, y1 - iy, x0 - ix, -1),
                                (x0, y1, y0 - iy, x1 - ix, -1), (x1, y1, iy - y0, ix - x0, 1)):
        ok = ((cx >= 0) & (cx < W) & (cy >= 0) & (cy < H)).to(x.dtype)
        idx = (cy * W + cx).masked_fill(ok == 0, 0).long().unsqueeze(1).expand(N, C, P)
        v = xf.gather(2, idx)                                         # x at the corner
        k = ((tx * dwx + ty * dwy) * ok).unsqueeze(1)                 # (N, 1, P)
        dg = dg + v * k
        gx_acc = gx_acc.scatter_add(2, idx, gf * k)
        big_s = big_s + (v * gf).sum(1) * ok * e
    grad_g = dg.reshape(g.shape) if grad_g is None else grad_g + dg.reshape(g.shape)
    grad_x = gx_acc.reshape(x.shape)
    s = big_s * sx * sy
    gd = (s.unsqueeze(-1) * gg_grid.reshape(N, P, 2).flip(-1)).reshape(grid.shape)
    grad_grid = gd if grad_grid is None else grad_grid + gd
    return grad_g, grad_x, grad_grid


grid_sampler_2d_backward = defop(
    "grid_sampler_2d_backward(Tensor grad_output, Tensor input, Tensor grid, "
    "int interpolation_mode, int padding_mode, bool align_corners, bool[2] output_mask) -> "
    "(Tensor, Tensor)", function=False, method=False, kernels={"cpu": _grid_backward_kernel},
    meta=lambda g, x, grid, *rest: (TensorMeta(tuple(x.shape), x.dtype),
                                    TensorMeta(tuple(grid.shape), grid.dtype)), supports="fc",
    vjp=_grid_backward_vjp)


def _grid_vjp(g, out, x, grid, mode, pm, ac):
    return grid_sampler_2d_backward(g, x, grid, mode, pm, ac,
                                    [x.requires_grad, grid.requires_grad])


defop("grid_sampler(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, "
      "bool align_corners) -> Tensor", method=False, kernels={"cpu": _grid_kernel},
      meta=lambda x, grid, *rest: TensorMeta(tuple(x.shape[:2]) + tuple(grid.shape[1:3]),
                                             x.dtype),
      vjp=_grid_vjp, supports="fc")


# ---- affine_grid ---------------------------------------------------------------------------------
def _base_coords(n, align_corners):
    if n <= 1:
        return np.zeros(max(n, 1))
    v = np.linspace(-1.0, 1.0, n)
    return v if align_corners else v * (n - 1) / n


def _affine_grid(theta, size, align_corners):
    import ember
    size = list(size)
    if len(size) == 4:
        if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                             f"{ember.Size(size)}. Got {theta.shape}.")
        N, _, H, W = size
        xs, ys = _base_coords(W, align_corners), _base_coords(H, align_corners)
        base = np.stack(np.broadcast_arrays(xs[None, :], ys[:, None], np.ones((1, 1))), -1)
        spatial = (H, W)
    elif len(size) == 5:
        if theta.ndim != 3 or tuple(theta.shape[1:]) != (3, 4):
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size "
                             f"{ember.Size(size)}. Got {theta.shape}.")
        N, _, D, H, W = size
        xs, ys, zs = (_base_coords(W, align_corners), _base_coords(H, align_corners),
                      _base_coords(D, align_corners))
        base = np.stack(np.broadcast_arrays(xs[None, None, :], ys[None, :, None],
                                            zs[:, None, None], np.ones((1, 1, 1))), -1)
        spatial = (D, H, W)
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {ember.Size(size)}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {ember.Size(size)}")
    k = base.shape[-1]
    b = ember.tensor(base.reshape(1, -1, k), dtype=theta.dtype, device=theta.device)
    grid = OPS["matmul"](b, theta.transpose(1, 2))            # (N, prod(spatial), k-1)
    return grid.reshape(N, *spatial, k - 1)


defop("affine_grid_generator(Tensor theta, SymInt[] size, bool align_corners) -> Tensor",
      method=False, decomp=_affine_grid)
