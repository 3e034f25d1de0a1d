"""Tensor methods that are argument parsing over table ops (`to`, `float()`, operators)."""
from __future__ import annotations

from . import _dtype as D
from ._device import device as Device
from ._tensor import Tensor

__all__ = ["bind_methods"]


def _parse_to(args, kwargs):
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    for a in args:
        if isinstance(a, D.dtype):
            dtype = a
        elif isinstance(a, (str, Device)) or (isinstance(a, int) and not isinstance(a, bool)):
            device = Device(a)
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        else:
            raise TypeError(f"to() received an invalid combination of arguments - got "
                            f"({type(a).__name__})")
    return dtype, (Device(device) if device is not None else None), kwargs


def to(self, *args, **kwargs):
    """`x.to(dtype)`, `x.to(device)`, `x.to(other)`, `x.to(device, dtype)`; returns self when
    nothing changes (unless copy=True)."""
    from ._ops import OPS
    dtype, device, kwargs = _parse_to(args, dict(kwargs))
    copy = kwargs.pop("copy", False)
    non_blocking = kwargs.pop("non_blocking", False)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if dtype is not None and not isinstance(dtype, D.dtype):
        from ._ops.creation import to_dtype
        dtype = to_dtype(dtype)
    if device is not None and device.type == self.device.type and device.index is None:
        device = self.device
    same = (dtype is None or dtype is self.dtype) and (device is None or device == self.device)
    if same and not copy:
        return self
    return OPS["_to_copy"](self, dtype=dtype, device=device, non_blocking=non_blocking)


def _cast(d):
    def m(self, memory_format=None):
        return self.to(d)
    m.__name__ = d.name
    return m


def cpu(self, memory_format=None):
    return self.to("cpu")


def cuda(self, device=None, non_blocking=False, memory_format=None):
    dev = Device("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int)
                                                 else device))
    return self.to(dev, non_blocking=non_blocking)


def _pinning_backend(what):
    from ._device import _BACKENDS
    for b in _BACKENDS.values():
        if b.is_accelerator and b.is_available():
            return b
    raise RuntimeError(f"{what}: cannot access accelerator device when none is available "
                       f"(page-locked host memory needs an accelerator backend, such as "
                       f"ember-devices' cuda, and its device)")


def pin_memory(self, device=None):
    """A copy of this CPU tensor in page-locked host memory (self if it already is there):
    copies from it to the accelerator can be asynchronous (`.to("cuda", non_blocking=True)`)."""
    if self.device.type != "cpu":
        raise RuntimeError(f"cannot pin '{self.device.type}' memory: only dense CPU tensors can "
                           f"be pinned")
    if is_pinned(self):
        return self
    buf = _pinning_backend("pin_memory").pinned_host_empty(self.numel() * self.dtype.itemsize)
    arr = buf.view(self.dtype.np).reshape(tuple(self.shape))
    arr[...] = self._np
    return Tensor._from_np(arr, self.dtype)


def is_pinned(self, device=None) -> bool:
    """Whether this CPU tensor's memory is page-locked (see pin_memory)."""
    if self.device.type != "cpu":
        return False
    from ._device import _BACKENDS
    ptr = self.data_ptr()
    return any(b.is_accelerator and b.host_is_pinned(ptr) for b in _BACKENDS.values())


def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    from ._creation_api import tensor
    return tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                  requires_grad=requires_grad)


def _new_factory(name):
    def m(self, *size, dtype=None, device=None, requires_grad=False, **kw):
        import ember
        if len(size) == 1 and isinstance(size[0], (tuple, list)):
            size = size[0]
        fn = getattr(ember, name)
        args = (size, kw.pop("fill_value")) if name == "full" else (size,)
        if name == "full" and len(size) == 2 and not kw and isinstance(size[0], (tuple, list)):
            args = size
        return fn(*args, dtype=dtype or self.dtype, device=device or self.device,
                  requires_grad=requires_grad)
    m.__name__ = "new_" + name
    return m


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    import ember
    return ember.full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device,
                      requires_grad=requires_grad)


_OPERATORS = {
    "__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "div",
    "__floordiv__": "floor_divide", "__mod__": "remainder", "__pow__": "pow",
    "__matmul__": "matmul", "__and__": "bitwise_and", "__or__": "bitwise_or",
    "__xor__": "bitwise_xor", "__lshift__": "bitwise_left_shift",
    "__rshift__": "bitwise_right_shift", "__eq__": "eq", "__ne__": "ne", "__lt__": "lt",
    "__le__": "le", "__gt__": "gt", "__ge__": "ge", "__neg__": "neg", "__abs__": "abs",
    "__invert__": "__invert__", "__pos__": "positive",
    "__iadd__": "add_", "__isub__": "sub_", "__imul__": "mul_", "__itruediv__": "div_",
    "__ifloordiv__": "floor_divide_", "__imod__": "remainder_", "__ipow__": "pow_",
    "__iand__": "bitwise_and_", "__ior__": "bitwise_or_", "__ixor__": "bitwise_xor_",
    "__ilshift__": "bitwise_left_shift_", "__irshift__": "bitwise_right_shift_",
    "__getitem__": "__getitem__", "__setitem__": "__setitem__",
}
# reflected operators: other <op> self
_REFLECTED = {"__radd__": "add", "__rsub__": "rsub", "__rmul__": "mul", "__rtruediv__": "div",
              "__rfloordiv__": "floor_divide", "__rmod__": "remainder", "__rpow__": "pow",
              "__rmatmul__": "matmul", "__rand__": "bitwise_and", "__ror__": "bitwise_or",
              "__rxor__": "bitwise_xor", "__rlshift__": "bitwise_left_shift",
              "__rrshift__": "bitwise_right_shift"}
_SWAP_EXEMPT = {"rsub"}  # rsub(self, other) already computes other - self


def _reflected(fname):
    def r(self, other):
        import ember
        fn = getattr(ember, fname)
        # pointwise ops take a Python scalar in any position, so `2 - x` is sub(2, x)
        return fn(self, other) if fname in _SWAP_EXEMPT else fn(other, self)
    r.__name__ = fname
    return r


def _rtruediv(self, other):
    """`2 / x` is `x.reciprocal() * 2`, as PyTorch computes it (its values differ from
    div(2, x) in the last bit)."""
    return self.reciprocal() * other


def bind_methods(methods: dict) -> None:
    """Bind the op table's methods, the operators and the parsing methods onto Tensor."""
    for name, fn in methods.items():
        setattr(Tensor, name, fn)
    for dunder, name in _OPERATORS.items():
        fn = methods.get(name)
        if fn is not None:
            setattr(Tensor, dunder, fn)
    for dunder, name in _REFLECTED.items():
        setattr(Tensor, dunder, _reflected(name))
    Tensor.__rtruediv__ = Tensor.__rdiv__ = _rtruediv
    Tensor.to = to
    Tensor.cpu = cpu
    Tensor.cuda = cuda
    Tensor.pin_memory = pin_memory
    Tensor.is_pinned = is_pinned
    from ._tensor_predicates import install
    install(Tensor)
    from ._api import allclose, equal, isclose
    Tensor.isclose, Tensor.allclose, Tensor.equal = isclose, allclose, equal
    for d, names in ((D.float32, ("float",)), (D.float64, ("double",)), (D.float16, ("half",)),
                     (D.bfloat16, ("bfloat16",)), (D.int64, ("long",)), (D.int32, ("int",)),
                     (D.int16, ("short",)), (D.int8, ("char",)), (D.uint8, ("byte",)),
                     (D.bool, ("bool",)), (D.complex64, ("cfloat",)),
                     (D.complex128, ("cdouble",))):
        for n in names:
            setattr(Tensor, n, _cast(d))
    Tensor.new_tensor = new_tensor
    Tensor.new_full = new_full
    for n in ("zeros", "ones", "empty"):
        setattr(Tensor, "new_" + n, _new_factory(n))
    Tensor.__eq__ = methods.get("eq", Tensor.__eq__)
    Tensor.__hash__ = lambda self: id(self)
