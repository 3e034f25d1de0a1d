"""ember's compiler backend (PyTorch's torch._inductor): forward and backward graphs lowered
to a loop IR (pointwise formulas from the op table, reductions, views as index arithmetic),
scheduled into fused kernels, generated as C++ with OpenMP for CPU tensors and cached on disk.

>>> import ember
>>> f = ember.compile(lambda x: (x + 1).relu() * 2, backend="inductor")
>>> f(ember.ones(3)).tolist()
[4.0, 4.0, 4.0]
"""
from __future__ import annotations

# registered lowerings: reductions and composites; cat, slice_scatter, argmax, cumsum; matmuls
# and random ops (CUDA graphs); nll_loss_backward
from . import decompositions, gemm, lowering_extra, lowering_loss, rng  # noqa: F401
from .aoti import AOTICompiledModel, aoti_compile_and_package, aoti_load_package
from .compile_fx import CompiledFxGraph, compile_fx, compile_graph

__all__ = ["compile_fx", "compile_graph", "CompiledFxGraph", "aoti_compile_and_package",
           "aoti_load_package", "AOTICompiledModel"]
