"""The "inductor" backend: AOT autograd's forward and backward graphs, each compiled per
input layout (sizes, strides, dtypes) into fused C++ kernels plus extern calls. A graph the
lowering cannot take (mutation, non-CPU tensors, unsupported dtypes) runs as captured, with
the reason logged once.
"""
from __future__ import annotations

import logging

from ember._tensor import Tensor

from . import codecache
from .graph import build
from .lowering import Fallback, GraphLowering

__all__ = ["compile_fx", "compile_graph", "CompiledFxGraph"]

log = logging.getLogger("ember._inductor")
_noted: set = set()


def _key(args) -> tuple:
    return tuple((a.dtype, a.device.type, a._shape, a._stride) if isinstance(a, Tensor)
                 else (type(a), a) for a in args)


class CompiledFxGraph:
    """A graph's compiled variants by input layout; compiled on the first call of each."""

    def __init__(self, gm):
        self.gm = gm
        self.variants: dict = {}
        self.last = None

    def __call__(self, *args):
        key = _key(args)
        fn = self.variants.get(key)
        if fn is None:
            fn = self.variants[key] = self._compile(args)
        return fn(*args)

    def _compile(self, args):
        try:
            art = codecache.lookup(self.gm, args)
            if art is None:
                g = GraphLowering(self.gm, args).run()
                art = build(g)
                if art is None:  # kernels deferred: run as captured this time
                    from ember._dynamo.runner import fast_callable
                    return _once(fast_callable(self.gm), self, _key(args))
                codecache.save(self.gm, args, art)
            compiled = codecache.load(art, self.gm)
            if compiled is None:  # kernels deferred (see graph.deferred)
                from ember._dynamo.runner import fast_callable
                return _once(fast_callable(self.gm), self, _key(args))
        except Fallback as e:
            reason = str(e)
            if reason not in _noted:
                _noted.add(reason)
                log.info("ember inductor: running a graph as captured: %s", reason)
            from ember._dynamo.runner import fast_callable
            f = fast_callable(self.gm)
            self.last = None
            return lambda *a: f(*a)
        self.last = compiled
        from ember._dynamo import _logs
        _logs.emit("output_code", compiled.code())
        return compiled


def _once(f, cg, key):
    """Run f for this call only: the next call compiles again."""
    def run(*a):
        cg.variants.pop(key, None)
        return f(*a)
    return run


def compile_graph(gm, example_inputs=None):
    """A callable running gm through generated kernels."""
    return CompiledFxGraph(gm)


def compile_fx(gm, example_inputs):
    """The backend: `(GraphModule, example_inputs) -> callable`."""
    from ember._dynamo.aot import aot_module
    return aot_module(gm, example_inputs, fw_compiler=compile_graph, bw_compiler=compile_graph)
