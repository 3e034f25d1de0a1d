"""`ShapeProp`: run a GraphModule on example inputs and record each node's tensor metadata
(`node.meta["tensor_meta"]`: shape, dtype, requires_grad, stride, ...) and `meta["type"]`."""
from __future__ import annotations

from typing import Any, NamedTuple

import ember

from ..interpreter import Interpreter
from ..node import Node, map_aggregate

__all__ = ["TensorMetadata", "ShapeProp"]


class TensorMetadata(NamedTuple):
    shape: Any
    dtype: Any
    requires_grad: bool
    stride: tuple
    memory_format: Any
    is_quantized: bool
    qparams: dict


def _extract_tensor_metadata(t) -> TensorMetadata:
    mf = ember.contiguous_format if t.is_contiguous() else None
    return TensorMetadata(t.shape, t.dtype, t.requires_grad, t.stride(), mf, False, {})


class ShapeProp(Interpreter):
    """`ShapeProp(gm).propagate(*args)` fills each node's meta; with `fake_mode`, the inputs
    become fake tensors and nothing is computed but shapes."""

    def __init__(self, gm, fake_mode=None):
        super().__init__(gm)
        self.fake_mode = fake_mode

    def run_node(self, n: Node) -> Any:
        result = super().run_node(n)
        found = []

        def extract(x):
            if isinstance(x, ember.Tensor):
                found.append(True)
                return _extract_tensor_metadata(x)
            return x
        meta = map_aggregate(result, extract)
        if found:
            n.meta["tensor_meta"] = meta
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args):
        """Run the module on args, recording metadata; returns its result."""
        if self.fake_mode is None:
            return super().run(*args)
        args = [self.fake_mode.from_tensor(a) if isinstance(a, ember.Tensor) else a
                for a in args]
        with self.fake_mode:
            return super().run(*args)
