"""`ember.library`: custom ops written in Python (or C++ through the stable ABI) as real ops.

    @ember.library.custom_op("mylib::scale", mutates_args=())
    def scale(x: ember.Tensor, k: float) -> ember.Tensor: ...
    scale.register_fake(...); scale.register_autograd(...); ember.library.opcheck(scale, ...)

`triton_op` and `wrap_triton` do the same for functions that launch user Triton kernels.

An op defined here is an entry of the op table like core's own: `ember.ops.mylib.scale`, run by
the dispatcher (modes, autograd, devices), with kernels that take and return Tensors.
"""
from __future__ import annotations

from ._custom_op import (
    CustomOpDef,
    Library,
    custom_op,
    define,
    impl,
    register_autograd,
    register_fake,
    register_kernel,
)
from ._opcheck import OpCheckError, opcheck
from ._schema_infer import infer_schema
from ._triton import triton_op, wrap_triton

__all__ = ["custom_op", "CustomOpDef", "register_fake", "register_autograd", "register_kernel",
           "opcheck", "OpCheckError", "infer_schema", "Library", "define", "impl", "triton_op",
           "wrap_triton"]
