"""`ember.nested`: nested (ragged) tensors, as torch.nested: a batch of tensors whose sizes
differ along one dim, with construction, unbind, padding (`to_padded_tensor`), jagged
`values()` / `offsets()` and elementwise arithmetic.

>>> import ember
>>> nt = ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(4, 3)], layout=ember.jagged)
>>> ember.nested.to_padded_tensor(nt * 2, 0.0).shape
ember.Size([2, 4, 3])

The components are kept as separate tensors (nested ops run per component);
`ember.nn.functional`'s linear, activations, softmax, layer_norm, dropout and
scaled_dot_product_attention take nested tensors (see _functional); other ember functions
are routed to the nested tensor by the dispatcher (see _function): pointwise ops and ops
with a dim run per component, others raise as PyTorch's jagged tensors do.
"""
from __future__ import annotations

import functools

import ember
from ember import _dispatch

__all__ = ["NestedTensor", "nested_tensor", "as_nested_tensor", "to_padded_tensor",
           "nested_tensor_from_jagged", "jagged", "strided"]


class _Layout:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"ember.{self.name}"


jagged = _Layout("jagged")
strided = ember.strided


class RaggedDim:
    """The size of a nested tensor's ragged dim (PyTorch prints it as j1)."""

    def __repr__(self):
        return "j1"


_RAGGED = RaggedDim()
_POINTWISE = {"abs", "neg", "relu", "sigmoid", "tanh", "exp", "log", "sin", "cos", "sqrt",
              "rsqrt", "square", "sign", "floor", "ceil", "round", "clamp", "pow", "float",
              "double", "half", "bfloat16", "to", "detach", "clone", "contiguous", "logical_not",
              "reciprocal", "erf", "silu", "exp2", "log1p", "expm1", "sgn", "nan_to_num"}
_DIMMED = {"softmax", "log_softmax", "sum", "mean", "amax", "amin", "cumsum"}


def _check(ts):
    if not ts:
        raise RuntimeError("nested_tensor: expected a non-empty list of tensors")
    d, dt = ts[0].dim(), ts[0].dtype
    for i, t in enumerate(ts):
        if t.dim() != d:
            raise RuntimeError("All Tensors given to nested_tensor must have the same dimension. "
                               f"Found dimension {t.dim()} for Tensor at index {i} and "
                               f"dimension {d} for Tensor at index 0.")
        if t.dtype != dt:
            raise RuntimeError("nested_tensor: all tensors must have the same dtype")


class NestedTensor:
    is_nested = True

    def __init__(self, components, layout=strided):
        self._ts = list(components)
        self.layout = layout

    # ---- structure ---------------------------------------------------------------------------
    dtype = property(lambda self: self._ts[0].dtype)
    device = property(lambda self: self._ts[0].device)
    requires_grad = property(lambda self: any(t.requires_grad for t in self._ts))
    is_sparse = False

    def dim(self) -> int:
        return self._ts[0].dim() + 1

    ndim = property(dim)

    def _size_of(self, d: int):
        if d == 0:
            return len(self._ts)
        sizes = {t.shape[d - 1] for t in self._ts}
        return sizes.pop() if len(sizes) == 1 else None

    def size(self, dim=None):
        if dim is None:
            return self.shape
        d = dim % self.dim()
        s = self._size_of(d)
        if s is None:
            if self.layout is jagged:
                return _RAGGED
            raise RuntimeError(f"Given dimension {dim} is irregular and does not have a size.")
        return s

    @property
    def shape(self):
        if self.layout is not jagged:
            raise RuntimeError("Internal error: NestedTensorImpl doesn't support sizes. "
                               "Please file an issue.")
        return ember.Size(tuple(self.size(d) for d in range(self.dim())))

    def _map(self, fn) -> NestedTensor:
        return NestedTensor([fn(t) for t in self._ts], self.layout)

    def _component_dim(self, dim: int, name: str) -> int:
        d = dim % self.dim()
        if d == 0:
            raise RuntimeError(f"{name}(): not supported along the batch dim of a nested "
                               "tensor")
        return d - 1

    def transpose(self, dim0: int, dim1: int) -> NestedTensor:
        a, b = self._component_dim(dim0, "transpose"), self._component_dim(dim1, "transpose")
        return self._map(lambda t: t.transpose(a, b))

    def unflatten(self, dim: int, sizes) -> NestedTensor:
        d = self._component_dim(dim, "unflatten")
        return self._map(lambda t: t.unflatten(d, sizes))

    def to_padded_tensor(self, padding: float, output_size=None):
        return to_padded_tensor(self, padding, output_size)

    def is_contiguous(self, memory_format=None) -> bool:
        return all(t.is_contiguous() for t in self._ts)

    def unbind(self, dim: int = 0):
        if dim != 0:
            raise RuntimeError("unbind(): nested tensors can only be unbound along dim 0")
        return tuple(self._ts)

    def values(self):
        """The components concatenated along the ragged dim (jagged layout)."""
        return ember.cat(self._ts, 0)

    def offsets(self):
        lengths = [0] + [t.shape[0] for t in self._ts]
        out, acc = [], 0
        for n in lengths:
            acc += n
            out.append(acc)
        return ember.tensor(out, dtype=ember.int64)

    def __len__(self):
        return len(self._ts)

    def __iter__(self):
        return iter(self._ts)

    def __getitem__(self, i):
        if isinstance(i, int):
            return self._ts[i]
        raise NotImplementedError("nested tensors index only with an int (one component)")

    def requires_grad_(self, flag: bool = True):
        for t in self._ts:
            t.requires_grad_(flag)
        return self

    # ---- elementwise -------------------------------------------------------------------------
    def _zip(self, other, fn):
        if isinstance(other, NestedTensor):
            if len(other._ts) != len(self._ts):
                raise RuntimeError("nested tensors must have the same number of components")
            return NestedTensor([fn(a, b) for a, b in zip(self._ts, other._ts)], self.layout)
        return NestedTensor([fn(a, other) for a in self._ts], self.layout)

    def __add__(self, o):
        return self._zip(o, lambda a, b: a + b)

    def __radd__(self, o):
        return self._zip(o, lambda a, b: b + a)

    def __sub__(self, o):
        return self._zip(o, lambda a, b: a - b)

    def __rsub__(self, o):
        return self._zip(o, lambda a, b: b - a)

    def __mul__(self, o):
        return self._zip(o, lambda a, b: a * b)

    def __rmul__(self, o):
        return self._zip(o, lambda a, b: b * a)

    def __truediv__(self, o):
        return self._zip(o, lambda a, b: a / b)

    def __pow__(self, o):
        return self._zip(o, lambda a, b: a ** b)

    def __neg__(self):
        return NestedTensor([-t for t in self._ts], self.layout)

    def __matmul__(self, o):
        return self._zip(o, lambda a, b: a @ b)

    def __getattr__(self, name):
        if name in _POINTWISE:
            def method(*args, **kwargs):
                return NestedTensor([getattr(t, name)(*args, **kwargs) for t in self._ts],
                                    self.layout)
            return method
        if name in _DIMMED:
            def reduce_dim(dim, *args, **kwargs):
                d = dim % self.dim()
                if d == 0:
                    raise RuntimeError(f"{name}(): not supported along the batch dim of a "
                                       "nested tensor")
                return NestedTensor([getattr(t, name)(d - 1, *args, **kwargs)
                                     for t in self._ts], self.layout)
            return reduce_dim
        m = None if name.startswith("_") else getattr(ember.Tensor, name, None)
        if getattr(m, "_opdef", None) is not None:  # any other op's method: see _function
            return functools.partial(m, self)
        raise AttributeError(f"'NestedTensor' object has no attribute '{name}'")

    # ---- the public functions (ember.sin(nt), ember.add(nt, x)): see _function ---------------
    @classmethod
    def __ember_function__(cls, op, args, out):
        from ._function import nested_function
        return nested_function(op, args, out)

    def __lt__(self, o):
        return self._zip(o, lambda a, b: a < b)

    def __le__(self, o):
        return self._zip(o, lambda a, b: a <= b)

    def __gt__(self, o):
        return self._zip(o, lambda a, b: a > b)

    def __ge__(self, o):
        return self._zip(o, lambda a, b: a >= b)

    def __repr__(self):
        body = ",\n".join("  " + repr(t).replace("\n", "\n  ") for t in self._ts)
        return f"nested_tensor([\n{body}\n])"


def _layout(layout):
    return jagged if layout is jagged else strided


def nested_tensor(tensor_list, *, dtype=None, layout=None, device=None,
                  requires_grad: bool = False, pin_memory: bool = False) -> NestedTensor:
    """A nested tensor copying each component (a leaf)."""
    ts = [ember.tensor(t.detach() if isinstance(t, ember.Tensor) else t, dtype=dtype,
                       device=device) for t in tensor_list]
    _check(ts)
    if requires_grad:
        for t in ts:
            t.requires_grad_(True)
    return NestedTensor(ts, _layout(layout))


def as_nested_tensor(ts, dtype=None, device=None, layout=None) -> NestedTensor:
    """A nested tensor from tensors (or a tensor's dim-0 slices), keeping autograd history."""
    if isinstance(ts, NestedTensor):
        return ts
    comps = list(ts.unbind(0)) if isinstance(ts, ember.Tensor) else list(ts)
    comps = [t.to(dtype=dtype, device=device) if (dtype or device) else t for t in comps]
    _check(comps)
    return NestedTensor(comps, _layout(layout))


def nested_tensor_from_jagged(values, offsets=None, lengths=None, jagged_dim=None,
                              min_seqlen=None, max_seqlen=None) -> NestedTensor:
    """Split `values` (sum of lengths, ...) at `offsets` into a jagged nested tensor."""
    if offsets is None:
        if lengths is None:
            raise RuntimeError("nested_tensor_from_jagged(): At least one of offsets or "
                               "lengths is required.")
        offs = [0]
        for n in lengths.tolist():
            offs.append(offs[-1] + int(n))
    else:
        offs = [int(o) for o in offsets.tolist()]
    lens = lengths.tolist() if lengths is not None else [b - a for a, b in zip(offs, offs[1:])]
    comps = [values.narrow(0, a, int(n)) for a, n in zip(offs, lens)]
    return NestedTensor(comps, jagged)


def to_padded_tensor(input: NestedTensor, padding: float, output_size=None):
    """A dense tensor: each component padded (at the end of each dim) to the largest sizes,
    or to output_size; differentiable in the components."""
    F = ember.nn.functional
    ts = input._ts
    nd = ts[0].dim()
    target = [max(t.shape[d] for t in ts) for d in range(nd)]
    if output_size is not None:
        out = list(output_size)
        if len(out) != nd + 1 or out[0] != len(ts) or any(o < s for o, s in zip(out[1:],
                                                                                 target)):
            raise RuntimeError("Value in output_size is less than NestedTensor padded size.")
        target = out[1:]
    padded = []
    for t in ts:
        pads = []
        for d in reversed(range(nd)):
            pads += [0, target[d] - t.shape[d]]
        padded.append(F.pad(t, pads, value=padding) if any(pads) else t)
    return ember.stack(padded, 0)


_dispatch.subclass_function[0] += 1  # calls with a nested argument: NestedTensor decides first

from ._functional import install as _install_functional  # noqa: E402

_install_functional()
