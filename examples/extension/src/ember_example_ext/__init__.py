"""ember-example-ext: a C++ op (CPU kernel, fake kernel, derivative) built against ember's stable
ABI only; importing this package registers `ember.ops.ember_example.scaled_square`.

>>> import ember, ember_example_ext
>>> ember_example_ext.scaled_square(ember.tensor([1.0, 2.0]), 3.0).tolist()
[3.0, 12.0]
"""
from __future__ import annotations

import ember

from . import _C  # noqa: F401 - registers the ops (fails to import on a too-old ember-core)

__all__ = ["scaled_square", "TARGET_VERSION"]

TARGET_VERSION = tuple(_C.TARGET_VERSION)


def scaled_square(x: ember.Tensor, k: float = 1.0) -> ember.Tensor:
    """k * x * x, computed by the C++ kernel (differentiable)."""
    return ember.ops.ember_example.scaled_square(x, k)
