"""The "inductor" backend: AOT autograd's forward and backward graphs, each compiled per
input layout (sizes, strides, dtypes) into fused C++ kernels plus extern calls. Functionalized
write-backs into inputs (optimizer state, BatchNorm's running stats) are computed by the kernels
and copied into the inputs last. A graph the lowering cannot take (other in-place ops, non-CPU
tensors, unsupported dtypes) runs as captured, with the reason logged once.
"""
from __future__ import annotations

import logging

import sympy

from ember._tensor import Tensor

from . import codecache, index64
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

    graph_safe_random = True   # its random draws may be captured in CUDA graphs (rng.py)

    def __init__(self, gm, options=None):
        self.gm = gm
        self.max_autotune = bool((options or {}).get("max_autotune"))
        self.variants: dict = {}
        self.last = None
        self.plan = None          # dynamic.SymPlan, False (no symbolic sizes), None: not yet
        self.sym_variants: dict = {}
        self.n_compiles = 0       # wrappers built (tests count them)

    def __call__(self, *args):
        key = _key(args)
        fn = self.variants.get(key)
        if fn is None:
            fn = self._symbolic(args)
            if fn is None:
                fn = self.variants[key] = self._compile(args)
        return fn(*args)

    def _symbolic(self, args):
        """The one wrapper for every size (graphs with symbolic sizes), or None."""
        from . import dynamic
        if self.plan is None:
            self.plan = dynamic.plan(self.gm, args)
        if not self.plan:
            return None
        skey = dynamic.key(self.plan, args)
        if skey is None:
            return None
        if skey not in self.sym_variants:
            self.sym_variants[skey] = self._compile_symbolic(args)
        if dynamic.device_of(args) == "cuda" and index64.over_int32(self.plan, args):
            return None   # its kernels index in int32: these sizes compile per size (int64)
        return self.sym_variants[skey]

    def _compile_symbolic(self, args):
        from . import dynamic
        arts = []
        dev = dynamic.device_of(args)
        choices: dict = {}   # GEMM i's autotune choice: the second lowering takes the first's
        try:
            for primes in (dynamic._PRIMES, dynamic._PRIMES[::-1]):
                primes = primes[:len(self.plan.symbols)]
                g = GraphLowering(self.gm, dynamic.fake_inputs(self.plan, args, primes),
                                  device=dev, sym_ints=True,
                                  max_autotune=self.max_autotune)
                g.gemm_choices = choices
                g.run()
                sym = dynamic.size_exprs(g.sv, self.plan, primes)
                arts.append((build(g, sym, self.plan, compile_kernels=False), sym))
        except Exception as e:  # noqa: BLE001 - any gap of the symbolic lowering: per size
            log.info("ember inductor: sizes specialized (%s: %s)", type(e).__name__, e)
            return None
        (a, sa), (b, sb) = arts
        if a.wrapper != b.wrapper or a.sources != b.sources or sa != sb:
            log.info("ember inductor: sizes specialized (the lowering depends on them)")
            return None
        self.plan.extents = [sympy.sympify(e).subs(sa) for e in index64.extents(g)]
        self.plan._largest = None   # (index64.over_int32 compiles them once)
        from .graph import load_kernels
        if dev == "cpu" and load_kernels(a.sources) is None:
            return None   # deferred
        self.n_compiles += 1
        compiled = codecache.load(a, self.gm)
        self.last = compiled
        from ember._dynamo import _logs
        _logs.emit("output_code", compiled.code())
        return compiled

    def _compile(self, args):
        try:
            flags = ""
            if self.max_autotune:
                from . import autotune
                flags = f"max_autotune {autotune.FORCE} {autotune.configs}"
            art = codecache.lookup(self.gm, args, flags)
            if art is None:
                g = GraphLowering(self.gm, args, max_autotune=self.max_autotune).run()
                art = build(g)
                if art is None:  # kernels deferred: run as captured this time
                    from ember._dynamo.runner import fast_callable
                    return _once(fast_callable(self.gm), self, _key(args))
                codecache.save(self.gm, args, art, flags)
            self.n_compiles += 1
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


def compile_graph(gm, example_inputs=None, options=None):
    """A callable running gm through generated kernels (options: ember.compile's, e.g.
    {"max_autotune": True})."""
    return CompiledFxGraph(gm, options)


def compile_fx(gm, example_inputs, options=None):
    """The backend: `(GraphModule, example_inputs) -> callable`."""
    from ember._dynamo.aot import aot_module

    from .fuse_attention import fuse_attention
    fuse_attention(gm, example_inputs)   # hand-written attention -> SDPA (CUDA graphs)

    def comp(g, ex=None):
        return compile_graph(g, ex, options)
    return aot_module(gm, example_inputs, fw_compiler=comp, bw_compiler=comp)
