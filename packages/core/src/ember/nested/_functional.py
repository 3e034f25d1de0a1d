"""`ember.nn.functional` on nested tensors: the functions jagged programs call (linear,
activations, softmax, layer_norm, dropout, scaled_dot_product_attention) run per component
when given a NestedTensor. Installed when ember.nested is first imported (no nested tensor can
exist before), as a wrapper that costs dense calls one type check."""
from __future__ import annotations

import functools

import ember

# F functions whose first argument may be nested; "dim" ones take a dim of the nested tensor
_PER_COMPONENT = ("linear", "relu", "gelu", "silu", "sigmoid", "tanh", "elu", "leaky_relu",
                  "layer_norm", "dropout", "rms_norm")
_WITH_DIM = ("softmax", "log_softmax")


def _component_dim(nt, dim: int) -> int:
    d = dim % nt.dim()
    if d == 0:
        raise RuntimeError("softmax(): not supported along the batch dim of a nested tensor")
    return dim if dim < 0 else dim - 1


def _wrap(orig, with_dim: bool):
    from . import NestedTensor

    @functools.wraps(orig)
    def fn(input, *args, **kwargs):  # noqa: A002
        if not isinstance(input, NestedTensor):
            return orig(input, *args, **kwargs)
        if with_dim:
            dim = kwargs.pop("dim", args[0] if args else None)
            args = args[1:]
            d = _component_dim(input, dim)
            return input._map(lambda t: orig(t, d, *args, **kwargs))
        return input._map(lambda t: orig(t, *args, **kwargs))
    return _own(fn)


def _sdpa(orig):
    from . import NestedTensor

    @functools.wraps(orig)
    def fn(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
           enable_gqa=False):
        if not isinstance(query, NestedTensor):
            return orig(query, key, value, attn_mask, dropout_p, is_causal, scale=scale,
                        enable_gqa=enable_gqa)
        if attn_mask is not None:
            raise RuntimeError("scaled_dot_product_attention(): nested inputs take no "
                               "attn_mask (the jagged lengths are the mask)")
        if not (isinstance(key, NestedTensor) and isinstance(value, NestedTensor)):
            raise RuntimeError("scaled_dot_product_attention(): query, key and value must all "
                               "be nested tensors")
        # (B, H, j, D): each component (H, j_i, D) attends within its own length
        outs = [orig(q, k, v, None, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
                for q, k, v in zip(query._ts, key._ts, value._ts)]
        return NestedTensor(outs, query.layout)
    return _own(fn)


def _own(fn):
    """The wrapper is F.<name> now: pickled by that name (not as the op it wraps)."""
    fn.__module__ = "ember.nn.functional"
    fn.__qualname__ = fn.__name__
    fn._nested_wrapped = True
    return fn


def install() -> None:
    F = ember.nn.functional
    for name in _PER_COMPONENT + _WITH_DIM:
        orig = getattr(F, name, None)
        if orig is not None and not getattr(orig, "_nested_wrapped", False):
            setattr(F, name, _wrap(orig, name in _WITH_DIM))
    sdpa = F.scaled_dot_product_attention
    if not getattr(sdpa, "_nested_wrapped", False):
        F.scaled_dot_product_attention = _sdpa(sdpa)
