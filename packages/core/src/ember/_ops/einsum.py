"""einsum: equation parsing with PyTorch's errors, a numpy kernel, and a vjp that is an einsum.

The equation is first made explicit (ellipses replaced by letters, the output written out), so the
kernel and the vjp both work on plain subscripts. Imported by `linalg.py`.
"""
from __future__ import annotations

import functools
import string

import numpy as np

from .._dispatch import TensorMeta
from . import _einsum_decomp
from ._registry import FUNCTIONS, OPS, complex_vjp, defop

_LETTERS = string.ascii_uppercase + string.ascii_lowercase  # PyTorch's label order (A-Z, a-z)


def _split(equation: str, nops: int):
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) < nops:
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    if len(terms) > nops:
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    pos = 0
    for i, t in enumerate(terms):
        body = t.replace("...", "")
        if "." in body:
            raise RuntimeError(f"einsum(): found '.' for operand {i} that is not part of any "
                               f"ellipsis")
        for ch in body:
            if ch not in _LETTERS:
                raise RuntimeError(f"einsum(): invalid subscript given at index "
                                   f"{pos + t.index(ch)} in the equation string, subscripts must "
                                   f"be in [a-zA-Z]")
        pos += len(t) + 1
    return terms, (rhs if arrow else None)


@functools.lru_cache(maxsize=512)
def normalize(equation: str, ndims: tuple) -> tuple:
    """(equation, operand ranks) -> (input subscripts, output subscripts), ellipses expanded."""
    terms, rhs = _split(equation, len(ndims))
    used = set(equation)
    free = [c for c in _LETTERS if c not in used]
    ell_rank = 0
    for i, (t, n) in enumerate(zip(terms, ndims)):
        k = len(t.replace("...", ""))
        if "..." in t:
            if k > n:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation ({k}) is "
                                   f"more than the number of dimensions ({n}) for operand {i}")
            ell_rank = max(ell_rank, n - k)
        elif k != n:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({k}) does "
                               f"not match the number of dimensions ({n}) for operand {i} and no "
                               f"ellipsis was given")
    ell = "".join(free[:ell_rank])
    subs = []
    for t, n in zip(terms, ndims):
        if "..." in t:
            r = n - len(t.replace("...", ""))
            t = t.replace("...", ell[ell_rank - r:] if r else "")
        subs.append(t)
    if rhs is None:
        counts = {}
        for s in subs:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(c for c in _LETTERS if counts.get(c) == 1 and c not in ell)
    else:
        out = rhs.replace("...", ell)
        for c in out:
            if out.count(c) > 1:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in "
                                   f"the output")
            if not any(c in s for s in subs):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the "
                                   f"equation for any input operand")
    return tuple(subs), out


def _sizes(subs, shapes) -> dict:
    """Letter -> size, with size-1 dims broadcasting as in PyTorch."""
    size = {}
    for i, (s, shape) in enumerate(zip(subs, shapes)):
        mine = {}
        for c, n in zip(s, shape):
            if c in mine and mine[c] != n:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {i} but the "
                                   f"sizes don't match, {n} != {mine[c]}")
            mine[c] = n
            prev = size.get(c)
            if prev is None or prev == 1:
                size[c] = n
            elif n != 1 and n != prev:
                raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {i} which "
                                   f"does not broadcast with previously seen size {prev}")
    return size


def _check(equation, tensors):
    if not tensors:
        raise ValueError("einsum(): must specify the equation string and at least one operand, "
                         "or at least one operand and its subscripts list")
    d0 = tensors[0].dtype
    for t in tensors[1:]:
        if t.dtype != d0:
            from .._dispatch import torch_name
            from .linalg import _dt
            raise RuntimeError(f"expected scalar type {torch_name(_dt(tensors[0]))} but found "
                               f"{torch_name(_dt(t))}")
    subs, out = normalize(equation, tuple(len(t.shape) for t in tensors))
    size = _sizes(subs, [tuple(t.shape) for t in tensors])
    return subs, out, size


@functools.lru_cache(maxsize=512)
def _path(eq, shapes):
    return np.einsum_path(eq, *[np.empty(s, dtype=np.float32) for s in shapes],
                          optimize="optimal" if len(shapes) <= 4 else "greedy")[0]


def _einsum_kernel(equation, tensors, path):
    subs, out, size = _check(equation, tensors)
    from .linalg import upcast
    arrays = upcast(*tensors)
    # broadcast size-1 dims explicitly (zero-copy views): numpy's optimized path wants equal sizes
    arrays = [a if all(size[c] == n for c, n in zip(s, a.shape)) else
              np.broadcast_to(a, tuple(size[c] for c in s)) for a, s in zip(arrays, subs)]
    if len(arrays) == 2:
        r = _pair_by_matmul(arrays[0], arrays[1], subs[0], subs[1], out)
        if r is not None:
            return r.astype(tensors[0].dtype, copy=False)
    eq = ",".join(subs) + "->" + out
    if len(arrays) == 1:
        r = np.einsum(eq, arrays[0])
    else:
        r = np.einsum(eq, *arrays, optimize=_path(eq, tuple(a.shape for a in arrays)))
    return np.asarray(r).astype(tensors[0].dtype, copy=False)


def _sum_alone(x, s, other, out):
    """Sum out the letters that only this operand has (not in the other, not in the output)."""
    alone = tuple(i for i, c in enumerate(s) if c not in out and c not in other)
    if not alone:
        return x, s
    return x.sum(alone), "".join(c for i, c in enumerate(s) if i not in alone)


def _pair_by_matmul(a, b, sa, sb, out):
    """Two-operand einsum as one batched matmul (BLAS), or None when the equation has repeated
    subscripts in an operand. Letters are split into batch (a, b, out), left (a, out), right
    (b, out), contracted (a, b) and summed-alone (one operand only)."""
    if len(set(sa)) != len(sa) or len(set(sb)) != len(sb):
        return None
    a, sa2 = _sum_alone(a, sa, sb, out)
    b, sb = _sum_alone(b, sb, sa, out)
    sa = sa2
    batch = [c for c in out if c in sa and c in sb]
    left = [c for c in out if c in sa and c not in sb]
    right = [c for c in out if c in sb and c not in sa]
    contr = [c for c in sa if c in sb and c not in out]
    size = dict(zip(sa, a.shape))
    size.update(zip(sb, b.shape))
    n = lambda cs: int(np.prod([size[c] for c in cs], dtype=np.int64))  # noqa: E731
    a2 = a.transpose([sa.index(c) for c in batch + left + contr]).reshape(
        (n(batch), n(left), n(contr)))
    b2 = b.transpose([sb.index(c) for c in batch + contr + right]).reshape(
        (n(batch), n(contr), n(right)))
    r = np.matmul(a2, b2).reshape([size[c] for c in batch + left + right])
    order = batch + left + right
    return r.transpose([order.index(c) for c in out])


def _einsum_meta(equation, tensors, path):
    subs, out, size = _check(equation, tensors)
    return TensorMeta(tuple(size[c] for c in out), tensors[0].dtype)


@complex_vjp
def _einsum_vjp(g, result, equation, tensors, path):
    """d/d operand i = einsum(grad, the other operands -> operand i's subscripts), with
    identity matrices for repeated subscripts, ones for letters only operand i sums over, and
    size-1 operands for dims that broadcast."""
    import ember
    subs, out, size = _check(equation, tensors)
    unused = iter(c for c in _LETTERS if c not in size)
    grads = []
    for i, t in enumerate(tensors):
        if not t.requires_grad:
            grads.append(None)
            continue
        others = [(out, g)] + [(s, x.conj() if x.dtype.is_complex else x)
                               for j, (s, x) in enumerate(zip(subs, tensors)) if j != i]
        seen = set().union(*(set(s) for s, _ in others))
        want = []
        for c, n in zip(subs[i], t.shape):
            if n == 1 and size[c] != 1:       # broadcast dim: sum it out into a size-1 dim
                f = next(unused)
                others.append((f, ember.ones(1, dtype=g.dtype, device=g.device)))
                want.append(f)
            elif c in want:                   # repeated subscript: a diagonal
                f = next(unused)
                others.append((c + f, ember.eye(n, dtype=g.dtype, device=g.device)))
                want.append(f)
            else:
                if c not in seen:             # summed by this operand alone: grad broadcasts
                    others.append((c, ember.ones(n, dtype=g.dtype, device=g.device)))
                    seen.add(c)
                want.append(c)
        eq = ",".join(s for s, _ in others) + "->" + "".join(want)
        grads.append(OPS["einsum"](eq, [x for _, x in others]))
    return (grads,)


defop("einsum(str equation, Tensor[] tensors, *, int[]? path=None) -> Tensor", method=False,
      kernels={"cpu": _einsum_kernel}, meta=_einsum_meta, vjp=_einsum_vjp,
      decomp=_einsum_decomp.einsum)


def einsum(*args):
    """`ember.einsum(equation, *operands)`: Einstein summation, as `torch.einsum`.

    Also takes the operands as one list, and the sublist form `einsum(a, [0, 1], b, [1, 2])`.

    >>> import ember
    >>> ember.einsum("ij,jk->ik", ember.ones(2, 3), ember.ones(3, 4)).shape
    ember.Size([2, 4])
    """
    if not args or (isinstance(args[0], str) and len(args) < 2):
        raise ValueError("einsum(): must specify the equation string and at least one operand, "
                         "or at least one operand and its subscripts list")
    if isinstance(args[0], str):
        ops = args[1:]
        if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
            ops = ops[0]
        return OPS["einsum"](args[0], list(ops))
    ops, terms = list(args[0::2]), list(args[1::2])
    out = None
    if len(ops) > len(terms):
        out = ops.pop()
    eq = ",".join(_sublist(t) for t in terms) + ("" if out is None else "->" + _sublist(out))
    return OPS["einsum"](eq, ops)


def _sublist(labels) -> str:
    out = []
    for x in labels:
        if x is Ellipsis:
            out.append("...")
        elif isinstance(x, int) and 0 <= x < 52:
            out.append(string.ascii_letters[x])
        else:
            raise ValueError(f"einsum(): expected subscript to be within the range [0, 52) but "
                             f"got {x}")
    return "".join(out)


FUNCTIONS["einsum"] = einsum
