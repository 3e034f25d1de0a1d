"""`ember.jit`: PyTorch's TorchScript entry points, so programs that decorate with them run
unchanged. ember has no TorchScript: `script` returns its argument (with a one-time note) and
`trace` runs the example once and returns a callable that runs the original code; the
decorators (`ignore`, `unused`, `export`, ...) return what they wrap.

>>> import ember
>>> @ember.jit.script
... def f(x):
...     return x * 2
>>> f(ember.ones(2)).tolist(), ember.jit.is_scripting()
([2.0, 2.0], False)
"""
from __future__ import annotations

import builtins
import functools
import warnings

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "is_scripting",
           "is_tracing", "annotate", "Final", "ScriptModule", "ScriptFunction", "script_method",
           "interface", "fork", "wait", "freeze", "optimize_for_inference", "isinstance",
           "save", "load", "Attribute", "Error"]

_noted = False


def _note_once() -> None:
    global _noted
    if not _noted:
        _noted = True
        warnings.warn("ember.jit.script/trace: ember has no TorchScript; the module or function "
                      "runs as ordinary Python (use ember.compile for compiled speed)",
                      UserWarning, stacklevel=3)


def script(obj, optimize=None, _frames_up: int = 0, _rcb=None, example_inputs=None):
    """Returns `obj` itself (a module, function or class): it runs as written."""
    _note_once()
    return obj


def _run_example(fn, example_inputs, example_kwarg_inputs=None):
    if example_kwarg_inputs is not None:
        return fn(**example_kwarg_inputs)
    if example_inputs is None:
        return None
    args = example_inputs if builtins.isinstance(example_inputs, tuple) else (example_inputs,)
    return fn(*args)


def trace(func, example_inputs=None, optimize=None, check_trace: bool = True,
          check_inputs=None, check_tolerance: float = 1e-5, strict: bool = True,
          _force_outplace: bool = False, _module_class=None, _compilation_unit=None,
          example_kwarg_inputs=None, _store_inputs: bool = True):
    """Runs `func` once on the example inputs (as torch does, so errors surface here) and
    returns a callable running `func`: a module comes back as itself."""
    from ..nn import Module
    _note_once()
    from .._grad_mode import no_grad
    with no_grad():
        _run_example(func, example_inputs, example_kwarg_inputs)
    if builtins.isinstance(func, Module):
        return func

    @functools.wraps(func)
    def traced(*args, **kwargs):
        return func(*args, **kwargs)
    return traced


def trace_module(mod, inputs: dict, **kwargs):
    """trace for several methods: inputs maps method name -> example inputs."""
    _note_once()
    for name, example in inputs.items():
        _run_example(getattr(mod, name), example)
    return mod


def ignore(drop=False, **kwargs):
    """`@ignore` / `@ignore(drop=True)`: the function stays Python (it always is in ember)."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    return fn


def export(fn):
    return fn


def script_method(fn):
    return fn


def interface(obj):
    return obj


def is_scripting() -> bool:
    """False: ember code never runs under TorchScript."""
    return False


def is_tracing() -> bool:
    return False


def annotate(the_type, the_value):
    return the_value


def isinstance(obj, target_type) -> bool:  # noqa: A001 - torch.jit.isinstance
    import typing
    origin = typing.get_origin(target_type)
    if origin is None:
        return builtins.isinstance(obj, target_type)
    if not builtins.isinstance(obj, origin):
        return False
    args = typing.get_args(target_type)
    if origin in (list, tuple, set) and args:
        if origin is tuple and len(args) != len(obj) and not (len(args) == 2
                                                              and args[1] is Ellipsis):
            return False
        elems = args if origin is tuple and args[-1] is not Ellipsis else [args[0]] * len(obj)
        return all(isinstance(o, a) for o, a in zip(obj, elems))
    if origin is dict and args:
        return all(isinstance(k, args[0]) and isinstance(v, args[1]) for k, v in obj.items())
    return True


class _FinalMeta(type):
    def __getitem__(cls, item):
        return item


class Final(metaclass=_FinalMeta):
    """`x: ember.jit.Final[int]`: a constant to TorchScript; a plain annotation here."""


class Attribute:
    def __new__(cls, value, type=None):  # noqa: A002
        return value


class _Future:
    def __init__(self, value):
        self._value = value

    def wait(self):
        return self._value

    def value(self):
        return self._value

    def done(self) -> bool:
        return True


def fork(func, *args, **kwargs) -> _Future:
    """Runs func now (ember has no TorchScript interpreter threads); `wait` gives its result."""
    return _Future(func(*args, **kwargs))


def wait(future):
    return future.wait()


def freeze(mod, preserved_attrs=None, optimize_numerics: bool = True):
    return mod


def optimize_for_inference(mod, other_methods=None):
    return mod


def _script_module_base():
    from ..nn import Module
    return Module


def __getattr__(name):
    if name in ("ScriptModule", "RecursiveScriptModule", "TopLevelTracedModule"):
        return _script_module_base()   # scripted modules are ordinary modules here
    if name in ("ScriptFunction",):
        return type(lambda: None)
    raise AttributeError(f"module 'ember.jit' has no attribute '{name}'")


Error = RuntimeError


def save(m, f, _extra_files=None) -> None:
    raise NotImplementedError("ember.jit.save: ember has no TorchScript archives; save the "
                              "state_dict (ember.save) or export the model (ember.export)")


def load(f, map_location=None, _extra_files=None):
    raise NotImplementedError("ember.jit.load: ember has no TorchScript archives; load a "
                              "state_dict (ember.load) or an exported program (ember.export)")
