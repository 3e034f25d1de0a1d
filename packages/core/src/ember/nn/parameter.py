"""`ember.nn.Parameter` and `ember.nn.Buffer`: tensors that modules register as their state."""
from __future__ import annotations

from collections import OrderedDict

from .._tensor import Tensor

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer", "is_lazy"]


def _share(cls, data: Tensor) -> Tensor:
    # a new tensor object of class cls over data's storage, detached from its graph
    return cls._make(data._storage, data._shape, data._stride, data._offset, data.dtype,
                     data.device)


class Parameter(Tensor):
    """A Tensor that a Module registers as a parameter when assigned as an attribute.

    It shares storage with `data` and requires grad unless told otherwise.

    >>> import ember
    >>> p = ember.nn.Parameter(ember.zeros(2))
    >>> p.requires_grad
    True
    """

    _is_param = True  # read by Tensor.__deepcopy__

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            from .. import empty
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): argument 'data' must be Tensor, not "
                            f"{type(data).__name__}")
        if hasattr(type(data), "__ember_dispatch__"):  # a DTensor: its own class makes one
            return type(data)._as_parameter(data, requires_grad)
        p = _share(cls, data)
        p.requires_grad = requires_grad
        return p

    def __init__(self, *args, **kwargs):
        pass  # all set in __new__ (Tensor has no __init__ to call)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __str__(self) -> str:
        return self.__repr__()

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.data.clone(), self.requires_grad)
        if self.grad is not None:
            result.grad = self.grad.clone()
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.data, self.requires_grad, OrderedDict()))


def _rebuild_parameter(data, requires_grad, backward_hooks):
    return Parameter(data, requires_grad)


class _BufferMeta(type(Tensor)):
    # isinstance(t, Buffer) is true for plain tensors marked as buffers by Buffer(...)
    def __instancecheck__(cls, instance):
        if cls is Buffer:
            return isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False)
        return super().__instancecheck__(instance)


class Buffer(Tensor, metaclass=_BufferMeta):
    """Marks a tensor as a buffer when assigned to a Module attribute: `self.b = Buffer(t)`.

    Like PyTorch, `Buffer(t)` returns a plain Tensor (detached, sharing t's storage) tagged with
    `persistent`, which Module.__setattr__ reads.
    """

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True):
        if data is None:
            from .. import empty
            data = empty(0)
        t = _share(Tensor, data)
        t._is_buffer = True
        t.persistent = persistent
        return t


class UninitializedParameter(Parameter):
    """A parameter of unknown shape (lazy modules); it is replaced on the first forward."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        from .. import empty
        return super().__new__(cls, empty(0, device=device, dtype=dtype), requires_grad)

    def __repr__(self) -> str:
        return "<UninitializedParameter>"


class UninitializedBuffer(Tensor):
    """A buffer of unknown shape (lazy modules)."""

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        from .. import empty
        t = _share(cls, empty(0, device=device, dtype=dtype))
        t.persistent = persistent
        return t

    def __repr__(self) -> str:
        return "<UninitializedBuffer>"


def is_lazy(param) -> bool:
    return isinstance(param, (UninitializedParameter, UninitializedBuffer))
