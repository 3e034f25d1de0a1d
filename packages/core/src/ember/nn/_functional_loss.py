"""F.* loss wrappers (reduction strings, legacy size_average/reduce) and resampling wrappers
(interpolate, upsample, grid_sample, affine_grid) over the ops in _ops/loss.py and
_ops/sample.py. Re-exported by ember.nn.functional.
"""
from __future__ import annotations

import warnings

from .._ops import OPS as _OPS

__all__ = [
    "nll_loss", "cross_entropy", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
    "cosine_embedding_loss", "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
    "multilabel_soft_margin_loss", "poisson_nll_loss", "gaussian_nll_loss", "triplet_margin_loss",
    "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "grid_sample",
    "affine_grid",
]

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def _reduction(size_average, reduce, reduction):
    """PyTorch's _Reduction: legacy flags win (with a warning), else the string, as an int."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "mean" if size_average and reduce else ("sum" if reduce else "none")
        warnings.warn(f"size_average and reduce args will be deprecated, please use "
                      f"reduction='{reduction}' instead.", UserWarning, stacklevel=3)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _REDUCTIONS[reduction]


def _size_warning(input, target, name):  # noqa: A002
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                      f"({input.shape}). This will likely lead to incorrect results due to "
                      f"broadcasting. Please ensure they have the same size.", UserWarning,
                      stacklevel=3)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
             reduce=None, reduction="mean"):
    r = _reduction(size_average, reduce, reduction)
    return _OPS["nll_loss_nd"](input, target, weight, r, ignore_index)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
                  reduce=None, reduction="mean", label_smoothing=0.0):
    r = _reduction(size_average, reduce, reduction)
    return _OPS["cross_entropy_loss"](input, target, weight, r, ignore_index, label_smoothing)


def _pointwise_loss(name, extra=()):
    def fn(input, target, *args, **kwargs):  # noqa: A002
        vals = list(args)
        names = ("size_average", "reduce", "reduction") + tuple(n for n, _ in extra)
        defaults = (None, None, "mean") + tuple(d for _, d in extra)
        for n_, d in list(zip(names, defaults))[len(vals):]:
            vals.append(kwargs.pop(n_, d))
        if kwargs:
            raise TypeError(f"{name}() got an unexpected keyword argument '{next(iter(kwargs))}'")
        _size_warning(input, target, name)
        r = _reduction(*vals[:3])
        return _OPS[name](input, target, r, *vals[3:])
    fn.__name__ = fn.__qualname__ = name
    return fn


mse_loss = _pointwise_loss("mse_loss")
l1_loss = _pointwise_loss("l1_loss")
smooth_l1_loss = _pointwise_loss("smooth_l1_loss", (("beta", 1.0),))
soft_margin_loss = _pointwise_loss("soft_margin_loss")


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):  # noqa: A002
    _size_warning(input, target, "huber_loss")
    if weight is None:
        return _OPS["huber_loss"](input, target, _reduction(None, None, reduction), delta)
    loss = _OPS["huber_loss"](input, target, 0, delta) * weight
    return _apply(loss, reduction)


def _apply(loss, reduction):
    r = _reduction(None, None, reduction)
    return loss if r == 0 else (loss.sum() if r == 2 else loss.mean())


def binary_cross_entropy(input, target, weight=None, size_average=None,  # noqa: A002
                         reduce=None, reduction="mean"):
    r = _reduction(size_average, reduce, reduction)
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        import ember
        weight = weight.expand(*ember.broadcast_shapes(weight.shape, input.shape)) \
            if hasattr(ember, "broadcast_shapes") else weight
    return _OPS["binary_cross_entropy"](input, target, weight, r)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,  # noqa: A002
                                     reduce=None, reduction="mean", pos_weight=None):
    r = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size "
                         f"({input.shape})")
    return _OPS["binary_cross_entropy_with_logits"](input, target, weight, pos_weight, r)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean",  # noqa: A002
           log_target=False):
    if reduction == "batchmean":
        loss = _OPS["kl_div"](input, target, 2, log_target=log_target)
        return loss / input.shape[0] if input.ndim else loss
    if reduction == "mean" and size_average is None and reduce is None:
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", UserWarning, stacklevel=2)
    r = _reduction(size_average, reduce, reduction)
    return _OPS["kl_div"](input, target, r, log_target=log_target)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    return _OPS["cosine_embedding_loss"](input1, input2, target, margin,
                                         _reduction(size_average, reduce, reduction))


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension "
                           f"but got sizes: input1: {input1.shape}, input2: {input2.shape}, "
                           f"target: {target.shape} ")
    return _OPS["margin_ranking_loss"](input1, input2, target, margin,
                                       _reduction(size_average, reduce, reduction))


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,  # noqa: A002
                         reduction="mean"):
    return _OPS["hinge_embedding_loss"](input, target, margin,
                                        _reduction(size_average, reduce, reduction))


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None,  # noqa: A002
                                reduce=None, reduction="mean"):
    return _OPS["multilabel_soft_margin_loss"](input, target, weight,
                                               _reduction(size_average, reduce, reduction))


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None,  # noqa: A002
                     eps=1e-08, reduce=None, reduction="mean"):
    return _OPS["poisson_nll_loss"](input, target, log_input, full, eps,
                                    _reduction(size_average, reduce, reduction))


def gaussian_nll_loss(input, target, var, full=False, eps=1e-06, reduction="mean"):  # noqa: A002
    if isinstance(var, float):
        import ember
        var = ember.full_like(input, var)
    return _OPS["gaussian_nll_loss"](input, target, var, full, eps,
                                     _reduction(None, None, reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    return _OPS["triplet_margin_loss"](anchor, positive, negative, margin, p, eps, swap,
                                       _reduction(size_average, reduce, reduction))


# ---- resampling ----------------------------------------------------------------------------------
def interpolate(input, size=None, scale_factor=None, mode="nearest",  # noqa: A002
                align_corners=None, recompute_scale_factor=None, antialias=False):
    from .._ops.sample import interpolate as _interp
    return _interp(input, size, scale_factor, mode, align_corners, recompute_scale_factor,
                   antialias)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):  # noqa
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):  # noqa: A002
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):  # noqa: A002
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros",  # noqa: A002
                align_corners=None):
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    return _OPS["grid_sampler"](input, grid, ("bilinear", "nearest", "bicubic").index(mode),
                                ("zeros", "border", "reflection").index(padding_mode),
                                bool(align_corners))


def affine_grid(theta, size, align_corners=None):
    return _OPS["affine_grid_generator"](theta, list(size), bool(align_corners))


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,  # noqa
                      reduce=None, reduction="mean"):
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    return _OPS["multi_margin_loss"](input, target, p, margin, weight,
                                     _reduction(size_average, reduce, reduction))


def multilabel_margin_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                           reduction="mean"):
    return _OPS["multilabel_margin_loss"](input, target,
                                          _reduction(size_average, reduce, reduction))


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, "
                         f"got {margin} instead")
    dist = distance_function if distance_function is not None else _OPS["pairwise_distance"]
    d_ap, d_an = dist(anchor, positive), dist(anchor, negative)
    if swap:
        import ember
        d_an = ember.minimum(d_an, dist(positive, negative))
    return _apply((d_ap - d_an + margin).relu(), reduction)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    from .._ops.nn_extra import ctc_loss as _ctc
    _reduction(None, None, reduction)
    return _ctc(log_probs, targets, input_lengths, target_lengths, blank, reduction,
                zero_infinity)


__all__ += ["multi_margin_loss", "multilabel_margin_loss", "triplet_margin_with_distance_loss",
            "ctc_loss"]
