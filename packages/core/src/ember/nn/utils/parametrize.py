"""Parametrizations, as `torch.nn.utils.parametrize`: `module.weight` becomes a property that
computes `f(original)` from a parameter kept at `module.parametrizations.weight.original`.

>>> import ember
>>> from ember.nn.utils import parametrize
>>> class Sym(ember.nn.Module):
...     def forward(self, X):
...         return X.triu() + X.triu(1).mT
>>> m = parametrize.register_parametrization(ember.nn.Linear(3, 3), "weight", Sym())
>>> bool((m.weight == m.weight.mT).all()), type(m).__name__
(True, 'ParametrizedLinear')
"""
from __future__ import annotations

import collections.abc
import copyreg
from contextlib import contextmanager
from copy import deepcopy

import ember
from ember._tensor import Tensor

from ..modules.container import ModuleDict, ModuleList
from ..modules.module import Module
from ..parameter import Parameter

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized",
           "remove_parametrizations", "type_before_parametrizations",
           "transfer_parametrizations_and_params"]

_cache_enabled = 0
_cache: dict = {}


@contextmanager
def cached():
    """Inside, each parametrized tensor is computed once and reused (e.g. a weight used at
    every step of an RNN)."""
    global _cache, _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register_parameter_or_buffer(module, name, X) -> None:
    if isinstance(X, Parameter):
        module.register_parameter(name, X)
    else:
        module.register_buffer(name, X)


def _maybe_set(dest: Tensor, src: Tensor) -> None:
    """dest takes src's data (PyTorch's `dest.set_(src)`), keeping dest's identity."""
    dest.data = src


def _check_same(what, got, want, unsafe_hint):
    for attr in ("dtype", "shape"):
        g, w = getattr(got, attr), getattr(want, attr)
        if g != w:
            raise ValueError(f"{what} may not change the {attr} of the tensor{unsafe_hint}.\n"
                             f"unparametrized {attr}: {w}\nparametrized {attr}: {g}")


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the `original` tensor(s) they
    read (`original0`, `original1`, ... when right_inverse returns several)."""

    def __init__(self, modules, original, unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        with ember.no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (Tensor, collections.abc.Sequence)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors "
                             f"(list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change "
                                 f"the dtype.\noriginal.dtype: {original.dtype}\n"
                                 f"right_inverse(original).dtype: {new.dtype}")
            with ember.no_grad():
                _maybe_set(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, orig_i in enumerate(new):
                if not isinstance(orig_i, Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of "
                                     "tensors (list, tuple...). Got element "
                                     f"{i} of the sequence with type {type(orig_i).__name__}.")
                if isinstance(original, Parameter):
                    orig_i = Parameter(orig_i, original.requires_grad)
                orig_i.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", orig_i)
        if not self.unsafe:
            Z = self()
            if not isinstance(Z, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(Z).__name__}.")
            _check_same("Registering a parametrization", Z, original,
                        ", unless `unsafe` flag is enabled")

    def right_inverse(self, value: Tensor) -> None:
        """Assigning `module.weight = value` stores right_inverse(value) as the original(s)."""
        with ember.no_grad():
            for module in reversed(self):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not "
                                       "implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError("`right_inverse` should return a tensor. Got "
                                     f"{type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype "
                                     f"{value.dtype} while `original` has dtype "
                                     f"{self.original.dtype}")
                _maybe_set(self.original, value)
                return
            if not isinstance(value, collections.abc.Sequence):
                raise ValueError("'right_inverse' must return a sequence of tensors. Got "
                                 f"{type(value).__name__}.")
            if len(value) != self.ntensors:
                raise ValueError("'right_inverse' must return a sequence of tensors of length "
                                 f"{self.ntensors}. Got a sequence of length {len(value)}.")
            for i, tensor in enumerate(value):
                original_i = getattr(self, f"original{i}")
                if original_i.dtype != tensor.dtype:
                    raise ValueError(f"Tensor {i} returned by `right_inverse` has dtype "
                                     f"{tensor.dtype} while `original{i}` has dtype "
                                     f"{original_i.dtype}")
                _maybe_set(original_i, tensor)

    def forward(self) -> Tensor:
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in list(self)[1:]:
            x = module(x)
        return x


def _inject_new_class(module: Module) -> None:
    """Give `module` its own subclass (ParametrizedLinear, ...) to hang the properties on."""
    cls = module.__class__

    def default_deepcopy(self, memo):
        obj = memo.get(id(self))
        if obj is not None:
            return obj
        replica = self.__new__(self.__class__)
        memo[id(self)] = replica
        replica.__dict__ = deepcopy(self.__dict__, memo)
        for slot in copyreg._slotnames(self.__class__):
            if hasattr(self, slot):
                setattr(replica, slot, deepcopy(getattr(self, slot), memo))
        return replica

    def getstate(self):
        raise RuntimeError("Serialization of parametrized modules is only supported through "
                           "state_dict(). See:\nhttps://pytorch.org/tutorials/beginner/"
                           "saving_loading_models.html#saving-loading-a-general-checkpoint-"
                           "for-inference-and-or-resuming-training")
    dct = {"__getstate__": getstate}
    if not hasattr(cls, "__deepcopy__"):
        dct["__deepcopy__"] = default_deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), dct)


def _inject_property(module: Module, tensor_name: str) -> None:
    assert not hasattr(module, tensor_name)

    def get_parametrized(self) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        if not _cache_enabled:
            return parametrization()
        key = (id(module), tensor_name)
        tensor = _cache.get(key)
        if tensor is None:
            tensor = _cache[key] = parametrization()
        return tensor

    def set_original(self, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def _check_stacked(module, tensor_name, parametrization):
    """A parametrization added on top of another must keep the tensor's dtype and shape."""
    Y = getattr(module, tensor_name)
    X = parametrization(Y)
    if not isinstance(X, Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(X).__name__}.")
    _check_same("Registering a parametrization", X, Y,
                ", unless the `unsafe` flag is enabled")
    if hasattr(parametrization, "right_inverse"):
        try:
            Z = parametrization.right_inverse(X)
        except NotImplementedError:
            return
        if not isinstance(Z, Tensor):
            raise ValueError("parametrization.right_inverse must return a tensor. Got: "
                             f"{type(Z).__name__}")
        _check_same("parametrization.right_inverse", Z, Y,
                    ", unless the `unsafe` flag is enabled")


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Replace `module.<tensor_name>` by `parametrization(original)`; the original tensor lives
    on at `module.parametrizations[tensor_name].original`."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            _check_stacked(module, tensor_name, parametrization)
        module.parametrizations[tensor_name].append(parametrization)
        module.parametrizations[tensor_name].unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        parametrizations = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = parametrizations
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    parametrizations = getattr(module, "parametrizations", None)
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str,
                            leave_parametrized: bool = True) -> Module:
    """Undo register_parametrization: `tensor_name` becomes a plain parameter (or buffer) again,
    holding the parametrized value (leave_parametrized) or the original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    parametrizations = module.parametrizations[tensor_name]
    if parametrizations.is_tensor:
        original = parametrizations.original
        if leave_parametrized:
            with ember.no_grad():
                t = getattr(module, tensor_name)
                _maybe_set(original, t)
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                             "that is parametrized in terms of a sequence of tensors.")
        t = getattr(module, tensor_name)
        original = Parameter(t.detach()) if t.requires_grad else t
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class before register_parametrization gave it a Parametrized subclass."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(from_module: Module, to_module: Module,
                                         tensor_name: str | None = None) -> Module:
    """Copy from_module's parametrizations (and their originals) onto to_module."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        for fn in from_module.parametrizations[name]:
            register_parametrization(to_module, name, fn)
        src, dst = from_module.parametrizations[name], to_module.parametrizations[name]
        if hasattr(src, "original"):
            dst.original = src.original
        else:
            i = 0
            while hasattr(src, f"original{i}"):
                setattr(dst, f"original{i}", getattr(src, f"original{i}"))
                i += 1
    return to_module
