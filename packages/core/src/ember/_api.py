"""Composite public functions that are argument parsing over table ops."""
from __future__ import annotations

__all__ = ["is_tensor", "numel", "compile", "isclose", "allclose", "equal"]


def is_tensor(obj) -> bool:
    from ._tensor import Tensor
    return isinstance(obj, Tensor)


def numel(input) -> int:  # noqa: A002
    return input.numel()


def compile(model=None, **kwargs):  # noqa: A001
    """`ember.compile(fn_or_module, backend=..., mode=...)`: needs ember-compiler."""
    from ._components import require
    return require("compiler", "ember.compile")["compile"](model, **kwargs)


def isclose(input, other, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
            equal_nan: bool = False):
    """Elementwise `|input - other| <= atol + rtol * |other|` (equal values, infinities
    included, are close; NaNs only with equal_nan), as PyTorch: both tensors of one dtype,
    broadcast, a bool tensor."""
    import ember

    from ._dispatch import torch_name
    if not isinstance(other, ember.Tensor):
        other = ember.tensor(other, dtype=input.dtype, device=input.device)
    if input.dtype != other.dtype:
        raise RuntimeError(f"{torch_name(input.dtype)} did not match {torch_name(other.dtype)}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    close = input == other
    if equal_nan and (input.dtype.is_floating_point or input.dtype.is_complex):
        close = close | (input.isnan() & other.isnan())
    if input.dtype == ember.bool or (rtol == 0 and atol == 0):
        return close
    a, b = input, other
    if not (a.dtype.is_floating_point or a.dtype.is_complex):   # integers: default dtype
        a, b = a.to(ember.get_default_dtype()), b.to(ember.get_default_dtype())
    diff = (a - b).abs()
    bound = atol + rtol * b.abs()
    finite = diff.isfinite()
    return close | (finite & (diff <= bound))


def allclose(input, other, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
             equal_nan: bool = False) -> bool:
    """Whether every element of `isclose(input, other, ...)` is True (a Python bool)."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def equal(input, other) -> bool:  # noqa: A002
    """True when both tensors have the same size and elements (values compared after type
    promotion, as PyTorch 2.13)."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool((input == other).all().item())
