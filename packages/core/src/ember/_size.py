"""`ember.Size`: a tuple of sizes (ints, or symbolic sizes under the compiler)."""
from __future__ import annotations

import math


class Size(tuple):
    """The shape of a tensor: `ember.Size([2, 3])`."""

    def numel(self) -> int:
        return math.prod(self)

    def __repr__(self) -> str:
        return f"ember.Size([{', '.join(str(s) for s in self)}])"

    def __getitem__(self, k):
        r = tuple.__getitem__(self, k)
        return Size(r) if isinstance(k, slice) else r

    def __add__(self, other):
        return Size(tuple.__add__(self, tuple(other)))

    def __reduce__(self):
        return (Size, (tuple(self),))


def contiguous_strides(shape) -> tuple:
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc = acc * (max(s, 1) if isinstance(s, int) else s)
    return tuple(reversed(strides))


def normalize_dim(dim: int, ndim: int, op: str = "") -> int:
    """Wrap a negative dim; raise IndexError like PyTorch when out of range."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim + n if dim < 0 else dim


def broadcast_shapes(*shapes) -> tuple:
    """PyTorch's broadcasting of shapes; RuntimeError naming both sizes when they clash."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        off = ndim - len(s)
        for i, d in enumerate(s):
            j = i + off
            o = out[j]
            if o == 1:
                out[j] = d
            elif d != 1 and d != o:
                raise RuntimeError(
                    f"The size of tensor a ({o}) must match the size of tensor b ({d}) at "
                    f"non-singleton dimension {j}")
    return tuple(out)


def collapse_dims(out_shape, strides_list):
    """Drop size-1 dims and merge dims that are contiguous for every operand (the loop nest a
    generated pointwise kernel walks: C++ on CPU, Triton on CUDA). Returns (sizes, [strides per
    operand]) visiting the elements in the same order."""
    dims = [i for i, s in enumerate(out_shape) if s != 1]
    sizes = [out_shape[i] for i in dims]
    sts = [[st[i] for i in dims] for st in strides_list]
    if not sizes:
        return [], [[] for _ in strides_list]
    ms, mst = [sizes[0]], [[s[0]] for s in sts]
    for j in range(1, len(sizes)):
        if all(s[j - 1] == s[j] * sizes[j] for s in sts):
            ms[-1] *= sizes[j]
            for k, s in enumerate(sts):
                mst[k][-1] = s[j]
        else:
            ms.append(sizes[j])
            for k, s in enumerate(sts):
                mst[k].append(s[j])
    return ms, mst


def is_contiguous(shape, stride) -> bool:
    """Whether (shape, stride) is the C-contiguous layout (size-1 dims' strides don't matter)."""
    expected = 1
    for size, st in zip(reversed(shape), reversed(stride)):
        if size != 1 and st != expected:
            return False
        expected *= size
    return True
