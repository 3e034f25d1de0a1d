"""Compile backends: `(GraphModule, example_inputs) -> callable`, registered by name
(torch._dynamo's custom-backend protocol). "eager" runs the graph as it is, "aot_eager" runs
it through AOT autograd (a compiled forward and backward as one autograd node), "inductor"
generates fused C++ kernels for the forward and backward graphs (`ember._inductor`)."""
from __future__ import annotations

import logging

__all__ = ["register_backend", "lookup_backend", "list_backends"]

_BACKENDS: dict = {}
_noted: set = set()
log = logging.getLogger("ember._dynamo")


def register_backend(compiler_fn=None, name: str | None = None, tags=()):
    """Register `compiler_fn(gm, example_inputs) -> callable` under `name` (its __name__ by
    default); usable as a decorator."""
    if compiler_fn is None:
        return lambda fn: register_backend(fn, name=name, tags=tags)
    name = name or compiler_fn.__name__
    if name in _BACKENDS and _BACKENDS[name] is not compiler_fn:
        raise AssertionError(f"duplicate name: {name}")
    _BACKENDS[name] = compiler_fn
    return compiler_fn


def list_backends(exclude_tags=()) -> list:
    return sorted(_BACKENDS)


def lookup_backend(backend, mode=None, options=None):
    """A backend callable from a name or a callable; under mode="reduce-overhead" (or
    "max-autotune", or options={"triton.cudagraphs": True}) its callables replay as CUDA
    graphs (cudagraphs.py)."""
    from .modes import mode_options, wants_cudagraphs
    fn = _lookup(backend)
    opts = mode_options(mode, options)
    if fn is inductor and opts.get("max_autotune"):   # GEMM templates (ember._inductor.gemm)
        fn = _with_options(fn, {"max_autotune": True})
    if wants_cudagraphs(mode, options):
        from .cudagraphs import cudagraphify
        return cudagraphify(fn)
    return fn


def _lookup(backend):
    if callable(backend):
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a name or a callable, not {type(backend).__name__}")
    fn = _BACKENDS.get(backend)
    if fn is None:
        from .exc import Unsupported
        raise Unsupported(f"invalid backend {backend!r}; registered: {list_backends()}")
    return fn


@register_backend(name="eager")
def eager(gm, example_inputs):
    from .runner import fast_callable
    return fast_callable(gm)


@register_backend(name="aot_eager")
def aot_eager(gm, example_inputs):
    from .aot import aot_module
    return aot_module(gm, example_inputs)


@register_backend(name="inductor")
def inductor(gm, example_inputs, options=None):
    from ember._inductor import compile_fx
    return compile_fx(gm, example_inputs, options)


def _with_options(fn, options):
    def backend(gm, example_inputs):
        return fn(gm, example_inputs, options=options)
    backend.__name__ = getattr(fn, "__name__", "backend")
    return backend
