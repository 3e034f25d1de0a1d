"""`ember.compile`'s wrapper: a cache of compiled entries per function, each valid where its
guards hold; a miss captures again (a recompile), up to `config.cache_size_limit`, past which
the function runs eagerly with a warning naming the guard that failed. Stances, `disable`,
`allow_in_graph` and `is_compiling` live here too.
"""
from __future__ import annotations

import functools
import inspect
import logging
import os
import types
import warnings
import weakref

from . import config
from .exc import GraphBreak, RecompileError, Unsupported
from .tracer import Tracer, V

__all__ = ["optimize", "disable", "set_stance", "is_compiling", "reset",
           "allow_in_graph"]

log = logging.getLogger("ember._dynamo")
_ALLOW_IN_GRAPH: set = set()
_STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")
_stance = ["default"]
_compiling = [0]
_noted: set = set()
_DEBUG = bool(os.environ.get("EMBER_DYNAMO_DEBUG"))
_all_compiled = weakref.WeakSet()   # what reset() clears


def is_compiling() -> bool:
    """True while ember.compile captures a function (library code can branch on it)."""
    return _compiling[0] > 0


def set_stance(stance: str = "default", *, skip_guard_eval_unsafe=False, force_backend=None):
    """How compiled functions behave from now on: "default", "force_eager" (run eagerly, no
    capture), "eager_on_recompile" (a guard miss runs eagerly instead of capturing again),
    "fail_on_recompile" (a guard miss raises RecompileError). Also usable as a context
    manager."""
    if stance not in _STANCES:
        raise ValueError(f"invalid torch.compile stance '{stance}'")
    prev = _stance[0]
    _stance[0] = stance
    return _StanceCtx(prev)


class _StanceCtx:
    def __init__(self, prev):
        self.prev = prev

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _stance[0] = self.prev


def allow_in_graph(fn):
    """Let fn be called as one opaque step on fake tensors (it must only run ember ops)."""
    _ALLOW_IN_GRAPH.add(fn)
    return fn


def disable(fn=None, recursive=True, *, reason=None):
    """Run fn eagerly always, even when called from compiled code (a graph break there)."""
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    orig = getattr(fn, "_orig", fn)

    @functools.wraps(orig)
    def _ember_disabled(*args, **kwargs):
        return orig(*args, **kwargs)
    _ember_disabled._ember_disable = True
    return _ember_disabled


def reset() -> None:
    """Forget every compiled entry (and the "inductor runs aot_eager" note's once-flag)."""
    for c in list(_all_compiled):
        c._entries.clear()
        c._warned = False
    from . import backends
    backends._noted.clear()


class CacheEntry:
    """One capture: guards, how to read the graph inputs, the compiled graph, the output
    structure; or, after a graph break, `eager` (the frame runs as plain Python)."""

    def __init__(self, tr: Tracer, eager_reason=None):
        self.guards = list(tr.guards)
        self.env = dict(tr.env)
        body = " and ".join(f"({c})" for c, _ in self.guards) or "True"
        ns = dict(self.env)
        exec(f"def ___guard(A, K):\n    return {body}\n", ns)  # noqa: S102
        exec(f"def ___inputs(A, K):\n    return [{', '.join(tr.inputs)}]\n", ns)  # noqa: S102
        self.check_fn = ns["___guard"]
        self.inputs = ns["___inputs"]
        self.effects = None
        if tr.side_effects:  # attribute stores the frame made: replayed after the graph
            body = "\n".join(f"    setattr({s}, {n!r}, {v!r})" for s, n, v in tr.side_effects)
            exec(f"def ___effects(A, K):\n{body}\n", ns)  # noqa: S102
            self.effects = ns["___effects"]
        self.eager_reason = eager_reason
        self.compiled = None
        self.spec = None
        self.resumes: dict = {}

    def check(self, A, K) -> bool:
        try:
            return bool(self.check_fn(A, K))
        except Exception:
            return False

    def _resume(self, outs, A, K):
        from .resume import NULL, bind_super, rebuild, resume_function, step
        r = self.resume
        memo: dict = {}
        stack = [rebuild(s, outs, A, K, self.env, memo) for s in self.spec[1]]
        local = [rebuild(s, outs, A, K, self.env, memo) for s in self.spec[2]]
        cells = [rebuild(s, outs, A, K, self.env, memo) for s in self.spec[3]]
        call = bind_super(self.owner._call_nested, r["fn"], r["code"], local[0] if local else None)
        nxt = step(r["ins"], r["next"], stack, r["kw_names"], r["globals"], call)
        nulls = tuple(x is NULL for x in stack)
        fn = self.resumes.get((nxt, nulls))
        if fn is None:
            rf = resume_function(r["fn"], r["code"], nxt, list(nulls))
            fn = self.resumes[(nxt, nulls)] = _CompiledFn(
                rf, self.owner._backend, dynamic=self.owner._dynamic, hooks=self.owner._hooks)
        return fn(*local, *[x for x in stack if x is not NULL], *cells)

    def failing_guard(self, A, K) -> str:
        for code, what in self.guards:
            try:
                ok = eval(code, dict(self.env), {"A": A, "K": K})  # noqa: S307
            except Exception:
                ok = False
            if not ok:
                return what
        return "<none>"

    def run(self, A, K, orig):
        if self.eager_reason is not None:
            return orig(*A, **K)
        outs = self.compiled(*self.inputs(A, K))
        if self.effects is not None:
            self.effects(A, K)
        if self.spec[0] == "resume":
            return self._resume(outs, A, K)
        return _rebuild(self.spec, outs, A, K, self.env)


def _rebuild(spec, outs, A, K, env):
    kind = spec[0]
    if kind == "t":
        return outs[spec[1]]
    if kind == "k":
        return spec[1]
    if kind == "s":
        return eval(spec[1], env, {"A": A, "K": K})  # noqa: S307
    if kind == "d":
        return {k: _rebuild(s, outs, A, K, env) for k, s in spec[1].items()}
    ct, items = spec[1], [_rebuild(s, outs, A, K, env) for s in spec[2]]
    if ct is list or ct is tuple:
        return ct(items)
    return ct(*items) if hasattr(ct, "_fields") else ct(items)


class _CompiledFn:
    """The callable ember.compile returns for a function (or a module's call)."""
    _ember_compiled = True

    def __init__(self, orig, backend, fullgraph=False, dynamic=None, module=None,
                 hooks=None):
        self._orig = orig
        self._module = module
        self._backend = backend
        self._fullgraph = fullgraph
        self._dynamic = dynamic
        from .shapes import DynamicPolicy
        self._dyn = DynamicPolicy(dynamic)
        self._entries: list = []
        self._warned = False
        self._nested: dict = {}
        self._hooks = hooks   # explain(): records of graphs and breaks
        functools.update_wrapper(self, orig if not isinstance(orig, types.MethodType)
                                 else orig.__func__, updated=())
        _all_compiled.add(self)

    def __get__(self, obj, objtype=None):  # as a decorator on methods
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def __call__(self, *args, **kwargs):
        if _stance[0] == "force_eager" or _compiling[0]:
            return self._orig(*args, **kwargs)
        A, K = args, kwargs
        for e in self._entries:
            if e.check(A, K):
                return e.run(A, K, self._orig)
        if self._entries:
            last = self._entries[-1]
            why = last.failing_guard(A, K)
            if _stance[0] == "eager_on_recompile":
                return self._orig(*args, **kwargs)
            if _stance[0] == "fail_on_recompile":
                raise RecompileError(f"Detected recompile when torch.compile stance is "
                                     f"'fail_on_recompile'. {self._name()}: guard failed: {why}")
            if len(self._entries) >= config.cache_size_limit:
                if not self._warned:
                    self._warned = True
                    warnings.warn(f"ember._dynamo hit config.cache_size_limit "
                                  f"({config.cache_size_limit}) for {self._name()}; "
                                  f"last reason: {why}. It now runs eagerly for new cases. "
                                  "To diagnose recompilation issues, see EMBER_LOGS="
                                  "recompiles.", stacklevel=2)
                return self._orig(*args, **kwargs)
            _logs.emit("recompiles", f"Recompiling function {self._name()}\n"
                       f"    triggered by the following guard failure(s):\n    - {why}")
        entry = self._capture(A, K)
        self._entries.append(entry)
        return entry.run(A, K, self._orig)

    def _name(self) -> str:
        code = _code_of(self._orig)
        if code is None:
            return repr(self._orig)
        return f"{code.co_name} in {code.co_filename}:{code.co_firstlineno}"

    # ---- capture ----------------------------------------------------------------------------
    def _capture(self, A, K) -> CacheEntry:
        from .capture import capture_call
        tr = Tracer(self._dyn)
        _compiling[0] += 1
        try:
            result = capture_call(tr, self, A, K)
        except GraphBreak as e:
            if e.resume is not None and not self._fullgraph:
                from .resume import NotResumable
                try:
                    return self._resume_entry(tr, e)
                except NotResumable:
                    pass
                except Exception:
                    if _DEBUG:
                        raise
            return self._broke(tr, e)
        except Unsupported:
            raise
        except Exception as e:  # a gap in the interpreter: the frame still runs, correctly
            if _DEBUG:
                raise
            return self._broke(tr, GraphBreak(f"internal: {type(e).__name__}: {e}"))
        finally:
            _compiling[0] -= 1
        gm, spec = _finish_graph(tr, result)
        if not any(n.op == "call_function" for n in gm.graph.nodes):
            from .runner import fast_callable
            compiled = fast_callable(gm)      # nothing to compile
        else:
            compiled = self._compile_graph(gm, tr)
        entry = self._entry(tr, gm)
        entry.spec = spec
        entry.compiled = compiled
        return entry

    def _compile_graph(self, gm, tr):
        """The backend's callable for gm (run before the entry's guards are fixed: symbolic
        sizes the backend decides on add guards too)."""
        return self._backend(gm, list(tr.examples))

    def _entry(self, tr, gm) -> CacheEntry:
        from .shapes import shape_guards
        for code, what in shape_guards(tr):
            tr.add_guard(code, what)
        entry = CacheEntry(tr)
        _logs.emit("guards", "GUARDS:\n" + "\n".join(f"  {w}" for _, w in tr.guards))
        _logs.emit("graph_code", f"TRACED GRAPH {self._name()}\n{gm.code}")
        if self._hooks is not None:
            self._hooks["graphs"].append(gm)
            self._hooks["guards"].append(list(tr.guards))
        return entry

    def _resume_entry(self, tr, e: GraphBreak) -> CacheEntry:
        """The graph up to the break, then the breaking instruction in Python, then the rest
        of the frame in a (compiled) resume function."""
        from ember.fx.graph_module import GraphModule

        from .resume import state_spec
        r = e.resume
        names = r["code"].co_varnames
        outs, index = [], {}
        specs = state_spec(tr, list(r["stack"]) + [r["locals"].get(n, V(None)) for n in names]
                           + list(r["cells"]), outs, index, callees=_callees(r))
        n_stack, n_loc = len(r["stack"]), len(names)
        tr.graph.output(tuple(outs))
        gm = GraphModule(dict(tr.proxy.constants), tr.graph, "GraphModule")
        has_ops = any(n.op == "call_function" for n in gm.graph.nodes)
        compiled = self._compile_graph(gm, tr) if has_ops else gm
        msg = f"Graph break in {self._name()}: {e.reason} (at {e.where}); resuming after it"
        _logs.emit("graph_breaks", msg)
        if self._hooks is not None:
            self._hooks["breaks"].append((e.reason, e.where))
        if has_ops:
            entry = self._entry(tr, gm)
        else:
            from .shapes import shape_guards
            for code, what in shape_guards(tr):
                tr.add_guard(code, what)
            entry = CacheEntry(tr)
        entry.spec = ("resume", specs[:n_stack], specs[n_stack:n_stack + n_loc],
                      specs[n_stack + n_loc:])
        entry.resume = r
        entry.owner = self
        entry.compiled = compiled
        return entry

    def _call_nested(self, fn, args, kwargs):
        """A call that broke the graph, run in Python: user functions and modules compiled
        on their own (their graphs, guards and breaks), anything else as it is."""
        from ember.nn import Module
        key = id(fn) if not isinstance(fn, types.MethodType) else (id(fn.__func__),
                                                                   id(fn.__self__))
        hit = self._nested.get(key)
        if hit is None or hit[0] is not fn and not (isinstance(fn, types.MethodType)
                                                    and hit[0] == fn):
            if isinstance(fn, Module) and type(fn).__module__.startswith("ember.") is False:
                c = _CompiledFn(fn, self._backend, module=fn, hooks=self._hooks)
            elif isinstance(fn, types.FunctionType) and not getattr(fn, "_ember_disable",
                                                                   False) and \
                    not (fn.__module__ or "").startswith("ember"):
                c = _CompiledFn(fn, self._backend, hooks=self._hooks)
            else:
                c = fn
            hit = self._nested[key] = (fn, c)
        return hit[1](*args, **kwargs)

    def _broke(self, tr, e: GraphBreak) -> CacheEntry:
        msg = f"Graph break in {self._name()}: {e.reason} (at {e.where})"
        if self._fullgraph:
            raise Unsupported(f"{e.where}: {e.reason}") from None
        _logs.emit("graph_breaks", msg)
        if self._hooks is not None:
            self._hooks["breaks"].append((e.reason, e.where))
        return CacheEntry(tr, eager_reason=e.reason)


def _callees(r) -> list:
    """The stack values the breaking call consumes (a local function there is rebuilt)."""
    ins, stack = r["ins"], r["stack"]
    if ins.opname == "CALL":
        top = stack[len(stack) - ins.arg - 2:]
    elif ins.opname == "CALL_FUNCTION_EX":
        top = stack[len(stack) - 4:]
    else:
        return []
    kept = {id(v) for v in r["locals"].values()} | {id(v) for v in stack[:len(stack) - len(top)]}
    return [v for v in top if id(v) not in kept]  # one also held elsewhere: not rebuilt


def _code_of(fn):
    fn = getattr(fn, "__func__", fn)
    return getattr(fn, "__code__", None)


def _finish_graph(tr, result: V):
    from ember.fx.graph_module import GraphModule

    from .shapes import is_sym
    outs: list = []
    index: dict = {}

    def spec(v):
        from ember._subclasses.fake_tensor import FakeTensor
        if not isinstance(v, V):
            return ("k", v)
        if v.ctype is dict:
            return ("d", {k: spec(x) for k, x in v.val.items()})
        if v.ctype is not None:
            return ("c", v.ctype, [spec(x) for x in v.val])
        if isinstance(v.val, FakeTensor):
            i = index.get(id(v.val))
            if i is None:
                i = index[id(v.val)] = len(outs)
                outs.append(tr.proxy.node_of(v.val))
            return ("t", i)
        if is_sym(v.val):  # a size computed from symbolic sizes: a graph output too
            outs.append(tr.proxy.sym_node(v.val.expr, v.val.env))
            return ("t", len(outs) - 1)
        if v.src is not None and not isinstance(v.val, (int, float, str, bool, type(None))):
            return ("s", v.src)
        return ("k", v.val)
    s = spec(result)
    tr.graph.output(tuple(outs))
    gm = GraphModule(dict(tr.proxy.constants), tr.graph, "GraphModule")
    return gm, s


def _optimized_module_cls():
    from ember.nn import Module

    class OptimizedModule(Module):
        """What ember.compile(module) returns: an nn.Module holding the original as `_orig_mod`
        (state_dict keys gain that prefix, as PyTorch's); calls run the compiled module call;
        other attributes are the original module's."""

        def __init__(self, mod, compiled):
            super().__init__()
            self._orig_mod = mod
            self.__dict__["_compiled"] = compiled

        def forward(self, *args, **kwargs):
            return self.__dict__["_compiled"](*args, **kwargs)

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self._orig_mod, name)

        def __repr__(self):
            return f"OptimizedModule({self._orig_mod!r})"
    return OptimizedModule


class _Lazy:
    cls = None


def __getattr__(name):
    if name == "OptimizedModule":
        if _Lazy.cls is None:
            _Lazy.cls = _optimized_module_cls()
        return _Lazy.cls
    raise AttributeError(name)


def optimize(model, *, backend="inductor", mode=None, dynamic=None, fullgraph=False,
             options=None, disable=False, _hooks=None):
    """ember.compile's body (core's `ember.compile` and `Module.compile()` land here)."""
    from ember.nn import Module

    from .backends import lookup_backend
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be "
                           "specified at the same time.")
    if mode not in (None, "default", "reduce-overhead", "max-autotune",
                    "max-autotune-no-cudagraphs"):
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: default, "
                           "reduce-overhead, max-autotune, max-autotune-no-cudagraphs")
    if model is None:
        return lambda m: optimize(m, backend=backend, mode=mode, dynamic=dynamic,
                                  fullgraph=fullgraph, options=options, disable=disable)
    if disable:
        return model
    if not callable(model):
        raise RuntimeError("torch.compile: model must be a callable (function or nn.Module)")
    be = lookup_backend(backend, mode=mode, options=options)
    if isinstance(model, __getattr__("OptimizedModule")):
        model = model._orig_mod
    if isinstance(model, Module):
        compiled = _CompiledFn(model, be, fullgraph, dynamic, module=model, hooks=_hooks)
        return __getattr__("OptimizedModule")(model, compiled)
    if isinstance(model, types.MethodType) and isinstance(model.__self__, Module) and \
            model.__func__ is Module._call_impl:  # nn.Module.compile()
        return _CompiledFn(model, be, fullgraph, dynamic, module=model.__self__, hooks=_hooks)
    if inspect.isclass(model):
        raise RuntimeError("torch.compile of a class is not supported; compile an instance")
    return _CompiledFn(model, be, fullgraph, dynamic, hooks=_hooks)


from . import _logs  # noqa: E402
