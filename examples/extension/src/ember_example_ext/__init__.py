"""ember-example-ext: a C++ op (CPU kernel, fake kernel, derivative) built against ember's stable
ABI only; importing this package registers `ember.ops.ember_example.scaled_square`.

>>> import ember, ember_example_ext
>>> ember_example_ext.scaled_square(ember.tensor([1.0, 2.0]), 3.0).tolist()
[3.0, 12.0]
"""
from __future__ import annotations

import ember

try:
    from . import _C  # registers the ops; refuses an ember-core offering an older ABI
except ImportError as e:
    # pybind11 reports a failed module init as "initialization failed", the reason as its cause
    raise ImportError(str(e.__cause__ or e)) from e.__cause__

__all__ = ["scaled_square", "TARGET_VERSION"]

TARGET_VERSION = tuple(_C.TARGET_VERSION)


def scaled_square(x: ember.Tensor, k: float = 1.0) -> ember.Tensor:
    """k * x * x, computed by the C++ kernel (differentiable)."""
    return ember.ops.ember_example.scaled_square(x, k)
