"""`ember.library.custom_op` and the lower-level `Library`: Python functions as first-class ops.

    @ember.library.custom_op("mylib::scale", mutates_args=())
    def scale(x: Tensor, k: float) -> Tensor:
        return x * k
    scale.register_fake(lambda x, k: ember.empty_like(x))
    scale.register_autograd(lambda ctx, g: (g * ctx.k, None), setup_context=...)
"""
from __future__ import annotations

import weakref

from ._ops import define_op, set_autograd, set_fake, set_kernel, undefine_op, user_op
from ._schema_infer import infer_schema

__all__ = ["CustomOpDef", "custom_op", "Library", "define", "impl", "register_kernel",
           "register_fake", "register_autograd"]


class CustomOpDef:
    """What `custom_op` returns: call it like the function; register kernels on it."""

    def __init__(self, namespace: str, name: str, schema: str, fn):
        self._namespace, self._name, self._init_fn = namespace, name, fn
        self._opdef = define_op(f"{namespace}::{name}{schema}")
        self.__name__ = name
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    @property
    def _qualname(self) -> str:
        return f"{self._namespace}::{self._name}"

    @property
    def _schema(self):
        return self._opdef.schema

    def __repr__(self) -> str:
        return f"<CustomOpDef({self._qualname})>"

    def __call__(self, *args, **kwargs):
        return self._opdef(*args, **kwargs)

    def register_kernel(self, device_types, fn=None, /):
        """Kernel for the given device type(s); usable as a decorator."""
        def inner(f):
            for d in _device_list(device_types):
                set_kernel(self._opdef, d, f, check_aliasing=True)
            return f
        return inner(fn) if fn is not None else inner

    def register_fake(self, fn, /):
        """Fake kernel: the outputs' shapes/dtypes from meta inputs (no data)."""
        set_fake(self._opdef, fn)
        return fn

    def register_autograd(self, backward, /, *, setup_context=None) -> None:
        """backward(ctx, *grads) -> one grad per input; setup_context(ctx, inputs, output)."""
        set_autograd(self._opdef, backward, setup_context)


def _device_list(device_types):
    if device_types is None:
        return [None]
    if isinstance(device_types, str):
        return [device_types]
    return list(device_types)


def _split_name(name: str) -> tuple[str, str]:
    ns, sep, op = name.partition("::")
    if not sep or not ns or not op or "." in op:
        raise ValueError(f"Expected there to be a namespace in {name}, i.e. The operator name "
                         f"should look something like ns::foo")
    return ns, op


def custom_op(name: str, fn=None, /, *, mutates_args, device_types=None, schema: str | None = None):
    """Wrap a Python function as the op `name` ("ns::op"), with its schema inferred from the
    type annotations (or given). Returns a CustomOpDef; the op is also `ember.ops.ns.op`.

    >>> import ember
    >>> @ember.library.custom_op("doctest::twice", mutates_args=())
    ... def twice(x: ember.Tensor) -> ember.Tensor:
    ...     return x * 2
    >>> ember.ops.doctest.twice(ember.ones(2)).tolist()
    [2.0, 2.0]
    """
    def inner(f):
        ns, opname = _split_name(name)
        s = schema if schema is not None else infer_schema(f, mutates_args=mutates_args)
        op = CustomOpDef(ns, opname, s, f)
        for d in _device_list(device_types):
            set_kernel(op._opdef, d, f, check_aliasing=True)
        return op
    return inner(fn) if fn is not None else inner


# ---- the lower level: Library / define / impl --------------------------------------------------
_DEF_NAMESPACES: set = set()
_DISPATCH_KEYS = {"": None, "CompositeExplicitAutograd": None, "CPU": "cpu", "CUDA": "cuda",
                  "Meta": "meta"}


class Library:
    """A namespace to define ops in ("DEF"), add to ("FRAGMENT"), or add kernels to ("IMPL").

    >>> import ember
    >>> lib = ember.library.Library("doctest_lib", "DEF")
    >>> lib.define("neg2(Tensor x) -> Tensor")
    'neg2'
    >>> lib.impl("neg2", lambda x: -2 * x, "CPU")
    >>> ember.ops.doctest_lib.neg2(ember.ones(1)).tolist()
    [-2.0]
    """

    def __init__(self, ns: str, kind: str, dispatch_key: str = ""):
        if kind not in ("IMPL", "DEF", "FRAGMENT"):
            raise ValueError(f"Unsupported kind: {kind}")
        if kind == "DEF":
            if ns in _DEF_NAMESPACES:
                raise RuntimeError(f"Only a single TORCH_LIBRARY can be used to register the "
                                   f"namespace {ns}; please put all of your definitions in a "
                                   f"single TORCH_LIBRARY block.")
            _DEF_NAMESPACES.add(ns)
        self.ns, self.kind, self.dispatch_key = ns, kind, dispatch_key
        self._defined: list = []
        weakref.finalize(self, _destroy, self.ns, self.kind, self._defined)

    def __repr__(self) -> str:
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})>"

    def define(self, schema: str, alias_analysis: str = "", *, tags=()) -> str:
        """Define an op from its schema ("name(Tensor x) -> Tensor"); returns its name."""
        if self.kind == "IMPL":
            raise RuntimeError("define() is not allowed on a Library of kind IMPL; use DEF or "
                               "FRAGMENT")
        if "::" in schema.split("(")[0]:
            raise ValueError(f"define(): the schema {schema!r} must not carry a namespace; the "
                             f"Library's namespace is {self.ns!r}")
        op = define_op(f"{self.ns}::{schema}", tags=tags if isinstance(tags, (tuple, list))
                       else (tags,))
        self._defined.append(op)
        return op.qualname.split("::", 1)[1]

    def impl(self, op_name, fn, dispatch_key: str = "", *, with_keyset: bool = False) -> None:
        """Register fn as op_name's kernel for a dispatch key ("CPU", "CUDA", "Meta",
        "CompositeExplicitAutograd", "CompositeImplicitAutograd")."""
        if with_keyset:
            raise NotImplementedError("Library.impl(with_keyset=True): ember has no dispatch "
                                      "keysets")
        name = op_name if isinstance(op_name, str) else user_op(op_name).qualname
        op = user_op(name if "::" in name else f"{self.ns}::{name}")
        key = dispatch_key or self.dispatch_key
        if key == "CompositeImplicitAutograd":
            op.decomp = fn  # autograd differentiates through it, as in PyTorch
            op.vjp = None
            op.kernels.default = None
            op.__dict__.pop("_ag_info", None)
            return
        if key in ("Autograd", "AutogradCPU", "AutogradCUDA"):
            raise NotImplementedError(f"Library.impl({name}, ..., {key!r}): register the "
                                      f"derivative with ember.library.register_autograd")
        if key not in _DISPATCH_KEYS:
            raise ValueError(f"Library.impl: unknown dispatch key {key!r} (expected one of "
                             f"{', '.join(k for k in _DISPATCH_KEYS if k)}, "
                             f"CompositeImplicitAutograd)")
        set_kernel(op, _DISPATCH_KEYS[key], fn)

    def _destroy(self) -> None:
        _destroy(self.ns, self.kind, self._defined)


def _destroy(ns, kind, defined):
    for op in defined:
        undefine_op(op)
    defined.clear()
    if kind == "DEF":
        _DEF_NAMESPACES.discard(ns)


_FRAGMENTS: dict = {}


def _fragment(ns: str) -> Library:
    lib = _FRAGMENTS.get(ns)
    if lib is None:
        lib = _FRAGMENTS[ns] = Library(ns, "FRAGMENT")
    return lib


def define(qualname: str, schema: str, *, lib: Library | None = None, tags=()) -> None:
    """Define the op `qualname` ("ns::name") with `schema` ("(Tensor x) -> Tensor")."""
    ns, name = qualname.split("::", 1) if "::" in qualname else (None, qualname)
    if ns is None:
        raise ValueError(f"define(): expected a qualified name 'ns::name', got {qualname!r}")
    (lib or _fragment(ns)).define(name + schema, tags=tags)


def impl(qualname: str, types, func=None, *, lib: Library | None = None):
    """Register func as qualname's kernel for device type(s) ("cpu", "cuda"); a decorator too."""
    def inner(f):
        for d in _device_list(types):
            set_kernel(user_op(qualname), _DISPATCH_KEYS.get(d, d), f)
        return f
    return inner(func) if func is not None else inner


def register_kernel(op, device_types, func=None, /, *, lib=None):
    """Kernel for an op defined through ember.library, for the given device type(s)."""
    target = user_op(op)
    def inner(f):  # noqa: E306
        for d in _device_list(device_types):
            set_kernel(target, d, f, check_aliasing=hasattr(op, "_opdef"))
        return f
    return inner(func) if func is not None else inner


def register_fake(op, func=None, /, *, lib=None, _stacklevel: int = 1):
    """Fake (meta) kernel for an op: outputs' shapes and dtypes, no data. A decorator too."""
    target = user_op(op)

    def inner(f):
        set_fake(target, f)
        return f
    return inner(func) if func is not None else inner


def register_autograd(op, backward, /, *, setup_context=None, lib=None) -> None:
    """The derivative of an op: backward(ctx, *grads) returns one gradient per input."""
    set_autograd(user_op(op), backward, setup_context)

