"""Grad mode state (no_grad, enable_grad, set_grad_enabled, inference_mode).

It lives in core so inference code runs without ember-autograd; the engine reads it.
"""
from __future__ import annotations

import functools

from ._state import state

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled"]


def is_grad_enabled() -> bool:
    return state.grad_enabled


def is_inference_mode_enabled() -> bool:
    return state.inference


class _GradModeContext:
    """A context manager that is also a decorator, like PyTorch's grad-mode classes."""

    def __call__(self, fn):
        if isinstance(fn, type):
            raise TypeError(f"{type(self).__name__} cannot decorate a class")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return type(self)()


class no_grad(_GradModeContext):
    """Disable gradient recording inside the block (or the decorated function)."""

    def __init__(self):
        self.prev = None

    def __enter__(self):
        self.prev = state.grad_enabled
        state.grad_enabled = False

    def __exit__(self, *exc):
        state.grad_enabled = self.prev


class enable_grad(_GradModeContext):
    """Enable gradient recording inside the block."""

    def __init__(self):
        self.prev = None

    def __enter__(self):
        self.prev = state.grad_enabled
        state.grad_enabled = True

    def __exit__(self, *exc):
        state.grad_enabled = self.prev


class set_grad_enabled(_GradModeContext):
    """Set grad mode on or off; works as a function call, a context manager or a decorator."""

    def __init__(self, mode: bool):
        self.prev = state.grad_enabled
        self.mode = bool(mode)
        state.grad_enabled = self.mode

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        state.grad_enabled = self.prev

    def clone(self):
        return set_grad_enabled(self.mode)


class inference_mode(_GradModeContext):
    """Like no_grad; ember has no separate inference tensors, so it only disables recording."""

    def __init__(self, mode: bool = True):
        self.mode = mode
        self.prev = None

    def __enter__(self):
        self.prev = (state.grad_enabled, state.inference)
        if self.mode:
            state.grad_enabled, state.inference = False, True

    def __exit__(self, *exc):
        state.grad_enabled, state.inference = self.prev

    def clone(self):
        return inference_mode(self.mode)
