"""Graph nodes: the `grad_fn` objects autograd records, one per op call, and their hooks.

    y = x * w           y.grad_fn = MulBackward0, next_functions = ((AccumulateGrad, 0), ...)

An `OpNode` runs the op's `vjp` from the op table; `AccumulateGrad` writes into a leaf's `.grad`;
`CopySlices` carries an in-place op on a view back to the view's base.
"""
from __future__ import annotations

import dis
import itertools
import sys
import threading
import weakref

from ember._size import is_contiguous as _is_contiguous
from ember._state import state
from ember._tensor import Tensor
from ember._tensor import c_strides as _c_strides

__all__ = ["Node", "OpNode", "AccumulateGrad", "CopySlices", "TensorInfo", "RemovableHandle",
           "info", "edge_of", "accumulate_grad_node"]

_seq = itertools.count()
# How many threads have anomaly mode on (anomaly_mode keeps it): node creation reads the
# thread-local flag only while this is nonzero
ANOMALY = [0]
# How many saved_tensors_hooks blocks are open in any thread: saving a tensor reads the
# thread-local hook stack only while this is nonzero
SAVED_HOOKS = [0]
# Serializes writes to leaves' `.grad` (and creating a leaf's AccumulateGrad) across threads that
# run backward at once, as PyTorch's per-node mutex does; reentrant so that a hook or a Tensor
# subclass called while it is held may itself run backward
GRAD_LOCK = threading.RLock()

FREED = ("Trying to backward through the graph a second time (or directly access saved tensors "
         "after they have already been freed). Saved intermediate values of the graph are freed "
         "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
         "backward through the graph a second time or if you need to access saved tensors after "
         "calling backward.")


class RemovableHandle:
    """What `register_hook` returns: `.remove()` takes the hook off again."""

    _ids = itertools.count()

    def __init__(self, hooks: dict):
        self.id = next(RemovableHandle._ids)
        self._hooks = weakref.ref(hooks) if hooks is not None else None

    def remove(self) -> None:
        hooks = self._hooks() if self._hooks is not None else None
        if hooks is not None:
            hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _HookDict(dict):
    """A dict that a weakref can point at (handles must not keep hooks alive)."""

    __slots__ = ("__weakref__",)


def add_hook(hooks: _HookDict, fn) -> RemovableHandle:
    h = RemovableHandle(hooks)
    hooks[h.id] = fn
    return h


class TensorInfo:
    """Autograd's per-tensor record (`tensor._ag`): output number, hooks, retain_grad."""

    __slots__ = ("output_nr", "retains_grad", "acc", "post_hooks", "view_version", "acc_edge")

    def __init__(self, output_nr: int = 0):
        self.output_nr = output_nr
        self.retains_grad = False
        self.acc = None          # the leaf's AccumulateGrad node (kept: hooks live on it)
        self.acc_edge = None     # (acc, 0), kept by core's native recording (fastpath_grad.cpp)
        self.post_hooks = None   # post-accumulate-grad hooks (leaves)
        # for a differentiable view: the storage version its grad_fn is current for (an in-place
        # write to the base elsewhere makes it regenerate from the base, as PyTorch does)
        self.view_version = None

    def get(self, key, default=None):  # core's Tensor.retains_grad reads _ag.get(...)
        return getattr(self, key, default)

    def grad_fn_of(self, t):
        """t.grad_fn (core's property asks here): a view's node, regenerated as
        as_strided(base) if the storage was written in place since it was made (as PyTorch
        regenerates it lazily on access)."""
        fn = t._grad_fn
        v = self.view_version
        if fn is not None and v is not None and v != t._storage.version:
            return refresh_view(t, self)
        return fn


def info(t: Tensor) -> TensorInfo:
    i = t._ag
    if i is None:
        i = t._ag = TensorInfo()
    return i


class Node:
    """A backward function (a tensor's `grad_fn`)."""

    __slots__ = ("next_functions", "_seq", "__dict__", "__weakref__")
    # Rarely set per node: class-level defaults keep node creation (one per recorded op) cheap.
    _pre_hooks = None     # fn(grad_outputs) -> new grad_outputs | None
    _hooks = None         # fn(grad_inputs, grad_outputs) -> new grad_inputs | None
    _tensor_hooks = None  # {output_nr: _HookDict} from Tensor.register_hook
    _retain = None        # {output_nr: fn}: retain_grad, run after the tensor hooks
    _trace = None         # forward traceback (anomaly mode)
    _metadata = None

    def __init__(self, next_functions=()):
        self.next_functions = next_functions  # ((node | None, input_nr), ...)
        self._seq = next(_seq)
        if ANOMALY[0] and state.__dict__.get("anomaly"):
            import traceback
            self._trace = traceback.format_stack()[:-3]

    def name(self) -> str:
        return type(self).__name__

    @property
    def metadata(self) -> dict:
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def apply(self, grads: list) -> list:
        raise NotImplementedError

    def release(self) -> None:
        """Free saved tensors after a backward without retain_graph."""

    def register_hook(self, fn) -> RemovableHandle:
        if self._hooks is None:
            self._hooks = _HookDict()
        return add_hook(self._hooks, fn)

    def register_prehook(self, fn) -> RemovableHandle:
        if self._pre_hooks is None:
            self._pre_hooks = _HookDict()
        return add_hook(self._pre_hooks, fn)

    def _tensor_hook_dict(self, nr: int) -> _HookDict:
        if self._tensor_hooks is None:
            self._tensor_hooks = {}
        d = self._tensor_hooks.get(nr)
        if d is None:
            d = self._tensor_hooks[nr] = _HookDict()
        return d

    def __call__(self, *grads):
        out = self.apply(list(grads))
        return out[0] if len(out) == 1 else tuple(out)

    def __repr__(self) -> str:
        return f"<{self.name()} object at {hex(id(self))}>"


_NAMES = {"copy_": "CopyBackwards"}  # PyTorch's exceptions to the rule


def camel_backward(opname: str) -> str:
    """"floor_divide" -> "FloorDivideBackward0" (PyTorch's grad_fn names)."""
    if opname in _NAMES:
        return _NAMES[opname]
    base = opname.split(".")[0].strip("_")
    return "".join(p[:1].upper() + p[1:] for p in base.split("_") if p) + "Backward0"


_META_ATTRS = frozenset(("shape", "_shape", "ndim", "dtype", "device", "dim", "size", "numel",
                         "new_zeros", "new_ones", "new_empty", "new_full", "is_floating_point",
                         "is_complex", "_stride", "_offset", "stride", "storage_offset",
                         "is_contiguous"))
NONE, META, FULL = 0, 1, 2


def used_params(fn) -> tuple | None:
    """How a vjp uses each parameter (by bytecode): NONE, META (only shape/dtype/device: saved
    without the data, like PyTorch saving sizes) or FULL. None: cannot tell (save everything)."""
    code = getattr(fn, "__code__", None)
    if code is None or code.co_flags & 0x08:  # **kwargs: cannot tell
        return None
    # a *rest parameter is left out: the caller counts the arguments it takes as FULL
    params = code.co_varnames[:code.co_argcount]
    use = dict.fromkeys(params, NONE)
    for p in code.co_cellvars:
        if p in use:
            use[p] = FULL
    ins = list(dis.get_instructions(code))
    for k, i in enumerate(ins):
        if "FAST" in i.opname or "DEREF" in i.opname or "CLOSURE" in i.opname:
            names = i.argval if isinstance(i.argval, tuple) else (i.argval,)
            for v in names:
                if v not in use or use[v] == FULL:
                    continue
                nxt = ins[k + 1] if k + 1 < len(ins) and len(names) == 1 else None
                if (nxt is not None and nxt.opname in ("LOAD_ATTR", "LOAD_METHOD")
                        and nxt.argval in _META_ATTRS and i.opname.startswith("LOAD")):
                    use[v] = META
                else:
                    use[v] = FULL
    return tuple(use[p] for p in params)


def read_grads(fn) -> frozenset | None:
    """Which output gradients a multi-output op's vjp reads (`grads[0]` only: {0}), by bytecode;
    None: cannot tell (all). The others need no zeros made for them when they got no gradient."""
    code = getattr(fn, "__code__", None)
    if code is None or code.co_argcount < 1 or code.co_flags & 0x0C:
        return None
    name = code.co_varnames[0]
    if name in code.co_cellvars:
        return None
    ins = list(dis.get_instructions(code))
    idx = set()
    for k, i in enumerate(ins):
        if "FAST" not in i.opname or i.argval != name:
            continue
        nxt = ins[k + 1:k + 3]
        if (not i.opname.startswith("LOAD") or len(nxt) < 2 or nxt[0].opname != "LOAD_CONST"
                or nxt[1].opname != "BINARY_SUBSCR" or type(nxt[0].argval) is not int):
            return None
        idx.add(nxt[0].argval)
    return frozenset(idx)


class MetaOnly:
    """A saved tensor's shape/dtype/device without its data (for vjps that need only those)."""

    __slots__ = ("_shape", "_stride", "_offset", "dtype", "device")

    def __init__(self, t):
        self._shape, self.dtype, self.device = t._shape, t.dtype, t.device
        self._stride, self._offset = t._stride, t._offset

    def stride(self, d=None):
        return self._stride if d is None else self._stride[d]

    def storage_offset(self) -> int:
        return self._offset

    def is_contiguous(self, memory_format=None) -> bool:
        return _is_contiguous(self._shape, self._stride)

    @property
    def shape(self):
        from ember._size import Size
        return Size(self._shape)

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    def size(self, d=None):
        return self.shape if d is None else self._shape[d]

    def numel(self) -> int:
        n = 1
        for s in self._shape:
            n = n * s
        return n

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def is_complex(self) -> bool:
        return self.dtype.is_complex

    def _new(self, fn, size, kw):
        import ember
        kw.setdefault("dtype", self.dtype)
        kw.setdefault("device", self.device)
        return getattr(ember, fn)(*size, **kw)

    def new_zeros(self, *size, **kw):
        return self._new("zeros", size, kw)

    def new_ones(self, *size, **kw):
        return self._new("ones", size, kw)

    def new_empty(self, *size, **kw):
        return self._new("empty", size, kw)

    def new_full(self, size, fill_value, **kw):
        return self._new("full", (size, fill_value), kw)


class _OpInfo:
    """What recording needs about an op, computed once per op."""

    __slots__ = ("name", "vjp", "diff_idx", "list_diff", "use_out", "use_args", "composite",
                 "inplace", "view", "detach", "cwrap", "no_list", "track",
                 "nargs", "out_idx", "grad_idx")

    def __init__(self, op):
        fop = op.inplace_of or op
        self.name = camel_backward(op.name)
        self.vjp = fop.vjp if op.inplace_of is not None else op.vjp
        self.diff_idx = fop.diff_idx
        self.list_diff = tuple(i in op.list_idx for i in self.diff_idx)
        self.no_list = True not in self.list_diff
        self.track = None  # the engine's recorder for this op, generated on first use
        self.nargs = len(op.arg_names)
        # (an op with no differentiable input, as unique, records nothing through its decomp)
        self.composite = (self.vjp is None and op.decomp is not None and op.inplace_of is None
                          and bool(fop.diff_idx))
        self.inplace = op.inplace_of is not None or bool(op.mutated_idx)
        self.view = op.view is not None
        self.detach = op.name == "detach"
        # complex tensors: plain-transpose vjps get conjugated around (see complex_vjp)
        self.cwrap = self.vjp is not None and not getattr(self.vjp, "complex_ready", False)
        # which outputs of a multi-output op the vjp reads (None: all of them)
        self.out_idx = getattr(self.vjp, "saved_outputs", None)
        # which output gradients it reads (None: all): zeros only for those (multi-output ops)
        self.grad_idx = read_grads(self.vjp) if self.vjp is not None else None
        used = used_params(self.vjp) if self.vjp is not None else None
        n = len(op.arg_names)
        if used is None:
            self.use_out, self.use_args = True, (FULL,) * n
        else:
            used = used + (FULL,) * (n + 2 - len(used))
            self.use_out, self.use_args = used[1] != NONE, tuple(used[2:n + 2])
        if self.view and self.vjp is not None:
            # a view is linear in its input: its vjp needs the input's geometry, never its
            # values (as PyTorch saves only sizes), so in-place writes later are fine
            self.use_args = tuple(META if u == FULL and i in op.tensor_idx else u
                                  for i, u in enumerate(self.use_args))


def op_info(op) -> _OpInfo:
    i = op.__dict__.get("_ag_info")
    if i is None:
        i = op._ag_info = _OpInfo(op)
    return i


def accumulate_grad_node(t: Tensor) -> AccumulateGrad:
    i = info(t)
    node = i.acc
    if node is None:
        with GRAD_LOCK:  # two threads recording on one leaf must share its node (and hooks)
            node = i.acc
            if node is None:
                node = i.acc = AccumulateGrad(t)
    return node


def edge_of(t) -> tuple | None:
    """(node, input_nr) that a gradient for t flows into, or None when t needs none."""
    if t.__class__ is not Tensor and not isinstance(t, Tensor):
        return None
    fn = t._grad_fn
    if fn is not None:
        ag = t._ag
        if ag is None:
            return (fn, 0)
        if ag.view_version is not None and ag.view_version != t._storage.version:
            fn = refresh_view(t, ag)
        return (fn, ag.output_nr)
    if t._requires_grad:
        if t._base is not None:  # a view made under no_grad: refused once written since
            t._check_no_grad_view()
        return (accumulate_grad_node(t), 0)
    return None


def refresh_view(t, ag):
    """A view whose base was written in place since: its grad_fn becomes as_strided(base)."""
    base = t._base
    if base is not None and base._requires_grad:
        prev = state.grad_enabled
        state.grad_enabled = True
        try:
            regen = base.as_strided(t._shape, t._stride, t._offset)
        finally:
            state.grad_enabled = prev
        t._grad_fn = regen._grad_fn
        ag.output_nr = 0
    ag.view_version = t._storage.version
    return t._grad_fn


def _same_data(t):
    """A new tensor object over t's data (a subclass that handles its own ops, as DTensor,
    makes its own: `_shallow_copy`)."""
    if hasattr(t.__class__, "__ember_dispatch__"):
        return t._shallow_copy()
    return Tensor._make(t._storage, t._shape, t._stride, t._offset, t.dtype, t.device, t._npc)


class _Saved:
    """A tensor saved for backward with the version it had, checked when unpacked. Under
    `saved_tensors_hooks` the pack hook's result is kept instead (no version check then, as in
    PyTorch) and the unpack hook gives the tensor back."""

    __slots__ = ("t", "version", "is_output", "output_nr", "unpack_hook", "edge")

    def __init__(self, t, is_output=False, output_nr=0):
        self.is_output = is_output
        self.output_nr = output_nr
        self.unpack_hook = None
        hooks = SAVED_HOOKS[0] and state.__dict__.get("saved_hooks")
        if hooks:
            self._pack(t, *hooks[-1])
        else:
            # an op's own output is kept as a new tensor over its data, without the grad_fn:
            # holding the output itself would make output -> node -> saved -> output a cycle
            # that only the garbage collector frees (the activation outlives the step)
            self.t = _same_data(t) if is_output else t
            self.version = t._storage.version

    def _pack(self, t, pack, unpack):
        # where the tensor's gradient flows (an unpacked copy is re-linked there for double
        # backward); the hooks are off while pack runs (its own ops save nothing)
        self.edge = None if self.is_output or not t._requires_grad else edge_of(t)
        prev = state.__dict__.get("saved_hooks")
        state.saved_hooks = None
        try:
            self.t = pack(t)
        finally:
            state.saved_hooks = prev
        self.version = None
        self.unpack_hook = unpack

    def register_hooks(self, pack, unpack) -> None:
        """`grad_fn._raw_saved_x.register_hooks(pack, unpack)`: pack the saved tensor now."""
        if not callable(pack) or not callable(unpack):
            raise TypeError("register_hooks expects callable pack and unpack hooks")
        if self.unpack_hook is not None:
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have "
                               "already been set. Hint: only one pair of hooks is allowed at a "
                               "time.")
        self._pack(self.t, pack, unpack)

    def unpack(self, node):
        if self.unpack_hook is not None:
            return self._unpack_hooked(node)
        t = self.t
        if t._storage.version != self.version:
            raise RuntimeError(_modified_message(t, self, node))
        if self.is_output:
            return self._relink(t, node)
        return t

    def _relink(self, t, node):
        # the output, re-linked to this node so double backward flows through it
        a = _same_data(t)
        if state.grad_enabled:
            a._grad_fn = node
            a._requires_grad = True
            if self.output_nr:
                a._ag = TensorInfo(self.output_nr)
        return a

    def _unpack_hooked(self, node):
        t = self.unpack_hook(self.t)
        if not isinstance(t, Tensor):
            raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but got "
                            f"result of type {type(t).__name__}")
        if self.is_output:
            return self._relink(t, node)
        e = self.edge
        if e is None or t.grad_fn is e[0]:
            return t
        # a copy (save_on_cpu, checkpoint's recomputation) stands for the saved tensor: same
        # requires_grad (vjps read it), same place in the graph (double backward)
        a = _same_data(t)
        a._requires_grad = True
        if isinstance(e[0], AccumulateGrad):
            a._ag = TensorInfo()
            a._ag.acc = e[0]
        else:
            a._grad_fn = e[0]
            if e[1]:
                a._ag = TensorInfo(e[1])
        return a


def _modified_message(t, saved, node) -> str:
    where = ""
    src = node if saved.is_output else t.grad_fn
    if src is not None:
        nr = saved.output_nr if saved.is_output else (t._ag.output_nr if t._ag else 0)
        name = src.name()  # PyTorch 2.13 names the node without its "Backward0" suffix
        for suffix in ("Backward0", "Backward"):
            if name.endswith(suffix):
                name = name[:-len(suffix)]
                break
        where = f", which is output {nr} of {name},"
    return (f"one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [{t.type()} {list(t.shape)}]{where} is at version "
            f"{t._storage.version}; expected version {saved.version} instead. Hint: enable "
            f"anomaly detection to find the operation that failed to compute its gradient, with "
            f"ember.autograd.set_detect_anomaly(True, check_nan=False).")


class OpNode(Node):
    """The backward of one op call: runs `op.vjp(grad, result, *args)`."""

    __slots__ = ("op", "_info", "args", "saved", "in_meta")
    # set on few nodes: class-level defaults keep recording cheap
    out = None       # the saved output(s) when the vjp reads them
    out_meta = None  # multi-output ops: each output's (shape, dtype, device)
    freed = False    # saved tensors released by a backward without retain_graph

    def name(self) -> str:
        return self._info.name

    def __getattr__(self, attr):
        # PyTorch's grad_fn._saved_<arg> (the unpacked tensor or the argument's value),
        # _saved_result, and _raw_saved_<arg> (the SavedTensor: register_hooks)
        raw = attr.startswith("_raw_saved_")
        if not raw and not attr.startswith("_saved_"):
            raise AttributeError(f"'{self.name()}' object has no attribute '{attr}'")
        key = attr[len("_raw_saved_" if raw else "_saved_"):]
        if self.freed:
            raise RuntimeError(FREED)
        if key == "result":
            s = self.out
            if s is None or isinstance(s, tuple):
                raise AttributeError(f"'{self.name()}' object has no attribute '{attr}'")
            return s if raw else s.unpack(self)
        names = self.op.arg_names
        i = names.index(key) if key in names else -1
        for j, s in self.saved or ():
            if j == i:
                if raw:
                    return s
                return [x.unpack(self) if x is not None else None for x in s] \
                    if isinstance(s, list) else s.unpack(self)
        if i < 0 or raw or isinstance(self.args[i], MetaOnly) or (
                self.args[i] is None and i in self.op.tensor_idx):
            raise AttributeError(f"'{self.name()}' object has no attribute '{attr}'")
        return self.args[i]

    def release(self) -> None:
        if self.saved or self.out is not None:
            self.args = self.saved = self.out = None
            self.freed = True

    def apply(self, grads: list) -> list:
        if self.freed:
            raise RuntimeError(FREED)
        inf = self._info
        if inf.vjp is None:
            raise RuntimeError(f"the derivative for '{self.op.name}' is not implemented.")
        args = self.args
        if self.saved:
            args = list(args)
            for i, s in self.saved:
                if isinstance(s, list):
                    args[i] = [x.unpack(self) if x is not None else None for x in s]
                else:
                    args[i] = s.unpack(self)
        out = self.out
        if out is not None:
            out = tuple(s.unpack(self) if s is not None else None for s in out) \
                if isinstance(out, tuple) else out.unpack(self)
        if self.out_meta is None:
            g = grads[0]
        else:  # multi-output: zeros for the outputs that got no gradient
            # (the engine's list stops at the last output that got one: pad it)
            grads = list(grads) + [None] * (len(self.out_meta) - len(grads))
            read = inf.grad_idx
            g = tuple(x if x is not None or m is None or (read is not None and i not in read)
                      else _zeros(m) for i, (x, m) in enumerate(zip(grads, self.out_meta)))
        if inf.cwrap and _complex_involved(g, self.in_meta):
            # PyTorch's convention: grad = g * conj(f'(x)) = conj(conj(g) * f'(x))
            res = inf.vjp(_conj_all(g), out, *args)
            res = _conj_all(tuple(res) if isinstance(res, (tuple, list)) else (res,))
        else:
            res = inf.vjp(g, out, *args)
        if not isinstance(res, (tuple, list)):
            res = (res,)
        flat = []
        for r, is_list in zip(res, inf.list_diff):
            if is_list:
                flat.extend(r if r is not None else [None] * 0)
            else:
                flat.append(r)
        return fix_grads(flat, self.in_meta)


def _complex_involved(g, in_meta) -> bool:
    for x in (g if isinstance(g, tuple) else (g,)):
        if x is not None and x.__class__ is not MetaOnly and x.dtype._cat == 3:
            return True
    for m in in_meta:
        if m is not None and m[1]._cat == 3:
            return True
    return False


def _conj_all(xs):
    """conj of each complex tensor in xs (a tensor, or a tuple/list of them, None kept)."""
    if isinstance(xs, (tuple, list)):
        return type(xs)(_conj_all(x) for x in xs)
    if isinstance(xs, Tensor) and xs.dtype._cat == 3:
        return xs.conj()
    if isinstance(xs, complex):
        return xs.conjugate()
    return xs


def _zeros(meta):
    import ember
    shape, dtype, device = meta
    return ember.zeros(shape, dtype=dtype, device=device)


def fix_grads(flat: list, in_meta) -> list:
    """Sum broadcast grads back to the input's shape and cast to its dtype."""
    out = []
    for g, m in zip(flat, in_meta):
        if g is None or m is None:
            out.append(None)
            continue
        if not isinstance(g, Tensor):
            g = _zeros(m) + g
        shape, dtype, device = m
        if g._shape != shape:
            g = sum_to(g, shape)
        if g.device is not device and g.device != device:
            g = g.to(device)
        if g.dtype is not dtype:
            if dtype.is_complex or not g.dtype.is_complex:
                g = g.to(dtype)
            else:
                g = g.real.to(dtype)
        out.append(g)
    return out


def sum_to(g: Tensor, shape: tuple) -> Tensor:
    """Reduce g (a broadcast of `shape`) back to `shape`."""
    lead = g.ndim - len(shape)
    if lead < 0:  # a vjp may hand back a smaller (broadcastable) grad
        return g.expand(shape)
    ones = [i + lead for i, s in enumerate(shape) if s == 1 and g._shape[i + lead] != 1]
    if ones:
        g = g.sum(list(range(lead)) + ones, keepdim=True)
    elif lead:  # only leading dims: the sum has the shape already (no reshape view after it)
        g = g.sum(list(range(lead)))
    if g._shape != shape:
        g = g.reshape(shape) if g.numel() == _prod(shape) else g.expand(shape)
    return g


def _prod(shape) -> int:
    n = 1
    for s in shape:
        n = n * s
    return n


# references to g while AccumulateGrad.apply runs: the engine's buffer dict and grads list,
# apply's and _stealable's locals, getrefcount's argument; its storage: g's slot and the argument
_ENGINE_REFS = 5
# the same from the native loop (csrc/engine.cpp), which holds g only in the grads list
NATIVE_ENGINE_REFS = 4


def _stealable(g, var, refs=_ENGINE_REFS) -> bool:
    """g may become var.grad as is: a plain contiguous tensor owning its storage, with the
    variable's metadata, that nothing outside the engine references."""
    return (g.__class__ is Tensor and g._grad_fn is None and not g._requires_grad
            and g._base is None and g._ag is None and g._offset == 0
            and g._shape == var._shape and g.dtype is var.dtype and g.device is var.device
            and g._stride == _c_strides(g._shape)
            and sys.getrefcount(g) <= refs and sys.getrefcount(g._storage) <= 2)


class AccumulateGrad(Node):
    """The sink for a leaf: adds incoming gradients into `variable.grad`."""

    __slots__ = ("variable",)

    def __init__(self, variable):
        super().__init__(())
        self.variable = variable

    def name(self) -> str:
        return "ember::autograd::AccumulateGrad"

    def apply(self, grads: list, refs: int = _ENGINE_REFS) -> list:
        # refs: how many references to the gradient its caller holds (see _stealable)
        g = grads[0]
        if g is None:
            return []
        var = self.variable
        with GRAD_LOCK:  # backward may run in several threads into one leaf
            old = var.grad
            if state.grad_enabled:  # create_graph: keep the grad's own graph
                var.grad = g if old is None else old + g
            elif old is None:
                # a clone, unless nothing else can see g (PyTorch steals such grads too): the
                # same gradient object may reach several leaves (`x + y`), or a hook kept it
                var.grad = g if _stealable(g, var, refs) else g.detach().clone()
            else:  # in place, even into a grad that has a graph (create_graph before), as
                old.add_(g)  # PyTorch's AccumulateGrad does outside grad mode
        ag = var._ag
        if ag is not None and ag.post_hooks:
            for h in list(ag.post_hooks.values()):
                h(var)
        return []


class CopySlices(Node):
    """An in-place op `fn` applied to a view of `base`: routes the view's part of the base's
    gradient through fn and the rest to the base's previous history (PyTorch's CopySlices)."""

    __slots__ = ("fn", "base_meta", "view_geom")

    def __init__(self, base_edge, fn: Node, base: Tensor, view: Tensor):
        super().__init__((base_edge or (None, 0),) + tuple(fn.next_functions[1:]))
        self.fn = fn
        self.base_meta = (base._shape, base.dtype, base.device)
        self.view_geom = (view._shape, view._stride, view._offset - base._offset)

    def name(self) -> str:
        return "CopySlices"

    def release(self) -> None:
        self.fn.release()

    def apply(self, grads: list) -> list:
        g = grads[0]
        result = g.contiguous().clone()
        size, stride, off = self.view_geom
        gslice = result.as_strided(size, stride, off)
        res = self.fn.apply([gslice.clone()])
        if res and res[0] is not None:
            gslice.copy_(res[0])
        else:
            gslice.zero_()
        return [result] + list(res[1:])


class FunctionNode(Node):
    """Placeholder base for custom autograd Functions (see function.py)."""

    __slots__ = ()
