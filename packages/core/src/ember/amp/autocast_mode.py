"""Autocast: PyTorch's per-op cast policy applied at dispatch, above autograd.

Ops in the low-precision list run in the autocast dtype (matmul, conv, linear, ...); ops in
the fp32 list run in float32 (reductions, softmax, losses, norms on CUDA; losses and
numerically sensitive ops on CPU); ops in the promote list run in the widest input dtype.
Only floating tensors other than float64 are cast, as in PyTorch.
"""
from __future__ import annotations

import functools

from .. import _dtype as D
from .._state import state

__all__ = ["autocast", "get_autocast_dtype", "is_autocast_available", "cast_args"]

_LOW = {
    "cpu": {"conv1d", "conv2d", "conv3d", "bmm", "mm", "baddbmm", "addmm", "addbmm", "linear",
            "matmul", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "prelu",
            "scaled_dot_product_attention"},
    "cuda": {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
             "conv_transpose3d", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv",
             "linear", "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot", "prelu",
             "scaled_dot_product_attention"},
}
_FP32 = {
    "cpu": {"avg_pool3d", "binary_cross_entropy", "grid_sample", "prod", "quantile",
            "nanquantile", "cdist", "trace", "cholesky", "inverse", "pinverse", "max_pool3d",
            "adaptive_avg_pool3d", "mse_loss", "cosine_embedding_loss", "nll_loss",
            "hinge_embedding_loss", "poisson_nll_loss", "smooth_l1_loss", "cross_entropy",
            "l1_loss", "huber_loss", "margin_ranking_loss", "soft_margin_loss",
            "triplet_margin_loss", "kl_div", "binary_cross_entropy_with_logits", "inv",
            "det", "solve", "svd", "eigh", "qr", "slogdet"},
    "cuda": {"acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
             "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm",
             "group_norm", "norm", "nll_loss", "cross_entropy", "softmax", "log_softmax",
             "cumsum", "cumprod", "sum", "prod", "dist", "cdist", "logsumexp", "mse_loss",
             "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
             "binary_cross_entropy_with_logits",
             "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss",
             "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
             "triplet_margin_loss", "rms_norm", "vector_norm", "matrix_norm"},
}
_PROMOTE = {"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sample",
            "index_put", "scatter_add", "tensordot", "cat", "stack", "vdot"}
_DEFAULT_DTYPE = {"cpu": D.bfloat16, "cuda": D.float16}


def _eligible(t) -> bool:
    from .._tensor import Tensor
    return isinstance(t, Tensor) and t.dtype.is_floating_point and t.dtype is not D.float64


def _map(args, fn):
    from .._tensor import Tensor
    out = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(fn(a))
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
            out.append(type(a)(fn(x) if isinstance(x, Tensor) else x for x in a))
        else:
            out.append(a)
    return tuple(out)


def _device_type(args):
    from .._tensor import Tensor
    for a in args:
        if isinstance(a, Tensor):
            return a.device.type
        if isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
            return a[0].device.type
    return None


def cast_args(op, args, active: dict):
    """The args of op cast by the autocast policy of their device type (if active there)."""
    name = op.name
    dev = _device_type(args)
    low = active.get(dev)
    if low is None:
        return args
    with _autocast_off():
        if name in _LOW.get(dev, ()):
            return _map(args, lambda t: t.to(low) if _eligible(t) and t.dtype is not low else t)
        if name in _FP32.get(dev, ()):
            return _map(args, lambda t: t.float() if _eligible(t) and t.dtype is not D.float32
                        else t)
        if name in _PROMOTE:
            widest = None
            dts = [t.dtype for t in _flat(args) if t.dtype.is_floating_point]
            for d in dts:
                widest = d if widest is None else D.promote_types(widest, d)
            if widest is not None:
                return _map(args, lambda t: t.to(widest) if t.dtype.is_floating_point else t)
    return args


def _flat(args):
    from .._tensor import Tensor
    for a in args:
        if isinstance(a, Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (x for x in a if isinstance(x, Tensor))


class _autocast_off:
    """The casts themselves must not be autocast again."""

    def __enter__(self):
        self.saved = state.autocast
        state.autocast = {}

    def __exit__(self, *exc):
        state.autocast = self.saved


class autocast:
    """`with ember.autocast("cpu", dtype=ember.bfloat16):` (also a decorator)."""

    def __init__(self, device_type: str = "cuda", dtype=None, enabled: bool = True,
                 cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device_type = device_type
        self.fast_dtype = dtype or _DEFAULT_DTYPE.get(device_type, D.bfloat16)
        if device_type == "cpu" and self.fast_dtype not in (D.bfloat16, D.float16):
            raise RuntimeError("In CPU autocast, but the target dtype is not supported. "
                               "CPU Autocast only supports dtype of torch.bfloat16, "
                               "torch.float16 currently.")
        self.enabled = enabled

    def __enter__(self):
        self.prev = state.autocast
        new = dict(self.prev)
        if self.enabled:
            new[self.device_type] = self.fast_dtype
        else:
            new.pop(self.device_type, None)
        state.autocast = new
        from .. import _dispatch
        _dispatch.special[0] += 1
        return self

    def __exit__(self, *exc):
        state.autocast = self.prev
        from .. import _dispatch
        _dispatch.special[0] -= 1

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            with autocast(self.device_type, self.fast_dtype, self.enabled):
                return fn(*a, **k)
        return wrapper


def get_autocast_dtype(device_type: str):
    return state.autocast.get(device_type, _DEFAULT_DTYPE.get(device_type, D.bfloat16))


def is_autocast_available(device_type: str) -> bool:
    return device_type in ("cpu", "cuda")


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    return device_type in state.autocast
