"""`ember.nn.functional`: the nn ops of the op table (bound with `functional=`), plus wrappers
with PyTorch's F signatures where they differ from one op (inplace=, training=, return_indices=,
argument order, legacy size_average/reduce).

>>> import ember
>>> import ember.nn.functional as F
>>> F.relu(ember.tensor([-1.0, 2.0])).tolist()
[0.0, 2.0]
"""
from __future__ import annotations

import warnings

from .._ops import NN_FUNCTIONAL as _NN
from .._ops import OPS as _OPS

globals().update(_NN)


def _ember():
    import ember
    return ember


def _op(name):
    return _OPS[name]


# ---- activations (pointwise ops from _ops/pointwise.py, with F's inplace= flag) ------------------
def _activation(name, params=(), inplace_arg=True):
    """F.<name>(input, *params, inplace=False) over ember.<name> / Tensor.<name>_."""
    def fn(input, *args, **kwargs):  # noqa: A002
        vals = list(args)
        for pname, default in params[len(args):]:
            vals.append(kwargs.pop(pname, default))
        inplace = kwargs.pop("inplace", False) if inplace_arg else False
        if len(vals) > len(params) and inplace_arg:
            inplace = vals.pop()
        if kwargs:
            raise TypeError(f"{name}() got an unexpected keyword argument '{next(iter(kwargs))}'")
        if inplace:
            return getattr(input, name + "_")(*vals)
        return getattr(_ember(), name)(input, *vals)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"F.{name}(input{''.join(', ' + p for p, _ in params)}" \
                 f"{', inplace=False' if inplace_arg else ''})"
    return fn


_ACTIVATIONS = {
    "relu": (), "relu6": (), "selu": (), "silu": (), "mish": (), "hardswish": (),
    "hardsigmoid": (), "elu": (("alpha", 1.0),), "celu": (("alpha", 1.0),),
    "leaky_relu": (("negative_slope", 0.01),),
    "hardtanh": (("min_val", -1.0), ("max_val", 1.0)),
    "threshold": (("threshold", None), ("value", None)),
}
_NO_INPLACE = {"softshrink": (("lambd", 0.5),), "hardshrink": (("lambd", 0.5),),
               "softplus": (("beta", 1.0), ("threshold", 20.0))}
# the pointwise family binds most of these with F's signature already; fill in the rest
for _name, _params in _ACTIVATIONS.items():
    if _name not in _NN:
        globals()[_name] = _activation(_name, _params)
for _name, _params in _NO_INPLACE.items():
    if _name not in _NN:
        globals()[_name] = _activation(_name, _params, inplace_arg=False)


def relu_(input):  # noqa: A002
    return input.relu_()


def gelu(input, approximate="none"):  # noqa: A002
    return _ember().gelu(input, approximate=approximate)


def sigmoid(input):  # noqa: A002
    return input.sigmoid()


def tanh(input):  # noqa: A002
    return input.tanh()


def logsigmoid(input):  # noqa: A002
    return _ember().nn.functional.softplus(-input).neg() if "log_sigmoid" not in _OPS \
        else _op("log_sigmoid")(input)


def softsign(input):  # noqa: A002
    return input / (input.abs() + 1)


def tanhshrink(input):  # noqa: A002
    return input - input.tanh()


def prelu(input, weight):  # noqa: A002
    if "prelu" in _OPS:
        return _op("prelu")(input, weight)
    w = weight.reshape(-1, *([1] * (input.ndim - 2))) if input.ndim >= 2 and weight.numel() > 1 \
        else weight
    return _ember().where(input >= 0, input, input * w)


def _softmax_dim(ndim):
    warnings.warn("Implicit dimension choice for softmax has been deprecated. Change the call to "
                  "include dim=X as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    dim = _softmax_dim(input.ndim) if dim is None else dim
    return _op("softmax")(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    dim = _softmax_dim(input.ndim) if dim is None else dim
    return _op("log_softmax")(input, dim, dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    dim = _softmax_dim(input.ndim) if dim is None else dim
    return _op("softmax")(-input, dim, dtype)


# ---- dropout -------------------------------------------------------------------------------------
def _inplace_result(input, result, inplace):
    if inplace:
        return input.copy_(result) if result is not input else input
    return result


def dropout(input, p=0.5, training=True, inplace=False):  # noqa: A002
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return _inplace_result(input, _op("dropout")(input, p, training), inplace)


def alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return _inplace_result(input, _op("alpha_dropout")(input, p, training), inplace)


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _deprecated_dims(name, ndim, n):
    warnings.warn(f"{name}: Received a {ndim}-D input to {name}, which is deprecated and will "
                  f"result in an error in a future release. To retain the behavior and silence "
                  f"this warning, please use dropout instead. Note that {name} exists to provide "
                  f"channel-wise dropout on inputs with {n} spatial dimensions, a channel "
                  f"dimension, and an optional batch dimension (i.e. {n + 1}D or {n + 2}D "
                  f"inputs).", UserWarning, stacklevel=3)


def _feature_unbatched(input, p, training, inplace, unbatched):  # noqa: A002
    x = input.unsqueeze(0) if unbatched else input
    y = _op("feature_dropout")(x, p, training)
    if unbatched and y is not x:
        y = y.select(0, 0)
    elif unbatched:
        y = input
    return _inplace_result(input, y, inplace)


def dropout1d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D "
                           f"input. Note that dropout1d exists to provide channel-wise dropout "
                           f"on inputs with 1 spatial dimension, a channel dimension, and an "
                           f"optional batch dimension (i.e. 2D or 3D inputs).")
    return _feature_unbatched(input, p, training, inplace, input.ndim == 2)


def dropout2d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    _check_p(p)
    if input.ndim not in (3, 4):
        _deprecated_dims("dropout2d", input.ndim, 2)
    if input.ndim == 3:   # PyTorch: a 3D input is taken as batched (N, C, L), with a warning
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
                      "1D dropout behavior is desired - input is interpreted as shape (N, C, L), "
                      "where C is the channel dim. This behavior will change in a future release "
                      "to interpret the input as one without a batch dimension, i.e. shape (C, H, "
                      "W). To maintain the 1D channel-wise dropout behavior, please switch to "
                      "using dropout1d instead.", UserWarning, stacklevel=2)
    return _inplace_result(input, _op("feature_dropout")(input, p, training), inplace)


def dropout3d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    _check_p(p)
    if input.ndim not in (4, 5):
        _deprecated_dims("dropout3d", input.ndim, 3)
    return _feature_unbatched(input, p, training, inplace, input.ndim != 5)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return _inplace_result(input, _op("feature_alpha_dropout")(input, p, training), inplace)


# ---- embedding -----------------------------------------------------------------------------------
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,  # noqa: A002
              scale_grad_by_freq=False, sparse=False):
    if padding_idx is not None:
        n = weight.shape[0]
        if padding_idx > 0:
            if padding_idx >= n:
                raise AssertionError("Padding_idx must be within num_embeddings")
        elif padding_idx < 0:
            if padding_idx < -n:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = n + padding_idx
    else:
        padding_idx = -1
    if max_norm is not None:
        with _ember().no_grad():
            _op("embedding_renorm_")(weight, input.contiguous(), max_norm, norm_type)
    return _op("embedding")(weight, input, padding_idx, scale_grad_by_freq, sparse)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,  # noqa: A002
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    from .._ops.nn import embedding_bag as _bag
    return _bag(input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode,
                per_sample_weights, include_last_offset, padding_idx)


# ---- normalization -------------------------------------------------------------------------------
def batch_norm(input, running_mean, running_var, weight=None, bias=None,  # noqa: A002
               training=False, momentum=0.1, eps=1e-05):
    return _op("batch_norm")(input, weight, bias, running_mean, running_var, training,
                             momentum, eps, False)


def instance_norm(input, running_mean=None, running_var=None, weight=None,  # noqa: A002
                  bias=None, use_input_stats=True, momentum=0.1, eps=1e-05):
    return _op("instance_norm")(input, weight, bias, running_mean, running_var,
                                use_input_stats, momentum, eps, False)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):  # noqa: A002
    return _op("layer_norm")(input, normalized_shape, weight, bias, eps, False)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):  # noqa: A002
    return _op("group_norm")(input, num_groups, weight, bias, eps, False)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):  # noqa: A002
    r = _op("_nn_normalize")(input, p, dim, eps)
    return r if out is None else out.copy_(r)


# ---- pooling -------------------------------------------------------------------------------------
def _max_pool(n):
    def fn(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
           return_indices=False):
        out, idx = _op(f"max_pool{n}d_with_indices")(
            input, kernel_size, [] if stride is None else stride, padding, dilation, ceil_mode)
        return (out, idx) if return_indices else out
    fn.__name__ = fn.__qualname__ = f"max_pool{n}d"
    return fn


max_pool1d, max_pool2d, max_pool3d = _max_pool(1), _max_pool(2), _max_pool(3)
max_pool1d_with_indices = _OPS["max_pool1d_with_indices"]
max_pool2d_with_indices = _OPS["max_pool2d_with_indices"]


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True):
    return _op("avg_pool1d")(input, kernel_size, [] if stride is None else stride, padding,
                             ceil_mode, count_include_pad)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True, divisor_override=None):
    return _op("avg_pool2d")(input, kernel_size, [] if stride is None else stride, padding,
                             ceil_mode, count_include_pad, divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True, divisor_override=None):
    return _op("avg_pool3d")(input, kernel_size, [] if stride is None else stride, padding,
                             ceil_mode, count_include_pad, divisor_override)


def adaptive_avg_pool1d(input, output_size):  # noqa: A002
    return _op("adaptive_avg_pool1d")(input, output_size)


def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    return _op("adaptive_avg_pool2d")(input, output_size)


def adaptive_avg_pool3d(input, output_size):  # noqa: A002
    return _op("adaptive_avg_pool3d")(input, output_size)


def _adaptive_max(n):
    def fn(input, output_size, return_indices=False):  # noqa: A002
        out, idx = _op(f"adaptive_max_pool{n}d")(input, output_size)
        return (out, idx) if return_indices else out
    fn.__name__ = fn.__qualname__ = f"adaptive_max_pool{n}d"
    return fn


adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d = (
    _adaptive_max(1), _adaptive_max(2), _adaptive_max(3))

max_pool3d_with_indices = _OPS["max_pool3d_with_indices"]


def _adaptive_max_with_indices(n):
    def fn(input, output_size, return_indices=False):  # noqa: A002
        return _op(f"adaptive_max_pool{n}d")(input, output_size)
    fn.__name__ = fn.__qualname__ = f"adaptive_max_pool{n}d_with_indices"
    return fn


adaptive_max_pool1d_with_indices = _adaptive_max_with_indices(1)
adaptive_max_pool2d_with_indices = _adaptive_max_with_indices(2)
adaptive_max_pool3d_with_indices = _adaptive_max_with_indices(3)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):  # noqa: A002
    return _inplace_result(input, _op("rrelu")(input, lower, upper, training), inplace)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):  # noqa: A002
    return rrelu(input, lower, upper, training, True)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """Samples from Gumbel-Softmax; hard=True returns one-hot samples with soft gradients."""
    e = _ember()
    u = e.rand(tuple(logits.shape), dtype=logits.dtype, device=logits.device)
    gumbels = -(-(u.clamp_min(1e-20)).log()).log()          # -log(Exp(1)) noise
    y = _op("softmax")((logits + gumbels) / tau, dim)
    if not hard:
        return y
    index = y.argmax(dim, keepdim=True)
    y_hard = e.zeros_like(logits).scatter(dim, index, 1.0)
    return y_hard - y.detach() + y


from ._functional_loss import *  # noqa: E402,F401,F403 - losses and resampling wrappers
from ._functional_mha import *  # noqa: E402,F401,F403 - multi_head_attention_forward

# where the pointwise family binds an activation itself (with F's signature), its binding wins
for _name in ("relu_", "gelu", "sigmoid", "tanh", "logsigmoid", "softsign", "tanhshrink",
              "prelu"):
    if _name in _NN:
        globals()[_name] = _NN[_name]

__all__ = sorted(k for k in globals() if not k.startswith("_") and k not in (
    "annotations", "warnings"))

from .._pickle_names import fix_names as _fix_names  # noqa: E402

_fix_names(__name__)  # F.relu pickles as ember.nn.functional.relu
