"""`ember.library.triton_op` and `wrap_triton` (PyTorch 2.6): a function that launches user
Triton kernels becomes one op of the table. Eagerly the kernels run (on a CUDA tensor's device;
on CPU tensors only under Triton's interpreter, TRITON_INTERPRET=1); traced (make_fx, ember.compile,
export) the op is one node, its output metadata from running the function on meta tensors with
the launches skipped (or from `register_fake`); `register_autograd` makes it differentiable.

    @ember.library.triton_op("mylib::add", mutates_args=())
    def add(x: ember.Tensor, y: ember.Tensor) -> ember.Tensor:
        out = ember.empty_like(x)
        n = out.numel()
        wrap_triton(add_kernel)[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n,
                                                                             BLOCK=64)
        return out
"""
from __future__ import annotations

import os

from .._tensor import Tensor
from ._custom_op import CustomOpDef, _split_name
from ._ops import set_fake, set_kernel
from ._schema_infer import infer_schema

__all__ = ["triton_op", "wrap_triton"]


def triton_op(name: str, fn=None, /, *, mutates_args, schema: str | None = None):
    """Like `custom_op`, for a function whose kernels are user Triton kernels launched through
    `wrap_triton(kernel)[grid](...)`; its fake kernel is the function itself on meta tensors."""
    def inner(f):
        ns, opname = _split_name(name)
        s = schema if schema is not None else infer_schema(f, mutates_args=mutates_args)
        op = CustomOpDef(ns, opname, s, f)
        op._opdef.tags = op._opdef.tags | {"triton_op"}
        set_kernel(op._opdef, None, f, check_aliasing=True)
        set_fake(op._opdef, f)  # wrap_triton skips launches on meta tensors
        return op
    return inner(fn) if fn is not None else inner


def wrap_triton(triton_kernel, /):
    """Make a @triton.jit (or @triton.autotune) kernel launchable on ember tensors:
    `wrap_triton(kernel)[grid](*args, **kwargs)`."""
    if not (hasattr(triton_kernel, "run") and hasattr(triton_kernel, "__getitem__")):
        raise RuntimeError("wrap_triton only works on functions annotated with triton.jit or "
                           "triton.autotune")
    return _Wrapped(triton_kernel)


class _Wrapped:
    """A wrapped kernel: `[grid]` gives its launcher."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __getitem__(self, grid):
        return lambda *args, **kwargs: launch(self.kernel, grid, args, kwargs)

    def __repr__(self) -> str:
        return f"wrap_triton({getattr(self.kernel, '__name__', self.kernel)!r})"


def launch(kernel, grid, args, kwargs):
    """Launch kernel[grid] on the tensors' device; nothing on meta (fake) tensors."""
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
    if any(t.device.type == "meta" or t._storage.data is None for t in tensors):
        return None  # tracing: the fake kernel only describes the outputs
    types = {t.device.type for t in tensors}
    if len(types) > 1:
        raise RuntimeError(f"wrap_triton: the kernel's tensors are on several devices "
                           f"({', '.join(sorted(types))})")
    dev = types.pop() if types else "cuda"
    if dev == "cpu":
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise RuntimeError("wrap_triton: Triton kernels run on CUDA tensors (CPU tensors "
                               "only under Triton's interpreter, TRITON_INTERPRET=1)")
        conv = _HostPtr.of
        return kernel[grid](*[conv(a) for a in args], **{k: conv(v) for k, v in kwargs.items()})
    from .._device import get_backend
    backend = get_backend(dev)
    run = getattr(backend, "launch_user_triton", None)
    if run is None:
        raise RuntimeError(f"wrap_triton: the {dev} device cannot launch Triton kernels")
    return run(kernel, grid, args, kwargs)


class _HostPtr:
    """A CPU tensor's memory posing as a torch tensor for Triton's interpreter."""

    __slots__ = ("addr", "dtype")

    def __init__(self, addr, dtype):
        self.addr, self.dtype = addr, dtype

    @classmethod
    def of(cls, a):
        return cls(a.data_ptr(), a.dtype) if isinstance(a, Tensor) else a

    def data_ptr(self):
        return self.addr

    def untyped_storage(self):
        return self

    def cpu(self):
        return self

    def copy_(self, other):
        return self

    def new_empty(self, *a, **k):
        return _HostPtr(self.addr, self.dtype)

    def set_(self, storage, offset, size, stride):
        self.addr = storage.data_ptr()
        return self

    def storage_offset(self):
        return 0

    def size(self):
        return (1,)

    def stride(self):
        return (1,)
