"""`ember.func.vmap`: run a per-sample function over a batch (torch.func.vmap's API).

>>> import ember
>>> from ember.func import vmap
>>> vmap(lambda x, y: (x * y).sum())(ember.ones(3, 2), ember.ones(3, 2)).tolist()
[2.0, 2.0, 2.0]
"""
from __future__ import annotations

import functools

import ember
from ember._tensor import Tensor

from ._batched import BatchedTensor, VmapLevel, is_batched_at, to_front
from ._pytree import broadcast_prefix, tree_flatten, tree_unflatten

__all__ = ["vmap"]


def vmap(func, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None):
    """Vectorize `func` over dim `in_dims` of its inputs; outputs batched at `out_dims`."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got "
                         f"{chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs)
    return wrapped


def _fname(func):
    return getattr(func, "__name__", repr(func))


def _batch_size(func, in_dims, leaves, dims):
    sizes = []
    for x, d in zip(leaves, dims):
        if d is None:
            continue
        if not isinstance(x, Tensor):
            raise ValueError(f"vmap({_fname(func)}, in_dims={in_dims}, ...)(<inputs>): Got "
                             f"in_dim={d} for an input but the input is of type "
                             f"{type(x).__name__}. We cannot vmap over non-Tensor arguments, "
                             f"please use None as the respective in_dim")
        if not isinstance(d, int) or not -x.ndim <= d < max(x.ndim, 1) or x.ndim == 0:
            raise ValueError(f"vmap({_fname(func)}, in_dims={in_dims}, ...)(<inputs>): Got "
                             f"in_dim={d} for some input, but that input is a Tensor of "
                             f"dimensionality {x.ndim} so expected in_dim to satisfy "
                             f"-{x.ndim} <= in_dim < {x.ndim}.")
        sizes.append(x.shape[d % x.ndim])
    if not sizes:
        raise ValueError(f"vmap({_fname(func)}, in_dims={in_dims}, ...)(<inputs>): at least one "
                         f"input must be vmapped over (got in_dims={in_dims})")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    return sizes[0]


def _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs):
    if not isinstance(in_dims, (int, tuple)) and in_dims is not None:
        raise ValueError(f"vmap({_fname(func)}, in_dims={in_dims}, ...): expected `in_dims` to "
                         f"be int or a (potentially nested) tuple matching the structure of "
                         f"inputs, got: {type(in_dims)}.")
    leaves, spec = tree_flatten(list(args))
    dims = broadcast_prefix(in_dims if not isinstance(in_dims, tuple) else list(in_dims),
                            list(args), "in_dims")
    size = _batch_size(func, in_dims, leaves, dims)
    if chunk_size is not None and chunk_size < size:
        return _chunked(func, in_dims, out_dims, randomness, chunk_size, leaves, spec, dims,
                        size, kwargs)
    return _run(func, out_dims, randomness, leaves, spec, dims, size, kwargs)


def _run(func, out_dims, randomness, leaves, spec, dims, size, kwargs):
    lv = VmapLevel(size, randomness)
    wrapped = [x if d is None else BatchedTensor.wrap(x, d % x.ndim, lv)
               for x, d in zip(leaves, dims)]
    with lv:
        out = func(*tree_unflatten(wrapped, spec), **kwargs)
    return _unwrap_outputs(func, lv, out, out_dims)


def _unwrap_outputs(func, lv, out, out_dims):
    leaves, spec = tree_flatten(out)
    ods = broadcast_prefix(out_dims if not isinstance(out_dims, tuple) or not isinstance(
        out, tuple) else out_dims, out, "out_dims")
    res = []
    for x, od in zip(leaves, ods):
        if not isinstance(x, Tensor):
            if od is None:
                res.append(x)
                continue
            raise ValueError(f"vmap({_fname(func)}, ...): `{_fname(func)}` must only return "
                             f"Tensors, got type {type(x)}. Did you mean to set out_dims= to "
                             f"None for output?")
        if od is None:
            if is_batched_at(x, lv):
                raise ValueError(f"vmap({_fname(func)}, ...): `{_fname(func)}` can not return a "
                                 f"BatchedTensor when out_dim is None")
            res.append(x)
            continue
        nd = x.ndim + 1
        if not -nd <= od < nd:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                             f"{nd - 1}], but got {od})")
        od %= nd
        if is_batched_at(x, lv):
            p = to_front(x)
        else:  # the same value for every sample
            p = x.unsqueeze(0).expand((lv.size,) + tuple(x.shape))
        res.append(p if od == 0 else p.movedim(0, od))
    return tree_unflatten(res, spec)


def _chunked(func, in_dims, out_dims, randomness, chunk_size, leaves, spec, dims, size,
             kwargs):
    outs = []
    for start in range(0, size, chunk_size):
        n = min(chunk_size, size - start)
        part = [x if d is None else x.narrow(d % x.ndim, start, n) for x, d in zip(leaves, dims)]
        outs.append(_run(func, out_dims, randomness, part, spec, dims, n, kwargs))
    flat = [tree_flatten(o) for o in outs]
    ospec = flat[0][1]
    ods = broadcast_prefix(out_dims if not isinstance(out_dims, tuple) or not isinstance(
        outs[0], tuple) else out_dims, outs[0], "out_dims")
    res = []
    for k, od in enumerate(ods):
        col = [f[0][k] for f in flat]
        res.append(col[0] if od is None else ember.cat(col, od))
    return tree_unflatten(res, ospec)
