"""Composite public functions that are argument parsing over table ops."""
from __future__ import annotations

__all__ = ["is_tensor", "numel", "compile"]


def is_tensor(obj) -> bool:
    from ._tensor import Tensor
    return isinstance(obj, Tensor)


def numel(input) -> int:  # noqa: A002
    return input.numel()


def compile(model=None, **kwargs):  # noqa: A001
    """`ember.compile(fn_or_module, backend=..., mode=...)`: needs ember-compiler."""
    from ._components import require
    return require("compiler", "ember.compile")["compile"](model, **kwargs)
