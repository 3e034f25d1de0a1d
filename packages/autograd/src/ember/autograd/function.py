"""`ember.autograd.Function`: user-defined ops with their own backward (PyTorch's API).

>>> import ember
>>> class Square(ember.autograd.Function):
...     @staticmethod
...     def forward(x):
...         return x * x
...     @staticmethod
...     def setup_context(ctx, inputs, output):
...         ctx.save_for_backward(inputs[0])
...     @staticmethod
...     def backward(ctx, g):
...         (x,) = ctx.saved_tensors
...         return 2 * x * g
>>> x = ember.tensor([3.], requires_grad=True)
>>> Square.apply(x).backward()
>>> x.grad.tolist()
[6.0]
"""
from __future__ import annotations

import functools

from ember._state import state
from ember._tensor import Tensor

from ._graph import FREED, Node, TensorInfo, _same_data, _Saved, edge_of, fix_grads

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "once_differentiable",
           "InplaceFunction", "NestedIOFunction"]


class FunctionCtx:
    """What forward/setup_context get as `ctx`: save tensors and flags for backward."""

    def save_for_backward(self, *tensors) -> None:
        self._to_save = tensors

    def save_for_forward(self, *tensors) -> None:
        self._to_save_fwd = tensors

    def mark_dirty(self, *tensors) -> None:
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_diff = tensors

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


class BackwardCFunction(Node, FunctionCtx):
    """The graph node of one Function.apply call; it is also the `ctx` passed around."""

    _forward_cls = None

    def name(self) -> str:
        return type(self).__name__

    @property
    def saved_tensors(self) -> tuple:
        saved = self.__dict__.get("_saved")
        if saved is None:
            if self.__dict__.get("_freed"):
                raise RuntimeError(FREED)
            return tuple(self.__dict__.get("_to_save") or ())
        return tuple(s.unpack(self) if isinstance(s, _Saved) else s for s in saved)

    @property
    def saved_variables(self) -> tuple:
        return self.saved_tensors

    def release(self) -> None:
        if self.__dict__.get("_saved"):
            self._saved = None
            self._freed = True

    def apply(self, grads: list) -> list:
        cls = self._forward_cls
        metas = self._out_meta
        grads = list(grads) + [None] * (len(metas) - len(grads))
        if self.materialize_grads:
            import ember
            grads = [g if g is not None or m is None else
                     ember.zeros(m[0], dtype=m[1], device=m[2]) for g, m in zip(grads, metas)]
        res = cls.backward(self, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        n = self._n_inputs
        if len(res) != n:
            # PyTorch allows extra trailing Nones
            if len(res) > n and all(r is None for r in res[n:]):
                res = res[:n]
            else:
                raise RuntimeError(f"function {self.name()} returned an incorrect number of "
                                   f"gradients (expected {n}, got {len(res)})")
        flat = [res[i] for i in self._tensor_pos]
        for i, (g, m) in enumerate(zip(flat, self._in_meta)):
            if g is not None and m is not None and isinstance(g, Tensor) \
                    and tuple(g._shape) != tuple(m[0]):
                try:
                    from ember._size import broadcast_shapes
                    ok = broadcast_shapes(g._shape, m[0]) == tuple(g._shape)
                except RuntimeError:
                    ok = False
                if not ok:
                    raise RuntimeError(f"Function {self.name()} returned an invalid gradient at "
                                       f"index {i} - got {list(g._shape)} but expected shape "
                                       f"compatible with {list(m[0])}")
        return fix_grads(flat, self._in_meta)


class _FunctionMeta(type):
    """Gives each Function subclass its node class, named `<Name>Backward` as in PyTorch."""

    def __init__(cls, name, bases, attrs):
        cls._backward_cls = type(name + "Backward", (BackwardCFunction,),
                                 {"_forward_cls": cls})
        super().__init__(name, bases, attrs)


class Function(FunctionCtx, metaclass=_FunctionMeta):
    """Base class for custom differentiable functions: define forward, backward and (new style)
    setup_context, then call `MyFn.apply(*args)`."""

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode "
                                  "AD.")

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is "
                           "deprecated. Please use new-style autograd function with static "
                           "forward method. (Example: https://pytorch.org/docs/stable/"
                           "autograd.html#torch.autograd.Function)")

    @classmethod
    def apply(cls, *args, **kwargs):
        return _apply(cls, args, kwargs)


def _apply(cls, args, kwargs):
    node = cls._backward_cls.__new__(cls._backward_cls)
    Node.__init__(node)
    node.materialize_grads = True
    node.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
    st = state
    grad_mode = st.grad_enabled
    new_style = cls.setup_context is not Function.setup_context
    st.grad_enabled = False
    try:
        if new_style:
            out = cls.forward(*args, **kwargs)
            cls.setup_context(node, args, out)
        else:
            out = cls.forward(node, *args, **kwargs)
    finally:
        st.grad_enabled = grad_mode
    tensor_pos = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
    edges = [edge_of(args[i]) if grad_mode else None for i in tensor_pos]
    record = grad_mode and any(e is not None for e in edges)
    single = not isinstance(out, tuple)
    outs = [out] if single else list(out)
    dirty = {id(t) for t in node.__dict__.get("_dirty", ())}
    non_diff = {id(t) for t in node.__dict__.get("_non_diff", ())}
    inputs = {id(a) for a in args if isinstance(a, Tensor)}
    metas = []
    for nr, o in enumerate(outs):
        if not isinstance(o, Tensor):
            metas.append(None)
            continue
        if id(o) in inputs and id(o) not in dirty:
            # an input returned unchanged: the output is a new tensor object aliasing it
            o = outs[nr] = _same_data(o)
        diff = record and id(o) not in non_diff and o.dtype._cat >= 2
        metas.append((o._shape, o.dtype, o.device) if diff else None)
        if not diff:
            if id(o) in non_diff:
                o._requires_grad = False
            continue
        if id(o) in dirty and o.grad_fn is None and o._requires_grad:
            raise RuntimeError("a leaf Variable that requires grad has been used in an in-place "
                               "operation.")
        o._grad_fn = node
        o._requires_grad = True
        if nr or o._ag is not None:
            if o._ag is None:
                o._ag = TensorInfo(nr)
            o._ag.output_nr = nr
    if record:
        node.next_functions = tuple(e if e is not None else (None, 0) for e in edges)
        node._n_inputs = len(args)
        node._tensor_pos = tensor_pos
        node._in_meta = [(args[i]._shape, args[i].dtype, args[i].device)
                         if e is not None else None for i, e in zip(tensor_pos, edges)]
        node._out_meta = metas
        to_save = node.__dict__.get("_to_save")
        if to_save is not None:
            node._saved = [_Saved(t) if isinstance(t, Tensor) else t for t in to_save]
            node._to_save = None
    return outs[0] if single else tuple(outs)


def once_differentiable(fn):
    """Decorate a backward that is not itself differentiable: it runs under no_grad."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        from ember._grad_mode import no_grad
        with no_grad():
            return fn(ctx, *args)
    return wrapper


class InplaceFunction(Function):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


class NestedIOFunction(Function):
    pass
