"""`ember.cuda.amp`: PyTorch's deprecated CUDA-only spellings of autocast and GradScaler, still
called by many programs. Each warns (FutureWarning, as torch) and forwards to `ember.amp`; without
a usable GPU they disable themselves with torch's UserWarning, so the program runs on the CPU.

Lives in core so the aliases exist whether or not ember-devices is installed; ember.cuda (or
core's stand-in for it) exposes this module as its `amp` attribute.
"""
from __future__ import annotations

import functools
import warnings

from .autocast_mode import autocast as _autocast
from .grad_scaler import GradScaler as _GradScaler

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


def _cuda_available() -> bool:
    import ember
    return bool(ember.cuda.is_available())


class autocast(_autocast):
    """Deprecated: `ember.cuda.amp.autocast(...)` is `ember.amp.autocast("cuda", ...)`."""

    def __init__(self, enabled: bool = True, dtype=None, cache_enabled: bool = True):
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        if enabled and not _cuda_available():
            warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.",
                          stacklevel=2)
            enabled = False
        import ember
        super().__init__("cuda", dtype=dtype or ember.float16, enabled=enabled,
                         cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """Deprecated: `ember.cuda.amp.GradScaler(...)` is `ember.amp.GradScaler("cuda", ...)`."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True):
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        if enabled and not _cuda_available():
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.", stacklevel=2)
            enabled = False
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """Decorator for an autograd.Function's forward: with cast_inputs, floating tensors are
    cast to it and the body runs with autocast off (while CUDA autocast is on); without it,
    the body runs under the autocast state of the caller (as torch.cuda.amp.custom_fwd)."""
    warnings.warn("`torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
                  "`torch.amp.custom_fwd(args..., device_type='cuda')` instead.", FutureWarning,
                  stacklevel=2)
    if fwd is None:
        return functools.partial(_custom_fwd, cast_inputs=cast_inputs)
    return _custom_fwd(fwd, cast_inputs=cast_inputs)


def _custom_fwd(fwd, cast_inputs=None):
    from .._state import state

    @functools.wraps(fwd)
    def wrapper(*args, **kwargs):
        if cast_inputs is None or "cuda" not in state.autocast:
            return fwd(*args, **kwargs)
        import ember

        def cast(x):
            if isinstance(x, ember.Tensor) and x.is_floating_point():
                return x.to(cast_inputs)
            return x
        with _autocast("cuda", enabled=False):
            return fwd(*[cast(a) for a in args], **{k: cast(v) for k, v in kwargs.items()})
    return wrapper


def custom_bwd(bwd):
    """Decorator for an autograd.Function's backward (runs it as written: ember's backward
    already sees the forward's dtypes)."""
    warnings.warn("`torch.cuda.amp.custom_bwd(args...)` is deprecated. Please use "
                  "`torch.amp.custom_bwd(args..., device_type='cuda')` instead.", FutureWarning,
                  stacklevel=2)
    return bwd
