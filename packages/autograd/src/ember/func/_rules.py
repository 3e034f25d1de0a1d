"""vmap's batching rules: one per op family, derived from the op entry where it can be.

Each rule gets the physical arguments with this level's batch dim moved to the front (`P`) and
which of them are batched (`flags`), calls ops on them (the calls go below this level) and
returns physical results batched at dim 0. Derived from the entry:
- pointwise formula: broadcast, with batched args padded to the widest logical rank;
- dim arguments (`dim`, `dims`, `dim0`...) of single-tensor ops and views: shift them past
  the batch dim (reductions over all dims name the logical dims);
- decomposition: run it on the batched tensors (its ops are batched one by one);
- otherwise: the fallback loops over the batch and stacks.
Families with written rules: matmul, einsum, cat and the gather/scatter family, views that take
sizes, conv/pool/upsample (batch folded into the op's own batch dim), random ops (randomness=).
"""
from __future__ import annotations

import ember
from ember import _dispatch
from ember._ops import OPS
from ember._random import default_generator
from ember._state import state
from ember._tensor import Tensor

from ._batched import is_batched_at, to_front

__all__ = ["run_rule"]

_call = _dispatch.call
_DIM_NAMES = ("dim", "dims", "dim0", "dim1", "dim2", "dimension")
_RULES: dict = {}          # qualname -> rule(lv, op, args, P, flags)
_CACHE: dict = {}          # id(op) -> rule


class Fallback(Exception):
    """A rule that does not cover this call asks for the loop."""


def run_rule(lv, op, args):
    if "random" in op.tags:
        return _random(lv, op, args)
    rule = _CACHE.get(id(op))
    if rule is None:
        rule = _CACHE[id(op)] = _derive(op)
    if rule is _decomp:
        return _decomp(lv, op, args)
    P, flags = _prep(lv, op, args)
    if op.mutated_idx:
        _check_inplace(op, args, flags)
    try:
        r = rule(lv, op, args, P, flags)
    except Fallback:
        r = _fallback(lv, op, args, P, flags)
    if op.mutated_idx:
        return args[op.mutated_idx[0]]
    return lv.wrap(r)


def _prep(lv, op, args):
    P = list(args)
    flags = [False] * len(args)
    for i in op.tensor_idx:
        if is_batched_at(args[i], lv):
            P[i] = to_front(args[i])
            flags[i] = True
    for i in op.list_idx:
        fl = [is_batched_at(a, lv) for a in args[i]]
        if any(fl):
            P[i] = [to_front(a) if f else a for a, f in zip(args[i], fl)]
            flags[i] = fl
    return P, flags


def _check_inplace(op, args, flags):
    i = op.mutated_idx[0]
    if not flags[i] and any(flags):
        name = op.arg_names[i]
        raise RuntimeError(
            f"vmap: {op.qualname}({name}, *extra_args) is not possible because there exists a "
            f"Tensor `other` in extra_args that has more elements than `{name}`. This happened "
            f"due to `other` being vmapped over but `{name}` not being vmapped over in a vmap. "
            f"Please try to use out-of-place operators instead of {op.qualname}.")


def _derive(op):
    rule = _RULES.get(op.qualname) or _RULES.get(op.name)
    if rule is not None:
        return rule
    if op.inplace_of is not None:
        base = op.inplace_of
        return _pointwise if base.pointwise is not None else _derive_single(base)
    if op.pointwise is not None:
        return _pointwise
    if op.decomp is not None:
        return _decomp
    return _derive_single(op)


def _derive_single(op):
    if len(op.tensor_idx) == 1 and not op.list_idx and op.tensor_idx[0] == 0:
        if any(n in op.arg_names for n in _DIM_NAMES):
            return _dims
        if op.view is not None:
            return _direct
    return _loop


# ---- helpers ------------------------------------------------------------------------------
def _pad(p, n):
    """Insert n size-1 dims right after the batch dim."""
    if n <= 0:
        return p
    s = tuple(p.shape)
    return p.reshape(s[:1] + (1,) * n + s[1:])


def _materialize(lv, x, batched):
    if batched:
        return x
    return x.unsqueeze(0).expand((lv.size,) + tuple(x.shape))


def _shift(d):
    return d + 1 if d >= 0 else d


def _loop(lv, op, args, P, flags):
    raise Fallback


def _fallback(lv, op, args, P, flags):
    """Run the op once per sample and stack the results (any op; as slow as a Python loop)."""
    outs = []
    for b in range(lv.size):
        a = list(P)
        for i in op.tensor_idx:
            if flags[i]:
                a[i] = P[i].select(0, b)
        for i in op.list_idx:
            if flags[i]:
                a[i] = [x.select(0, b) if f else x for x, f in zip(P[i], flags[i])]
        outs.append(_call(op, tuple(a)))
    if op.mutated_idx:
        return None
    return _stack_results(outs, op)


def _stack_results(outs, op):
    first = outs[0]
    if isinstance(first, Tensor):
        return ember.stack(outs)
    if isinstance(first, (tuple, list)):
        cols = [_stack_results([o[k] for o in outs], op) for k in range(len(first))]
        if hasattr(first, "_fields"):
            return type(first)(*cols)
        return type(first)(cols)
    if first is None:
        return None
    raise RuntimeError(f"vmap: {op.qualname} returned a {type(first).__name__}, not a Tensor: "
                       f"vmap can't batch a function whose output depends on tensor values")


# ---- derived rules ------------------------------------------------------------------------
def _pointwise(lv, op, args, P, flags):
    ts = [i for i in op.tensor_idx if isinstance(args[i], Tensor)]
    nd = max(args[i].ndim for i in ts)
    if op.inplace_of is not None:
        nd = args[0].ndim
    for i in ts:
        if flags[i]:
            P[i] = _pad(P[i], nd - args[i].ndim)
    r = _call(op, tuple(P))
    if op.inplace_of is None and len(ts) > 1 and any(flags[i] and args[i].ndim == 0 for i in ts):
        # a batched 0-d tensor is 1-d physically: promote by the logical (per-sample) types
        rdt = _dispatch.pointwise_dtypes(op, [args[i] for i in op.pw_idx], args)[1]
        if r.dtype is not rdt:
            r = r.to(rdt)
    return r


def _decomp(lv, op, args):
    state.modes.append(lv)  # the decomposition's ops meet this level again
    try:
        return op.decomp(*args)
    finally:
        state.modes.pop()


def _direct(lv, op, args, P, flags):
    if any(flags[i] for i in op.tensor_idx[1:]) or any(flags[i] for i in op.list_idx):
        raise Fallback
    return _call(op, tuple(P))


def _dims(lv, op, args, P, flags):
    """Ops of one tensor with dim arguments: positive dims move past the batch dim."""
    if any(flags[i] for i in op.tensor_idx[1:]):
        raise Fallback
    nd = args[0].ndim
    for k, name in enumerate(op.arg_names):
        if name not in _DIM_NAMES:
            continue
        d = P[k]
        if d is None or (isinstance(d, (list, tuple)) and len(d) == 0):
            # "every dim": only reductions that take a list of dims can say it explicitly
            if "reduction" not in op.tags or nd == 0 or not _takes_list(op, k):
                raise Fallback
            P[k] = list(range(1, nd + 1))
        elif isinstance(d, (list, tuple)):
            P[k] = [_shift(x) for x in d]
        else:
            P[k] = _shift(d)
    return _call(op, tuple(P))


def _takes_list(op, k):
    return "[" in op.schema.args[k].type


def _aligned(lv, op, args, P, flags, skip=()):
    """Ops whose tensor args share dims (gather, scatter, cat...): all batched, dims shifted."""
    ts = [i for i in op.tensor_idx if isinstance(args[i], Tensor) and i not in skip]
    for i in ts:
        P[i] = _materialize(lv, P[i], flags[i])
    for i in op.list_idx:
        fl = flags[i] or [False] * len(P[i])
        P[i] = [_materialize(lv, x, f) for x, f in zip(P[i], fl)]
    for k, name in enumerate(op.arg_names):
        if name in _DIM_NAMES:
            if P[k] is None:
                raise Fallback
            P[k] = [_shift(x) for x in P[k]] if isinstance(P[k], (list, tuple)) else _shift(P[k])
    return _call(op, tuple(P))


def _index_dim(lv, op, args, P, flags):
    """index_select/index_add/...: a 1-d index shared by the batch (else the loop)."""
    k = op.arg_names.index("index")
    if flags[k]:
        raise Fallback
    return _aligned(lv, op, args, P, flags, skip=(k,))


# ---- written rules ------------------------------------------------------------------------
def _matmul(lv, op, args, P, flags):
    a, b = args[0], args[1]
    pa, pb = P[0], P[1]
    na, nb = a.ndim, b.ndim
    if na == 0 or nb == 0:
        raise Fallback  # the kernel's error
    if na == 1:
        pa = pa.unsqueeze(-2)
    if nb == 1:
        pb = pb.unsqueeze(-1)
    la, lb = max(na, 2) - 2, max(nb, 2) - 2
    L = max(la, lb)
    if flags[0]:
        pa = _pad(pa, L - la)
    if flags[1]:
        pb = _pad(pb, L - lb)
    r = _call(OPS["matmul"], (pa, pb))
    if na == 1 and nb == 1:
        return r.squeeze(-1).squeeze(-1)
    if nb == 1:
        return r.squeeze(-1)
    if na == 1:
        return r.squeeze(-2)
    return r


def _einsum(lv, op, args, P, flags):
    eq, ts = P[0].replace(" ", ""), P[1]
    fl = flags[1]
    if not fl:
        raise Fallback
    letters = set(eq)
    free = next(c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                if c not in letters)
    lhs, _, rhs = eq.partition("->")
    subs = lhs.split(",")
    if "->" not in eq:
        once = sorted(c for c in set(lhs) if c.isalpha() and lhs.count(c) == 1)
        rhs = ("..." if "..." in lhs else "") + "".join(once)
    subs = [free + s if f else s for s, f in zip(subs, fl)]
    new_eq = ",".join(subs) + "->" + free + rhs
    P[0] = new_eq
    return _call(op, tuple(P))


def _view(lv, op, args, P, flags):
    return P[0].reshape((lv.size,) + tuple(P[1]))


def _expand(lv, op, args, P, flags):
    size = tuple(P[1])
    p = _pad(P[0], len(size) - args[0].ndim)
    return _call(op, (p, (lv.size,) + size, P[2]))


def _permute(lv, op, args, P, flags):
    nd = args[0].ndim
    return P[0].permute([0] + [(d % nd) + 1 for d in P[1]]) if nd else P[0]


def _squeeze(lv, op, args, P, flags):
    d = P[1]
    if d is None:
        d = [i for i, s in enumerate(args[0].shape) if s == 1]
    elif isinstance(d, int):
        d = [d]
    d = [_shift(x) for x in d]
    return _call(op, (P[0], d)) if d else _call(OPS["alias"], (P[0],))


def _t(lv, op, args, P, flags):
    return P[0].transpose(-2, -1) if args[0].ndim == 2 else _call(OPS["alias"], (P[0],))


def _repeat(lv, op, args, P, flags):
    reps = tuple(P[1])
    p = _pad(P[0], len(reps) - args[0].ndim)
    return p.repeat((1,) + reps)


def _index(lv, op, args, P, flags):
    idx = P[1]
    if any(flags[1] or []):
        raise Fallback
    pos = [k for k, t in enumerate(idx) if t is not None]
    if pos and pos[-1] - pos[0] + 1 != len(pos):
        raise Fallback  # split advanced indices move to the front
    return _call(op, (P[0], [None] + list(idx)))


def _fold_batch(keep):
    """Ops with their own batch dim (conv, pools, upsample): fold vmap's batch into it.
    keep(args) = how many trailing dims one sample of the op has (channels + spatial)."""
    def rule(lv, op, args, P, flags):
        if any(flags[i] for i in op.tensor_idx[1:]):
            raise Fallback
        x = P[0]
        k = keep(args)
        shape = tuple(x.shape)
        lead = shape[:len(shape) - k]
        P[0] = x.reshape((-1,) + shape[len(shape) - k:])
        r = _call(op, tuple(P))
        if isinstance(r, tuple):
            return tuple(t.reshape(lead + tuple(t.shape)[1:]) for t in r)
        return r.reshape(lead + tuple(r.shape)[1:])
    return rule


def _layer_norm(lv, op, args, P, flags):
    return _direct(lv, op, args, P, flags)


def _copy_(lv, op, args, P, flags):
    src = P[1]
    if flags[1]:
        src = _pad(src, args[0].ndim - args[1].ndim)
    return _call(op, (P[0], src, P[2]))


for _n in ("gather", "scatter", "scatter_add", "scatter_reduce.two", "select_scatter",
           "slice_scatter", "diagonal_scatter", "cat", "linalg_cross", "take_along_dim"):
    _RULES[_n] = _aligned
for _n in ("index_select", "index_add", "index_copy", "index_fill.int_Scalar"):
    _RULES[_n] = _index_dim
for _n in ("clone", "_to_copy", "contiguous", "nan_to_num", "conj_physical", "angle", "tril",
           "triu", "zeros_like", "ones_like", "empty_like", "full_like", "constant_pad_nd",
           "embedding", "linalg_inv", "linalg_det", "linalg_slogdet", "linalg_cholesky",
           "linalg_qr", "linalg_svd", "linalg_svdvals", "linalg_eigh", "linalg_eigvalsh",
           "linalg_eig", "linalg_eigvals", "native_layer_norm", "fill_", "zero_", "detach",
           "alias", "positive", "real", "imag", "view.dtype", "_pad_index"):
    _RULES[_n] = _direct
for _n, _k in (("max_pool1d_with_indices", 2), ("max_pool2d_with_indices", 3),
               ("max_pool3d_with_indices", 4), ("avg_pool1d", 2), ("avg_pool2d", 3),
               ("avg_pool3d", 4)):
    _RULES[_n] = _fold_batch(lambda a, k=_k: k)
_RULES["convolution"] = _fold_batch(lambda a: a[1].ndim - 1)
for _n in ("_adaptive_avg_pool", "_adaptive_max_pool", "_upsample"):
    _RULES[_n] = _fold_batch(lambda a: len(a[1]) + 1)
_RULES.update({"matmul": _matmul, "einsum": _einsum, "view": _view, "expand": _expand,
               "permute": _permute, "squeeze.dims": _squeeze, "t": _t, "repeat": _repeat,
               "index.Tensor": _index, "copy_": _copy_, "as_strided": _loop})


# ---- random ops ---------------------------------------------------------------------------
def _random(lv, op, args):
    if lv.randomness == "error":
        raise RuntimeError("vmap: called random operation while in randomness error mode. "
                           "Please either use the 'same' or 'different' randomness flags on "
                           "vmap or perform the randomness operation out of vmap")
    P, flags = _prep(lv, op, args)
    if op.mutated_idx:
        _check_inplace(op, args, flags)
        if lv.randomness == "different" and not flags[op.mutated_idx[0]]:
            raise RuntimeError("vmap: Cannot ask for different inplace randomness on an "
                               "unbatched tensor. This will appear like same randomness. If "
                               "this is necessary for your usage, please file an issue with "
                               "functorch.")
    batched = any(flags)
    if lv.randomness == "same":
        if not batched:
            return _call(op, args)
        r = _same_loop(lv, op, args, P, flags)
    elif "factory" in op.tags and "size" in op.arg_names:
        k = op.arg_names.index("size")
        P[k] = (lv.size,) + tuple(P[k])
        r = _call(op, tuple(P))
    elif op.tensor_idx and op.name not in ("multinomial",):
        for i in op.tensor_idx:  # elementwise draws: one per element of the batch
            if isinstance(P[i], Tensor):
                P[i] = _materialize(lv, P[i], flags[i])
                if op.pointwise is None and i != op.tensor_idx[0]:
                    P[i] = _pad(P[i], args[op.tensor_idx[0]].ndim - args[i].ndim)
        if op.name == "normal" and len(op.tensor_idx) == 2:
            nd = max(args[i].ndim for i in op.tensor_idx)
            for i in op.tensor_idx:
                P[i] = _pad(P[i], nd - args[i].ndim)
        r = _call(op, tuple(P))
    else:
        for i in op.tensor_idx:
            if isinstance(P[i], Tensor):
                P[i] = _materialize(lv, P[i], flags[i])
                flags[i] = True
        r = _fallback(lv, op, args, P, flags)
    if op.mutated_idx:
        return args[op.mutated_idx[0]]
    return lv.wrap(r)


def _same_loop(lv, op, args, P, flags):
    """randomness='same': every sample draws from the same generator state."""
    gi = op.arg_names.index("generator") if "generator" in op.arg_names else None
    gen = (P[gi] if gi is not None else None) or default_generator
    start = gen.get_state()
    outs = []
    for b in range(lv.size):
        gen.set_state(start)
        a = list(P)
        for i in op.tensor_idx:
            if flags[i]:
                a[i] = P[i].select(0, b)
        outs.append(_call(op, tuple(a)))
    if op.mutated_idx:
        return None
    return _stack_results(outs, op)
