"""GPU kernels for resampling: upsample (nearest, linear, cubic; forward and backward) as
separable passes, and the 2-D grid_sampler."""
from __future__ import annotations

import math

from .base import _FLOAT, _acc_dt, _acc_tl, _cont, _launch, _lazy, cuda_kernel

# ---- resampling ---------------------------------------------------------------------------------
_MODES = {"nearest": 0, "nearest-exact": 1, "linear": 2, "cubic": 3}


def _scale(size_in, size_out, mode, align_corners, scale):
    import numpy as np

    from ember._ops.registry import src_scale
    if mode <= 1:
        return float(np.float32(src_scale(size_in, size_out, False, scale))), 0.0
    s = src_scale(size_in, size_out, align_corners, scale)
    hi = float(np.float32(s))
    return hi, float(np.float32(s - hi))


def _dims_plan(shape, n, sizes_to):
    """Per spatial dim i: (A, In, Out, B) of the pass that resizes dim i to sizes_to[i]."""
    cur = list(shape)
    lead = len(shape) - n
    plan = []
    for i in range(n):
        ax = lead + i
        A = math.prod(cur[:ax])
        B = math.prod(cur[ax + 1:])
        plan.append((A, cur[ax], sizes_to[i], B))
        cur[ax] = sizes_to[i]
    return plan


@cuda_kernel("_upsample")
def _upsample(be, op, x, output_size, mode, align_corners, scales):
    from ember._ops.registry import upsample_checks
    upsample_checks(x, output_size)
    n = len(output_size)
    if x.dtype not in _FLOAT or mode not in _MODES or not 1 <= n <= x.ndim:
        return NotImplemented
    if scales is not None and len(scales) != n:
        return NotImplemented
    m = _MODES[mode]
    shape = tuple(x.shape[:x.ndim - n]) + tuple(output_size)
    cur = _cont(be, x.detach())
    if math.prod(shape) == 0 or cur.numel() == 0:
        return NotImplemented if math.prod(shape) else be._new(shape, x.dtype, x.device)
    acc = _acc_dt(x.dtype)
    K = _lazy("sample_tl")
    for i, (A, In, Out, B) in enumerate(_dims_plan(tuple(x.shape), n, tuple(output_size))):
        sc = scales[i] if scales else None
        hi, lo = _scale(In, Out, m, align_corners, sc)
        last = i == n - 1
        nshape = tuple(cur.shape[:x.ndim - n + i]) + (Out,) + tuple(cur.shape[x.ndim - n + i + 1:])
        out = be._new(nshape, x.dtype if last else acc, x.device)
        total = A * Out * B
        _launch(be, K.resample_fwd, (-(-total // 256),), [cur, out, In, Out, B, total, hi, lo],
                (), {"MODE": m, "ALIGN": bool(align_corners), "ACC": _acc_tl(x.dtype),
                 "BLOCK": 256})
        cur = out
    return cur


@cuda_kernel("_upsample_backward")
def _upsample_backward(be, op, g, input_size, mode, align_corners, scales):
    n = len(input_size)
    if g.dtype not in _FLOAT or mode not in _MODES or not 1 <= n <= g.ndim:
        return NotImplemented
    if scales is not None and len(scales) != n:
        return NotImplemented
    m = _MODES[mode]
    shape = tuple(g.shape[:g.ndim - n]) + tuple(input_size)
    if math.prod(shape) == 0 or g.numel() == 0:
        return NotImplemented if math.prod(shape) else be._new(shape, g.dtype, g.device)
    acc = _acc_dt(g.dtype)
    K = _lazy("sample_tl")
    cur = _cont(be, g.detach())
    # the forward resized dims 0..n-1 in order: the transpose undoes them last to first
    plan = _dims_plan(shape, n, tuple(g.shape[g.ndim - n:]))
    for i in reversed(range(n)):
        A, In, Out, B = plan[i]
        sc = scales[i] if scales else None
        hi, lo = _scale(In, Out, m, align_corners, sc)
        lead = g.ndim - n
        nshape = tuple(cur.shape[:lead + i]) + (In,) + tuple(cur.shape[lead + i + 1:])
        out = be._new(nshape, acc, g.device)
        be.fill_(out, 0)
        total = A * Out * B
        _launch(be, K.resample_bwd, (-(-total // 256),), [cur, out, In, Out, B, total, hi, lo],
                (), {"MODE": m, "ALIGN": bool(align_corners), "ACC": _acc_tl(g.dtype),
                 "BLOCK": 256})
        cur = out
    return cur if cur.dtype is g.dtype else be._copy_new(cur, g.dtype)


# ---- grid_sampler (2-D) -------------------------------------------------------------------------
def _grid_check(x, grid, mode, pm):
    """core's grid_sampler checks (sample._grid_setup / _grid_kernel), in its order."""
    if mode == 2:
        raise NotImplementedError("grid_sample(mode='bicubic') is not supported by ember yet")
    from ember._ops.registry import grid_checks
    grid_checks(x, grid, pm)


def _grid_args(be, x, grid, mode, pm, ac):
    x, grid = _cont(be, x.detach()), _cont(be, grid.detach())
    N, C, H, W = x.shape
    P = grid.shape[1] * grid.shape[2]
    consts = {"NEAREST": mode == 1, "ALIGN": bool(ac), "BORDER": pm == 1,
              "ACC": _acc_tl(x.dtype), "BLOCK": 128}
    return x, grid, N, C, H, W, P, consts


@cuda_kernel("grid_sampler")
def _grid_sampler(be, op, x, grid, mode, pm, ac):
    if x.dtype not in _FLOAT or grid.dtype not in _FLOAT or mode not in (0, 1, 2) or \
            pm not in (0, 1, 2):
        return NotImplemented
    _grid_check(x, grid, mode, pm)
    x, grid, N, C, H, W, P, consts = _grid_args(be, x, grid, mode, pm, ac)
    y = be._new((N, C) + tuple(grid.shape[1:3]), x.dtype, x.device)
    if y.numel():
        if H * W == 0:
            return be.fill_(y, 0)
        _launch(be, _lazy("sample_tl").grid_fwd, (-(-(N * P) // 128),),
                [x, grid, y, C, H, W, P, N * P], (), consts)
    return y


@cuda_kernel("grid_sampler_2d_backward")
def _grid_sampler_backward(be, op, g, x, grid, mode, pm, ac, mask):
    if (x.dtype not in _FLOAT or grid.dtype not in _FLOAT or g.dtype not in _FLOAT
            or mode not in (0, 1) or pm not in (0, 1, 2)):
        return NotImplemented
    _grid_check(x, grid, 0, pm)
    if tuple(g.shape) != tuple(x.shape[:2]) + tuple(grid.shape[1:3]):
        return NotImplemented  # the CPU kernel raises numpy's error
    x, grid, N, C, H, W, P, consts = _grid_args(be, x, grid, mode, pm, ac)
    g = _cont(be, g.detach())
    need_gi, need_gg = bool(mask[0]), bool(mask[1])
    gi = gg = None
    if need_gi:
        gi = be._new(tuple(x.shape), _acc_dt(x.dtype), x.device)
        be.fill_(gi, 0)
    if need_gg:
        gg = be._new(tuple(grid.shape), grid.dtype, x.device)
        if N * P and (C == 0 or H * W == 0):
            be.fill_(gg, 0)
    if N * P and C and H * W and (need_gi or need_gg):
        _launch(be, _lazy("sample_tl").grid_bwd, (-(-(N * P) // 128),),
                [g, x, grid, gi if need_gi else x, gg if need_gg else x, C, H, W, P, N * P],
                (), dict(consts, NEED_GI=need_gi, NEED_GG=need_gg))
    if gi is not None and gi.dtype is not x.dtype:
        gi = be._copy_new(gi, x.dtype)
    return gi, gg
