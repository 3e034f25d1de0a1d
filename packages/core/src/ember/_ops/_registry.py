"""The op table: one `OpDef` per op, and the Python API generated from it.

An entry holds the schema, the meta function, kernels per device, an optional pointwise
formula (which yields the numpy kernel and, in other packages, Triton and C++ code), an optional
decomposition, an optional view rule, the vjp, and tags. `defop` registers an entry and binds
`ember.<name>`, `Tensor.<name>` and, for pointwise ops, the in-place `Tensor.<name>_` form.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ._schema import parse_schema

__all__ = ["OpDef", "defop", "OPS", "lookup", "bind_overloads", "complex_vjp", "register_kernel"]

OPS: dict[str, OpDef] = {}          # "add" / "max.dim" / "ns::name" -> OpDef
FUNCTIONS: dict[str, Callable] = {}    # public functions by Python name, bound onto ember
METHODS: dict[str, Callable] = {}      # Tensor methods by name
NN_FUNCTIONAL: dict[str, Callable] = {}


# [dispatch's call_entry, _bind.bind_checked] once imported: decompositions call ops through
# OpDef.__call__ on every step, and an import statement in a function costs about 1 us a call
_CALL: list = []


def _load_call() -> list:
    from .._dispatch import call_entry
    from ._bind import bind_checked
    _CALL[:] = [call_entry, bind_checked]
    return _CALL


@dataclass(eq=False)
class OpDef:
    """One op: everything about it in one place (design.md, "Ops: each op defined once")."""

    schema_text: str
    meta: Callable | None = None        # (*args) -> TensorMeta | tuple[TensorMeta, ...]
    kernels: dict = field(default_factory=dict)   # device type -> kernel
    pointwise: Callable | None = None   # formula over an ops handler: lambda o, x, y: o.add(x, y)
    promote: str = "default"            # pointwise type promotion kind (see _dispatch.py), or
    #                                     a function of the args returning one
    check: Callable | None = None       # pointwise: (common dtype, *args) -> raises bad args
    promote_args: tuple | None = None   # names of the args that take part in promotion
    supports: str = "bifc"              # pointwise: dtype categories accepted (bool/int/float/cplx)
    decomp: Callable | None = None      # the op written in other ops (composite)
    view: Callable | None = None        # (*args) -> (shape, strides, offset): an aliasing view
    vjp: Callable | None = None         # (ctx, *grads) -> grads for the differentiable inputs
    jvp: Callable | None = None
    save: Callable | None = None        # what the vjp needs, picked at record time
    tags: frozenset = frozenset()
    inplace_of: OpDef | None = None   # for add_: the functional op it writes back
    differentiable: tuple | None = None  # arg names the vjp returns grads for (default: tensors)

    def __post_init__(self):
        s = parse_schema(self.schema_text)
        self.schema = s
        self.name = s.name
        self.overload = s.overload
        self.qualname = s.name + (f".{s.overload}" if s.overload else "")
        self.tags = frozenset(self.tags)
        args = s.args
        self.arg_names = tuple(a.name for a in args)
        self.tensor_idx = tuple(i for i, a in enumerate(args) if a.is_tensor)
        self.list_idx = tuple(i for i, a in enumerate(args) if a.is_tensor_list)
        self.mutated_idx = s.mutates
        self.returns_alias = "(a!)" in s.text.split("->")[1]
        self.nret = len(s.returns)
        self.ret_names = tuple(n for _, n in s.returns)
        self.device_idx = self.arg_names.index("device") if "device" in self.arg_names else None
        self.dtype_idx = self.arg_names.index("dtype") if "dtype" in self.arg_names else None
        if self.pointwise is not None:
            names = self.promote_args or tuple(a.name for a in args if a.is_tensor)
            self.pw_idx = tuple(self.arg_names.index(n) for n in names)
            self.pw_other_idx = tuple(i for i in self.tensor_idx if i not in self.pw_idx)
        if self.differentiable is None:
            self.differentiable = tuple(a.name for a in args if a.is_tensor or a.is_tensor_list)
        self.diff_idx = tuple(self.arg_names.index(n) for n in self.differentiable)

    def __repr__(self) -> str:
        return f"<OpDef {self.qualname}>"

    def __getattr__(self, name: str):
        """`ember.ops.aten.max.dim`, `ember.ops.aten.add.default`: an overload by PyTorch's
        name. PyTorch's overloads ember folds into one entry (`add.Tensor`, `add.Scalar`,
        `sum.dim_IntList`) resolve to that entry."""
        if name.startswith("_") or "schema" not in self.__dict__:
            raise AttributeError(f"'OpDef' object has no attribute '{name}'")
        op = OPS.get(f"{self.name}.{name}")
        if op is None and (name == "default" or name[:1].isupper() or name in _FOLDED):
            op = OPS.get(self.name)
        if op is None:
            raise AttributeError(f"'{self.qualname}' has no overload '{name}'")
        return op

    def __reduce__(self):
        # an op pickles (and deep-copies) by name, as torch's OpOverload: it is one per process
        return lookup, (self.qualname,)

    def __call__(self, *args, **kwargs):
        """Call the op by schema order (what `ember.ops.aten.add(x, y)` does)."""
        f = _CALL or _load_call()
        return f[0](self, f[1](self, args, kwargs), kwargs.get("out"))

    def bind(self, args, kwargs) -> tuple:
        """Positional+keyword arguments -> the full positional tuple in schema order, checked
        against the schema as torch.ops checks it (see _bind.py)."""
        return (_CALL or _load_call())[1](self, args, kwargs)


# lower-case PyTorch overload names that name no entry of their own in ember's table
_FOLDED = frozenset({"int", "dim", "dim_IntList", "self", "using_ints", "dims", "float"})


def complex_vjp(fn: Callable) -> Callable:
    """Mark a vjp written in PyTorch's complex convention (grad * conj(f'(x)); real-valued
    functions of complex inputs such as abs): autograd calls it as is for complex tensors.
    An unmarked vjp is the plain transpose g * f'(x), right for real tensors and, once
    autograd conjugates around it (conj(vjp(conj(g)))), for holomorphic ops and real-linear
    ones (views, indexing, sums) on complex tensors."""
    fn.complex_ready = True
    return fn


def saves_outputs(*idx: int) -> Callable:
    """Mark a multi-output op's vjp that reads only outputs `idx` of `out` (the others come as
    None): autograd saves just those, so an in-place write to another output (batch norm's
    result through ReLU(inplace=True)) leaves the graph valid, as PyTorch's saved set does."""
    def mark(fn: Callable) -> Callable:
        fn.saved_outputs = frozenset(idx)
        return fn
    return mark


def lookup(qualname: str) -> OpDef:
    try:
        return OPS[qualname]
    except KeyError:
        raise RuntimeError(f"No such operator {qualname}") from None


def register_kernel(op: OpDef | str, device_type: str, fn: Callable | None = None):
    """Fill an op's kernel slot for a device type: `op.kernels[device_type] = fn` (c10's dispatch
    table, `torch.library.register_kernel`). The only way a device gives an op a kernel: the
    dispatcher looks the slot up, and a device keeps no table of its own. A decorator too.

    fn gets the call's arguments in schema order (Tensors; cpu kernels get numpy arrays) and
    returns the result, or NotImplemented to decline a call it does not handle (a dtype, a
    layout): the dispatcher then applies its rule for a missing kernel (`_dispatch.no_kernel`).

    >>> k = register_kernel("tril", "toy", lambda x, diagonal=0: NotImplemented)
    >>> lookup("tril").kernels.pop("toy") is k
    True
    """
    target = lookup(op) if isinstance(op, str) else op

    def fill(f):
        target.kernels[device_type] = f
        return f
    return fill(fn) if fn is not None else fill


def defop(schema: str, *, function: str | bool | None = True, method: str | bool | None = True,
          functional: str | None = None, functional_inplace: bool = False,
          inplace: bool | None = None, out: bool | None = None,
          aliases: tuple = (), **fields) -> OpDef:
    """Register an op and bind its Python API.

    function / method: bind `ember.<name>` / `Tensor.<name>` (a string renames it, False skips);
    functional: also bind `ember.nn.functional.<name>`; functional_inplace: that function takes
    PyTorch's trailing `inplace=False` (and `F.<name>_` is bound); inplace: bind
    `Tensor.<name>_` (default: pointwise ops); out: accept `out=` (default: functional ops
    returning tensors).
    """
    op = OpDef(schema, **fields)
    OPS[op.qualname] = op
    if op.overload and op.name not in OPS:
        OPS[op.name] = op
    from ._codegen import make_function
    name = op.name
    if out is None:
        out = op.view is None and not op.mutated_idx and op.nret >= 1 and all(
            t == "Tensor" for t, _ in op.schema.returns)
    op.has_out = out
    if function:
        fname = function if isinstance(function, str) else name
        fn = make_function(op, fname, as_method=False, with_out=out)
        FUNCTIONS[fname] = fn
        for a in aliases:
            FUNCTIONS[a] = fn
    if method and op.tensor_idx and op.tensor_idx[0] == 0:
        mname = method if isinstance(method, str) else name
        METHODS[mname] = make_function(op, mname, as_method=True, with_out=False)
        for a in aliases:
            METHODS[a] = METHODS[mname]
    ip = None
    if inplace is None:
        inplace = op.pointwise is not None and op.nret == 1
    if inplace:
        ip = OpDef(_inplace_schema(op), kernels={}, inplace_of=op, tags=op.tags | {"inplace"})
        ip.has_out = False
        OPS[ip.qualname] = ip
        METHODS[ip.name] = make_function(ip, ip.name, as_method=True, with_out=False)
        if function:
            FUNCTIONS[ip.name] = make_function(ip, ip.name, as_method=False, with_out=False)
        for a in aliases:
            METHODS[a + "_"] = METHODS[ip.name]
    if functional:
        NN_FUNCTIONAL[functional] = make_function(
            op, functional, as_method=False, with_out=False,
            inplace_op=ip if functional_inplace else None)
        if functional_inplace:
            NN_FUNCTIONAL[functional + "_"] = make_function(ip, functional + "_",
                                                            as_method=False, with_out=False)
    return op


def bind_overloads(name: str, pick: Callable, *, function: bool = True,
                   method: bool = True) -> None:
    """Bind one public name over several overloads (`max(x)`, `max(x, 0)`, `max(x, y)`).

    The overloads are registered with function=False, method=False; pick(*args, **kwargs) gets
    the call's arguments and returns the qualname of the overload to run."""
    from ._codegen import make_function
    cache: dict = {}

    def make(as_method):
        def fn(*args, **kwargs):
            key = (pick(*args, **kwargs), as_method)
            f = cache.get(key)
            if f is None:
                op = OPS[key[0]]
                f = cache[key] = make_function(op, name, as_method=as_method,
                                               with_out=op.has_out and not as_method)
            return f(*args, **kwargs)
        fn.__name__ = fn.__qualname__ = name
        fn.__module__ = "ember"
        return fn
    if function:
        FUNCTIONS[name] = make(False)
    if method:
        METHODS[name] = make(True)


def _inplace_schema(op: OpDef) -> str:
    s = op.schema
    head = s.text.split("->")[0].strip()
    name = s.name + "_" + (f".{s.overload}" if s.overload else "")
    body = head[head.index("("):]
    body = body.replace("Tensor self", "Tensor(a!) self", 1)
    return f"{name}{body} -> Tensor(a!)"
