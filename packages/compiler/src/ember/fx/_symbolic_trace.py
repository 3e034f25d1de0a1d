"""`symbolic_trace`, `Tracer` and `wrap`: run a module's forward on Proxies to record a Graph.

While tracing, ember's public functions (`ember.*`, `ember.nn.functional.*`, `ember.linalg.*`)
and `wrap`ped ones are patched so a call with a Proxy argument records one call_function node
naming the function (ember has no `__torch_function__`; patching is what torch.fx does for
`wrap`). A dispatch mode catches op-table calls reached any other way (`ember.ops.aten.*`,
operators of real tensors on Proxies) and records the table entry itself.
"""
from __future__ import annotations

import contextlib
import inspect
import math
from typing import Any

import ember
from ember._dispatch import DispatchMode, call
from ember.nn import Module, Parameter, Sequential

from ._op_args import split_op_args
from .graph import Graph
from .graph_module import GraphModule
from .proxy import TracerBase, TraceError, find_proxy

__all__ = ["Tracer", "symbolic_trace", "wrap", "PH", "TraceError"]

_wrapped_fns_to_patch: dict = {}  # (id(globals), name) -> globals
_NOT_PATCHED = {"is_tensor", "is_storage", "typename", "compile", "is_grad_enabled",
                "get_default_dtype", "set_default_dtype", "manual_seed", "set_grad_enabled"}


class _PH:
    """A concrete_args value meaning "still a placeholder" (torch.fx.PH)."""

    def __repr__(self):
        return "PH"


PH = _PH()


def _assert(condition, message: str = "") -> None:
    """ember's `torch._assert`: the check a concrete_args specialization records."""
    if not condition:
        raise AssertionError(message)


def _assert_is_none(value, msg: str) -> None:
    assert value is None, msg


class _Patcher:
    """Set attributes for the duration of a trace; restore them all on exit."""

    def __init__(self):
        self._undo: list = []

    def patch(self, obj_dict: dict, name: str, new) -> None:
        self._undo.append((obj_dict, name, obj_dict.get(name, _MISSING)))
        obj_dict[name] = new

    def patch_attr(self, obj, name: str, new) -> None:
        self._undo.append((obj, name, obj.__dict__.get(name, _MISSING)))
        setattr(obj, name, new)

    def revert(self) -> None:
        for obj, name, old in reversed(self._undo):
            if isinstance(obj, dict):
                if old is _MISSING:
                    obj.pop(name, None)
                else:
                    obj[name] = old
            elif old is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, old)
        self._undo.clear()


_MISSING = object()


class _Proxying:
    """A function that records one call_function node when any argument is a Proxy, else
    runs it. It compares and hashes as the function it wraps, so `node.target ==
    ember.sigmoid` holds while ember.sigmoid is patched (in a Transformer, say)."""

    __fx_wrapped__ = True

    def __init__(self, orig):
        self.__wrapped__ = orig

    def __call__(self, *args, **kwargs):
        p = find_proxy(args, kwargs)
        if p is not None:
            return p.tracer.create_proxy("call_function", self.__wrapped__, args, kwargs)
        return self.__wrapped__(*args, **kwargs)

    def __eq__(self, other):
        return other is self.__wrapped__ or (isinstance(other, _Proxying)
                                             and other.__wrapped__ is self.__wrapped__)

    def __hash__(self):
        return hash(self.__wrapped__)

    def __getattr__(self, name):
        return getattr(self.__dict__["__wrapped__"], name)

    def __repr__(self):
        return repr(self.__wrapped__)


_WRAPPERS: dict = {}  # id(function) -> its _Proxying (kept: traces patch the same functions)


def _proxying(orig):
    w = _WRAPPERS.get(id(orig))
    if w is not None and w.__wrapped__ is orig:
        return w
    if orig.__class__ is _Proxying:
        return orig
    w = _WRAPPERS[id(orig)] = _Proxying(orig)
    return w


def _ember_function_namespaces() -> list:
    import ember.nn.functional as F
    return [ember, F, ember.linalg]


def patch_functions(patcher: _Patcher, autowrap_modules=(math,)) -> None:
    """Make ember's public functions, autowrap modules' and `wrap`ped ones record Proxies."""
    for ns in [*_ember_function_namespaces(), *autowrap_modules]:
        d = vars(ns)
        for k, v in list(d.items()):
            if (inspect.isfunction(v) or inspect.isbuiltin(v)) and not k.startswith("_") \
                    and k not in _NOT_PATCHED:
                patcher.patch(d, k, _proxying(v))
    for globals_, name in list(_wrapped_fns_to_patch.values()):
        if name in globals_:
            patcher.patch(globals_, name, _proxying(globals_[name]))


@contextlib.contextmanager
def proxy_functions():
    """Within: ember.* functions called with Proxies record nodes (torch.fx gets this from
    `__torch_function__`; Transformer runs under it)."""
    from ._codegen import _ember_paths
    _ember_paths()
    patcher = _Patcher()
    try:
        patch_functions(patcher)
        with _FallbackMode():
            yield
    finally:
        patcher.revert()


class _FallbackMode(DispatchMode):
    """Op-table calls with Proxy arguments that no patched function caught."""

    def __ember_dispatch__(self, op, args, out):
        p = find_proxy(args)
        if p is None:
            return call(op, args, out)
        a, kw = split_op_args(op, args)
        return p.tracer.create_proxy("call_function", op, a, kw)


class Tracer(TracerBase):
    """Records a module's forward into a Graph (torch.fx.Tracer); subclass it to change which
    modules stay leaves (`is_leaf_module`) or how module calls are recorded (`call_module`)."""

    def __init__(self, autowrap_modules: tuple = (math,), autowrap_functions: tuple = (),
                 param_shapes_constant: bool = False) -> None:
        super().__init__()
        self._autowrap_function_ids = {
            id(v) for m in autowrap_modules for k, v in vars(m).items()
            if not k.startswith("_") and callable(v)} | {id(f) for f in autowrap_functions}
        self._autowrap_modules = list(autowrap_modules)
        self._autowrap_functions = list(autowrap_functions)
        self.param_shapes_constant = param_shapes_constant
        self.submodule_paths: dict | None = None
        self.root: Module | None = None
        self.tensor_attrs: dict = {}

    # ---- hooks users override -----------------------------------------------------------
    def is_leaf_module(self, m: Module, module_qualified_name: str) -> bool:
        """ember.nn's own modules (not Sequential) are leaves: recorded as call_module."""
        return (type(m).__module__.startswith("ember.nn")
                and not isinstance(m, Sequential))

    def path_of_module(self, mod: Module) -> str:
        if self.submodule_paths is not None:
            path = self.submodule_paths.get(id(mod))
            if path is None:
                raise NameError("module is not installed as a submodule")
            return path
        for n, p in self.root.named_modules():
            if mod is p:
                return n
        raise NameError("module is not installed as a submodule")

    def call_module(self, m: Module, forward, args: tuple, kwargs: dict) -> Any:
        """A submodule call: traced through, or one call_module node if it is a leaf."""
        qualname = self.path_of_module(m)
        if not self.is_leaf_module(m, qualname):
            return forward(*args, **kwargs)
        return self.create_proxy("call_module", qualname, args, kwargs)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict) -> Any:
        """A module attribute read during tracing: parameters become get_attr nodes."""
        if isinstance(attr_val, Parameter):
            for n, p in self.root.named_parameters():
                if attr_val is p:
                    if n not in parameter_proxy_cache:
                        parameter_proxy_cache[n] = self.create_proxy("get_attr", n, (), {})
                    return parameter_proxy_cache[n]
        return attr_val

    def create_arg(self, a: Any):
        """Parameters, buffers, submodules and tensor constants become get_attr nodes."""
        if isinstance(a, Parameter):
            for n, p in self.root.named_parameters():
                if a is p:
                    return self.create_node("get_attr", n, (), {})
            raise NameError("parameter is not a member of this module")
        if isinstance(a, Module):
            for n, p in self.root.named_modules():
                if a is p:
                    return self.create_node("get_attr", n, (), {})
            raise NameError("module is not installed as a submodule")
        if isinstance(a, ember.Tensor):
            entry = self.tensor_attrs.get(id(a))
            if entry is None:
                i = 0
                while hasattr(self.root, f"_tensor_constant{i}"):
                    i += 1
                qualname = f"_tensor_constant{i}"
                setattr(self.root, qualname, a)
                entry = self.tensor_attrs[id(a)] = (a, qualname)
            return self.create_node("get_attr", entry[1], (), {})
        return super().create_arg(a)

    # ---- tracing ----------------------------------------------------------------------------
    def create_args_for_root(self, root_fn, is_module: bool, concrete_args=None):
        sig = inspect.signature(root_fn)
        params = list(sig.parameters.values())
        args: list = []
        if is_module:
            params = params[1:]
            args.append(self.root)
        concrete_args = dict(concrete_args or {})
        for p in params:
            if p.kind == p.VAR_KEYWORD or p.kind == p.KEYWORD_ONLY:
                raise NotImplementedError(f"ember.fx: tracing keyword-only and **kwargs "
                                          f"parameters ({p}) is not supported")
            if p.kind == p.VAR_POSITIONAL:  # one placeholder for the whole tuple
                args.append(self.create_proxy("placeholder", f"*{p.name}", (), {}))
                root_fn = _varargs_as_positional(root_fn)
                continue
            default = () if p.default is inspect.Parameter.empty else (p.default,)
            if p.name in concrete_args and concrete_args[p.name] is not PH:
                args.append(self._concrete_placeholder(p.name, concrete_args[p.name]))
            else:
                args.append(self.create_proxy("placeholder", p.name, default, {}))
        return root_fn, args

    def _concrete_placeholder(self, name: str, value):
        out = self.create_proxy("placeholder", name, (value,), {})
        msg = f"{name} has been specialized to have value {value} but got another value"
        if value is None:
            self.create_proxy("call_function", _assert_is_none, (out, msg), {})
        elif type(value) in (bool, int, float, str):
            self.create_proxy("call_function", _assert, (out == value, msg), {})
        else:
            import warnings
            warnings.warn(f"Was not able to add assertion to guarantee correct input {name} to "
                          "specialized function. It is up to the user to make sure that your "
                          "inputs match the inputs you specialized the function with.",
                          stacklevel=3)
        return value

    def trace(self, root, concrete_args: dict | None = None) -> Graph:
        """Run root (a Module or a function) on Proxies; the recorded Graph."""
        if isinstance(root, Module):
            self.root = root
            fn = type(root).forward
        else:
            self.root = Module()
            fn = root
        self.graph = Graph(tracer_cls=type(self))
        self.tensor_attrs = {}
        for mod_name, mod in self.root.named_modules():
            for k, v in list(vars(mod).items()) + list(mod._buffers.items()):
                if isinstance(v, ember.Tensor) and not isinstance(v, Parameter):
                    self.tensor_attrs[id(v)] = (v, f"{mod_name}.{k}" if mod_name else k)
        self.submodule_paths = {id(m): n for n, m in self.root.named_modules()}
        fn, args = self.create_args_for_root(fn, isinstance(root, Module), concrete_args)
        patcher = _Patcher()
        self._checked_globals: set = set()
        try:
            self._patch(patcher, fn)
            with _FallbackMode():
                result = fn(*args)
            self.create_node("output", "output", (self.create_arg(result),), {},
                             type_expr=fn.__annotations__.get("return"))
        finally:
            patcher.revert()
            self.submodule_paths = None
        return self.graph

    def _patch(self, patcher: _Patcher, fn) -> None:
        from ._codegen import _ember_paths
        _ember_paths()  # (built from the unpatched namespaces)
        tracer = self
        orig_call = Module.__call__
        orig_getattr = Module.__getattr__
        cache: dict = {}

        def module_getattr_wrapper(mod, attr):
            return tracer.getattr(attr, orig_getattr(mod, attr), cache)

        def module_call_wrapper(mod, *args, **kwargs):
            def forward(*a, **kw):
                return orig_call(mod, *a, **kw)
            fwd = getattr(type(mod), "forward", None)
            self._autowrap_check(patcher, getattr(fwd, "__globals__", {}))
            return tracer.call_module(mod, forward, args, kwargs)

        patcher.patch_attr(Module, "__getattr__", module_getattr_wrapper)
        patcher.patch_attr(Module, "__call__", module_call_wrapper)
        patch_functions(patcher, self._autowrap_modules)
        self._autowrap_check(patcher, getattr(fn, "__globals__", {}))

    def _autowrap_check(self, patcher: _Patcher, globals_: dict) -> None:
        """Patch names in a traced function's globals bound to ember or autowrap functions
        (`from ember import relu`, `from math import sqrt`)."""
        if not globals_ or id(globals_) in self._checked_globals:
            return
        self._checked_globals.add(id(globals_))
        from ._codegen import _ember_paths
        ember_ids = _ember_paths()
        for k, v in list(globals_.items()):
            if k.startswith("_") or getattr(v, "__fx_wrapped__", False) or \
                    isinstance(v, type) or not callable(v):
                continue
            if id(v) in self._autowrap_function_ids or (
                    id(v) in ember_ids and k not in _NOT_PATCHED):
                patcher.patch(globals_, k, _proxying(v))


def _varargs_as_positional(fn):
    """fn with its `*args` turned into one ordinary parameter (it receives the Proxy)."""
    import types
    co = fn.__code__
    code = co.replace(co_flags=co.co_flags & ~inspect.CO_VARARGS, co_argcount=co.co_argcount + 1)
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__annotations__ = getattr(fn, "__annotations__", {})
    return new


def wrap(fn_or_name):
    """Record calls of a module-level function as one call_function node instead of tracing
    into it. Call at module scope: `ember.fx.wrap("my_fn")` or `@ember.fx.wrap`."""
    if callable(fn_or_name):
        name = fn_or_name.__name__
    elif isinstance(fn_or_name, str):
        name = fn_or_name
    else:
        raise AssertionError("wrap must be called with the name of a function or a function")
    frame = inspect.currentframe().f_back
    if frame.f_code.co_name != "<module>":
        raise NotImplementedError("wrap must be called at the top level of a module")
    _wrapped_fns_to_patch[(id(frame.f_globals), name)] = (frame.f_globals, name)
    return fn_or_name


def symbolic_trace(root, concrete_args: dict | None = None) -> GraphModule:
    """Trace a Module or function into a GraphModule (torch.fx.symbolic_trace).

    >>> import ember, ember.fx
    >>> gm = ember.fx.symbolic_trace(lambda x, y: ember.add(x, y).relu())
    >>> print(gm.code.strip().splitlines()[1].strip())
    add = ember.add(x, y);  x = y = None
    """
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = root.__class__.__name__ if isinstance(root, Module) else root.__name__
    return GraphModule(tracer.root, graph, name)

