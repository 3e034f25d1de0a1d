"""User-defined ops in the op table: define a schema, set kernels per device, a fake (meta) kernel
and a derivative. Python custom ops (`custom_op`, `Library`) and C/C++ ops registered through the
stable ABI both land here, so they run through the dispatcher like every other op.

A user op's kernels receive and return Tensors (the tag "tensor_kernel" tells the dispatcher not
to hand CPU kernels numpy arrays, as it does for core's own kernels).
"""
from __future__ import annotations

import inspect

from .._device import device as Device
from .._dispatch import TensorMeta
from .._ops._registry import OPS, OpDef
from .._tensor import Storage, Tensor

__all__ = ["define_op", "undefine_op", "set_kernel", "set_fake", "set_autograd", "user_op",
           "KernelTable"]

_META = Device("meta")
TAGS = frozenset({"tensor_kernel", "custom"})


def _dotted(op: OpDef) -> str:
    return op.qualname.replace("::", ".") + ("" if op.overload else ".default")


class KernelTable(dict):
    """Kernels by device type. `default` (custom_op's own function, a CompositeExplicitAutograd
    kernel) serves every device without its own kernel except meta, which needs a fake."""

    default = None

    def get(self, key, dflt=None):
        k = dict.get(self, key)
        if k is None and key != "meta":
            k = self.default
        return dflt if k is None else k


def define_op(qualified_schema: str, *, tags=()) -> OpDef:
    """Add "ns::name(...) -> ..." to the op table (reachable as ember.ops.ns.name)."""
    ns, sep, _ = qualified_schema.partition("::")
    if not sep or not ns or "(" in ns:
        raise ValueError(f"expected a qualified op name 'namespace::name', got: "
                         f"{qualified_schema.split('(')[0]!r}")
    op = OpDef(qualified_schema, kernels=KernelTable(), tags=TAGS | frozenset(tags))
    if op.qualname in OPS:
        raise RuntimeError(f"Tried to register an operator ({op.qualname}) with the same name and "
                           f"overload name multiple times.")
    op.vjp = _no_autograd(op)
    if op.nret == 0:  # nothing to describe: the fake of an op returning nothing is trivial
        set_fake(op, lambda *args, **kwargs: None)
    else:
        op.kernels["meta"] = _no_fake(op)
    OPS[op.qualname] = op
    if op.overload and op.name not in OPS:
        OPS[op.name] = op
    # PyTorch's spelling of overloads: ember.ops.ns.name.default / ember.ops.ns.name.overload
    base = OPS[op.name]
    name = op.overload or "default"
    if not hasattr(base, name):
        setattr(base, name, op)
    return op


def undefine_op(op: OpDef) -> None:
    for k in (op.qualname, op.name):
        if OPS.get(k) is op:
            del OPS[k]


def user_op(name) -> OpDef:
    """The OpDef of "ns::name[.overload]", a CustomOpDef, or an OpDef (registration targets)."""
    if isinstance(name, OpDef):
        return name
    op = getattr(name, "_opdef", None)
    if isinstance(op, OpDef):
        return op
    if not isinstance(name, str):
        raise TypeError(f"expected an op name 'ns::name', a custom op or an OpDef, got {name!r}")
    op = OPS.get(name[6:] if name.startswith("aten::") else name)  # core's ops: "aten::add"
    if op is None:
        raise RuntimeError(f"No such operator {name}")
    return op


def _plain(a):
    """A kernel sees inputs as PyTorch's kernels do, below autograd: aliases without grad."""
    if a.__class__ is Tensor and (a._requires_grad or a.grad_fn is not None):
        return Tensor._make(a._storage, a._shape, a._stride, a._offset, a.dtype, a.device, a._npc)
    if isinstance(a, list) and any(isinstance(x, Tensor) for x in a):
        return [_plain(x) for x in a]
    return a


def _positional_caller(fn, op: OpDef):
    """fn takes the schema's keyword-only args by keyword; the dispatcher passes schema order."""
    kwonly = [a.name for a in op.schema.args if a.kwonly]
    npos = len(op.schema.args) - len(kwonly)

    def call(*args):
        args = [_plain(a) for a in args]
        return fn(*args[:npos], **dict(zip(kwonly, args[npos:])))
    call.__wrapped__ = fn
    return call


def set_kernel(op: OpDef, device_type: str | None, fn, *, check_aliasing: bool = False) -> None:
    """Kernel for one device type (None: the default for all devices but meta)."""
    if "tensor_kernel" not in op.tags:
        if device_type in (None, "cpu"):
            raise RuntimeError(f"{op.qualname} is one of ember's own ops: its CPU kernel cannot be "
                               f"replaced through ember.library")
    kernel = _positional_caller(fn, op)
    if check_aliasing:
        kernel = _no_alias(op, kernel)
    if device_type is None:
        op.kernels.default = kernel
    elif Device(device_type).type == "meta":
        set_fake(op, fn)
    else:
        op.kernels[Device(device_type).type] = kernel


def set_fake(op: OpDef, fn) -> None:
    """The fake kernel: output metadata from meta inputs (`register_fake`)."""
    op.kernels["meta"] = _positional_caller(fn, op)

    def meta(*args):
        r = op.kernels["meta"](*[_as_meta(a) for a in args])
        return _to_meta(r)
    op.meta = meta


def set_autograd(op: OpDef, backward, setup_context=None) -> None:
    """Derivative as PyTorch's register_autograd: setup_context(ctx, inputs, output) saves what
    backward(ctx, *grads) needs; backward returns one gradient per input (None for non-tensors).
    """
    if not callable(backward):
        raise TypeError(f"register_autograd({op.qualname}): expected backward to be a function, "
                        f"got {type(backward)}")
    diff = op.diff_idx
    n = len(op.schema.args)

    def vjp(grad, result, *args):
        ctx = _Ctx(op, args)
        if setup_context is not None:
            setup_context(ctx=ctx, inputs=tuple(args), output=result)
        grads = backward(ctx, *grad) if isinstance(grad, tuple) else backward(ctx, grad)
        if not isinstance(grads, (tuple, list)):
            grads = (grads,)
        if len(grads) != n:
            raise RuntimeError(f"{op.qualname}: expected the backward function to return one "
                               f"gradient per input ({n}: {', '.join(op.arg_names)}), got "
                               f"{len(grads)}")
        return tuple(grads[i] for i in diff)
    vjp.__qualname__ = f"{op.qualname}.backward"
    op.vjp = vjp
    op.__dict__.pop("_ag_info", None)  # autograd caches what it knows about an op


class _Ctx:
    """The ctx of setup_context/backward: saved tensors and which inputs need a gradient."""

    def __init__(self, op, args):
        self.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        self._saved = ()

    def save_for_backward(self, *tensors) -> None:
        self._saved = tensors

    @property
    def saved_tensors(self) -> tuple:
        return tuple(self._saved)


def _no_autograd(op: OpDef):
    def vjp(grad, result, *args):
        raise RuntimeError(f"Trying to backward through {_dotted(op)} but no autograd formula was "
                           f"registered. Please use register_autograd to add one.")
    vjp.missing = True  # opcheck's test_autograd_registration looks for this
    return vjp


def _no_fake(op: OpDef):
    def fake(*args):
        raise RuntimeError(f"There was no fake impl registered for {op.qualname}. This is "
                           f"necessary for ember.compile/export/fx tracing to work. Please use "
                           f"`ember.library.register_fake` to add an fake impl.")
    return fake


def _no_alias(op: OpDef, kernel):
    def run(*args):
        out = kernel(*args)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        ins = [a for a in args if isinstance(a, Tensor)]
        ins += [t for a in args if isinstance(a, (list, tuple)) for t in a
                if isinstance(t, Tensor)]
        for o in outs:
            if isinstance(o, Tensor) and o.device.type != "meta" and any(
                    o._storage is i._storage for i in ins):
                raise RuntimeError(
                    f"{op.qualname} (with implementation in "
                    f"{inspect.getmodule(getattr(kernel, '__wrapped__', kernel))}): The "
                    f"output of this custom operator (1) must not also be an input to this custom "
                    f"operator and (2) may not alias any inputs to this custom operator or other "
                    f"returns. The most common way to trigger this error is if we have y = "
                    f"custom_op(x) and y and x are the same Tensor. Instead, make the output a "
                    f"clone of the input (y = x.clone()).")
        return out
    return run


def _as_meta(a):
    if isinstance(a, Tensor):
        if a.device.type == "meta":
            return a
        return Tensor._make(Storage(None, _META, 0), a._shape, a._stride, a._offset, a.dtype,
                            _META)
    if isinstance(a, (list, tuple)) and any(isinstance(x, Tensor) for x in a):
        return type(a)(_as_meta(x) for x in a)
    return a


def _to_meta(r):
    if isinstance(r, Tensor):
        return TensorMeta(r._shape, r.dtype, r._stride)
    if isinstance(r, (tuple, list)):
        return tuple(_to_meta(x) for x in r)
    return r
