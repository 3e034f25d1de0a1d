"""Sharding rules by op family, one mesh dim at a time: `rule(ctx, cur, m)` returns candidates
`(placements the DTensor inputs need, output placement(s))`; _dispatch.py picks the cheapest.

Every list ends with the all-Replicate strategy where that is correct, so an input mix without a
better rule still computes the right value (at the price of communication)."""
from __future__ import annotations

import ember

from ._dispatch import DECOMPS, is_partial_sum, register
from ._placements import Partial, Replicate, Shard
from ._redistribute import local_shape

R = Replicate()


def _all_r(ctx, nout=None):
    out = R if nout is None else (R,) * nout
    return ([R] * len(ctx.dts), out)


def _nout(ctx):
    o = ctx.out_meta
    return None if isinstance(o, ember.Tensor) else len(o)


# ---- pointwise ---------------------------------------------------------------------------------
_LINEAR_ONE = {"mul": (0, 1), "div": (0,), "neg": (0,)}  # linear in one (Partial) argument


@register("<pointwise>")
def pointwise(ctx, cur, m):
    out = ctx.out_shape
    on = len(out)
    cands = []
    for k, p in enumerate(cur):
        if not isinstance(p, Shard):
            continue
        sk = ctx.shapes[k]
        od = p.dim + on - len(sk)
        if sk[p.dim] == 1 and out[od] != 1:
            continue
        need = []
        for s in ctx.shapes:
            dj = od - (on - len(s))
            need.append(Shard(dj) if dj >= 0 and s[dj] != 1 else R)
        cands.append((need, Shard(od)))
    part = next((p for p in cur if is_partial_sum(p)), None)
    if part is not None:
        name = ctx.op.name
        all_tensors = len(ctx.dts) == len(ctx.op.tensor_idx)
        if name in ("add", "sub") and all_tensors:
            cands.append(([part] * len(cur), part))
        elif name in _LINEAR_ONE:
            tpos = [i for i in ctx.op.tensor_idx if isinstance(ctx.args[i], ember.Tensor)]
            for k, p in enumerate(cur):
                if p == part and tpos[k] in _LINEAR_ONE[name]:
                    cands.append(([part if j == k else R for j in range(len(cur))], part))
    cands.append(_all_r(ctx))
    return cands


@register("clone", "contiguous", "detach", "alias", "_to_copy", "view.dtype")
def identity(ctx, cur, m):
    return [([cur[0]], cur[0])]


@register("ones_like", "zeros_like", "empty_like", "full_like")
def like(ctx, cur, m):
    # the values do not depend on the input: no communication, a Partial input's shape suffices
    return [([cur[0]], cur[0] if isinstance(cur[0], Shard) else R)]


# ---- reductions --------------------------------------------------------------------------------
_PARTIAL_OF = {"sum": "sum", "mean": "sum", "amax": "max", "amin": "min", "max": "max",
               "min": "min"}


def _red_dims(ctx):
    op, nd = ctx.op, len(ctx.shapes[0])
    names = op.arg_names
    dim = ctx.args[names.index("dim")] if "dim" in names else None
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        dims = set(range(nd))
    else:
        dims = {d % max(nd, 1) for d in ((dim,) if isinstance(dim, int) else dim)}
    keep = bool(ctx.args[names.index("keepdim")]) if "keepdim" in names else False
    return dims, keep


@register("sum", "mean", "amax", "amin", "max", "min", "prod", "all", "any", "max.dim",
          "min.dim", "argmax", "argmin", "var", "std", "logsumexp", "var_mean", "std_mean",
          "count_nonzero")
def reduction(ctx, cur, m):
    dims, keep = _red_dims(ctx)
    nout = _nout(ctx)
    p = cur[0]
    cands = []
    if isinstance(p, Shard):
        if p.dim in dims:
            kind = _PARTIAL_OF.get(ctx.op.qualname if "." in ctx.op.qualname else ctx.op.name)
            if kind is not None and nout is None:
                cands.append(([p], Partial(kind)))
        else:
            od = p.dim if keep else p.dim - sum(1 for d in dims if d < p.dim)
            cands.append(([p], Shard(od) if nout is None else (Shard(od),) * nout))
    elif is_partial_sum(p) and ctx.op.name == "sum":
        cands.append(([p], p))
    cands.append(_all_r(ctx, nout))
    return cands


def _mean_local(ctx, local, outs):
    x = local[0]
    if not any(isinstance(o, Partial) for o in outs):
        return ember._dispatch.call(ctx.op, tuple(local))
    dims, keep = _red_dims(ctx)
    count = 1
    for d in dims:
        count *= ctx.shapes[0][d]
    s = ember.sum(x, dim=sorted(dims), keepdim=keep, dtype=local[3])
    return s / count


register("mean", local=_mean_local)(reduction)


def _norm(x, p="fro", dim=None, keepdim=False, dtype=None):
    """norm on a DTensor in reductions and pointwise ops (a sharded reduced dim becomes a
    Partial sum or max that the next op reduces)."""
    if isinstance(p, str):
        if p != "fro":
            raise NotImplementedError(f"DTensor: norm with p={p!r} is not supported")
        p = 2
    p = 2 if p is None else float(p)
    if dtype is not None:
        x = x.to(dtype)
    dims = list(range(x.dim())) if dim is None else ([dim] if isinstance(dim, int) else
                                                      list(dim)) or list(range(x.dim()))
    a = x.abs()
    if p == float("inf"):
        return a.amax(dims, keepdim=keepdim)
    if p == float("-inf"):
        return a.amin(dims, keepdim=keepdim)
    if p == 0:
        return (x != 0).sum(dims, keepdim=keepdim).to(x.dtype)
    if p == 2:
        return (x * x).sum(dims, keepdim=keepdim).sqrt()
    return a.pow(p).sum(dims, keepdim=keepdim).pow(1.0 / p)


DECOMPS["norm"] = _norm


# ---- matmul ------------------------------------------------------------------------------------
@register("matmul")
def matmul(ctx, cur, m):
    sa, sb = ctx.shapes
    na, nb = len(sa), len(sb)
    pa, pb = cur
    cands = []
    if na >= 2 and nb >= 2:
        on = max(na, nb)
        cands += [([Shard(na - 2), R], Shard(on - 2)), ([R, Shard(nb - 1)], Shard(on - 1)),
                  ([Shard(na - 1), Shard(nb - 2)], Partial())]
        for k, p in enumerate(cur):  # batch dims (broadcast as pointwise)
            nk = (na, nb)[k]
            if isinstance(p, Shard) and p.dim < nk - 2:
                od = p.dim + on - nk
                need = []
                for s in (sa, sb):
                    dj = od - (on - len(s))
                    need.append(Shard(dj) if 0 <= dj < len(s) - 2 and s[dj] != 1 else R)
                cands.append((need, Shard(od)))
    elif na == 1 and nb >= 2:
        cands += [([Shard(0), Shard(nb - 2)], Partial()), ([R, Shard(nb - 1)], Shard(nb - 2))]
    elif na >= 2 and nb == 1:
        cands += [([Shard(na - 1), Shard(0)], Partial()), ([Shard(na - 2), R], Shard(na - 2))]
    elif na == 1 and nb == 1:
        cands.append(([Shard(0), Shard(0)], Partial()))
    if is_partial_sum(pa):
        cands.append(([pa, R], pa))
    if is_partial_sum(pb):
        cands.append(([R, pb], pb))
    cands.append(_all_r(ctx))
    return cands


# ---- nn ----------------------------------------------------------------------------------------
@register("embedding")
def embedding(ctx, cur, m):
    (vw, dw), si = ctx.shapes
    pw, pi = cur
    cands = [([R, Shard(pi.dim)], Shard(pi.dim))] if isinstance(pi, Shard) else []
    cands.append(([Shard(1), R], Shard(len(si))))
    cands.append(_all_r(ctx))
    return cands


@register("embedding_dense_backward")
def embedding_backward(ctx, cur, m):
    sg = ctx.shapes[0]
    pg, pi = cur
    cands = []
    if isinstance(pg, Shard) and pg.dim < len(sg) - 1:
        cands.append(([pg, Shard(pg.dim)], Partial()))
    cands.append(([Shard(len(sg) - 1), R], Shard(1)))
    if is_partial_sum(pg):
        cands.append(([pg, R], pg))
    cands.append(_all_r(ctx))
    return cands


def _batch_shard(ctx, p, nnorm):
    return isinstance(p, Shard) and p.dim < len(ctx.shapes[0]) - nnorm


@register("native_layer_norm")
def layer_norm(ctx, cur, m):
    nnorm = len(ctx.args[1])
    p = cur[0]
    cands = []
    if _batch_shard(ctx, p, nnorm):
        cands.append(([p] + [R] * (len(cur) - 1), (p, p, p)))
    cands.append(_all_r(ctx, 3))
    return cands


@register("native_layer_norm_backward")
def layer_norm_backward(ctx, cur, m):
    nnorm = len(ctx.args[2])
    p = cur[1]  # the input's placement (grad_out, input, mean, rstd share it)
    cands = []
    if _batch_shard(ctx, p, nnorm):
        cands.append(([p] * 4 + [R] * (len(cur) - 4), (p, Partial(), Partial())))
    cands.append(_all_r(ctx, 3))
    return cands


@register("softmax", "log_softmax")
def softmax(ctx, cur, m):
    dim = ctx.args[1] % max(len(ctx.shapes[0]), 1)
    p = cur[0]
    cands = [([p], p)] if isinstance(p, Shard) and p.dim != dim else []
    cands.append(_all_r(ctx))
    return cands


@register("nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward", "mse_loss",
          "mse_loss_backward", "cumsum", "sort", "topk", "index_select", "gather", "index.Tensor")
def replicate_only(ctx, cur, m):
    """Ops whose sharded forms are not written yet: they run on the whole tensor."""
    return [_all_r(ctx, _nout(ctx))]


# ---- views -------------------------------------------------------------------------------------
def _perm_rule(perm_of):
    def rule(ctx, cur, m):
        p = cur[0]
        if isinstance(p, Shard):
            return [([p], Shard(perm_of(ctx).index(p.dim)))]
        return [([p], p)]
    return rule


def _perm_transpose(ctx):
    nd = len(ctx.shapes[0])
    perm = list(range(nd))
    if nd:
        a, b = ctx.args[1] % nd, ctx.args[2] % nd
        perm[a], perm[b] = perm[b], perm[a]
    return perm


def _perm_t(ctx):
    return [1, 0] if len(ctx.shapes[0]) == 2 else list(range(len(ctx.shapes[0])))


def _perm_permute(ctx):
    nd = len(ctx.shapes[0])
    return [d % nd for d in ctx.args[1]]


def _perm_movedim(ctx):
    import numpy as np
    nd = len(ctx.shapes[0])
    return list(np.moveaxis(np.arange(nd), list(ctx.args[1]), list(ctx.args[2])))


register("transpose.int")(_perm_rule(_perm_transpose))
register("t")(_perm_rule(_perm_t))
register("permute")(_perm_rule(_perm_permute))
register("movedim.intlist")(_perm_rule(_perm_movedim))


@register("unsqueeze")
def unsqueeze(ctx, cur, m):
    p = cur[0]
    d = ctx.args[1] % (len(ctx.shapes[0]) + 1)
    return [([p], Shard(p.dim + (p.dim >= d)) if isinstance(p, Shard) else p)]


@register("squeeze.dims")
def squeeze(ctx, cur, m):
    s = ctx.shapes[0]
    dims = ctx.args[1]
    if dims is None:
        gone = {i for i, v in enumerate(s) if v == 1}
    else:
        dims = (dims,) if isinstance(dims, int) else dims
        gone = {d % max(len(s), 1) for d in dims if s[d % max(len(s), 1)] == 1}
    p = cur[0]
    if isinstance(p, Shard):
        if p.dim in gone:
            return [([R], R)]
        return [([p], Shard(p.dim - sum(1 for g in gone if g < p.dim)))]
    return [([p], p)]


def _local_size_arg(idx):
    def fix(ctx, local, need, outs):
        local[idx] = list(local_shape(ctx.out_shape, ctx.mesh, outs))
        return local
    return fix


@register("expand", args=_local_size_arg(1))
def expand(ctx, cur, m):
    s, out = ctx.shapes[0], ctx.out_shape
    lead = len(out) - len(s)
    p = cur[0]
    if isinstance(p, Shard):
        if s[p.dim] == 1 and out[p.dim + lead] != 1:
            return [([R], R)]
        return [([p], Shard(p.dim + lead))]
    return [([p], p)]


def _groups(src, dst):
    """Pairs (input dims, output dims) whose sizes multiply to the same value (a reshape)."""
    out, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        gi, gj = [], []
        pi = pj = 1
        while True:
            if pi == pj and gi and gj:
                break
            if (pi <= pj and i < len(src)) or j >= len(dst):
                if i >= len(src):
                    break
                gi.append(i)
                pi *= src[i]
                i += 1
            else:
                gj.append(j)
                pj *= dst[j]
                j += 1
        while i < len(src) and src[i] == 1 and (j >= len(dst) or dst[j] != 1):
            gi.append(i)
            i += 1
        while j < len(dst) and dst[j] == 1 and (i >= len(src) or src[i] != 1):
            gj.append(j)
            j += 1
        out.append((gi, gj))
    return out


def _view_local(ctx, local, outs):
    # a DTensor is contiguous as a whole, but its local piece may not be (a transposed shard):
    # the local step reshapes (copying where it must)
    return local[0].reshape(local[1])


@register("view", "reshape", "_unsafe_view", args=_local_size_arg(1), local=_view_local)
def view(ctx, cur, m):
    p = cur[0]
    if not isinstance(p, Shard):
        return [([p], p)]
    src, dst = ctx.shapes[0], ctx.out_shape
    n = ctx.mesh.size(m)
    for gi, gj in _groups(src, dst):
        if p.dim not in gi:
            continue
        real_i = [d for d in gi if src[d] != 1]
        real_j = [d for d in gj if dst[d] != 1]
        if not real_i or p.dim != real_i[0] or not real_j:
            break
        if len(real_i) == 1 and len(real_j) == 1:
            return [([p], Shard(real_j[0]))]
        if len(real_i) > 1 and src[p.dim] % n:
            break  # merging an unevenly sharded dim: the local pieces are not chunks
        if len(real_j) > 1 and dst[real_j[0]] % n:
            break  # splitting: the first output dim must take whole shards
        return [([p], Shard(real_j[0]))]
    return [([R], R)]


def _dim_rule(with_dim_removed):
    def rule(ctx, cur, m):
        nd = len(ctx.shapes[0])
        dim = ctx.args[1] % max(nd, 1)
        p = cur[0]
        if isinstance(p, Shard):
            if p.dim == dim:
                return [([R], R)]
            return [([p], Shard(p.dim - (with_dim_removed and p.dim > dim)))]
        return [([p], p)]
    return rule


register("select.int")(_dim_rule(True))
register("slice.Tensor", "narrow")(_dim_rule(False))


@register("cat")
def cat(ctx, cur, m):
    nd = max(len(s) for s in ctx.shapes)
    dim = ctx.args[1] % max(nd, 1)
    first = cur[0]
    cands = []
    if isinstance(first, Shard) and first.dim != dim and all(len(s) == nd for s in ctx.shapes):
        cands.append(([first] * len(cur), first))
    if is_partial_sum(first):
        cands.append(([first] * len(cur), first))
    cands.append(_all_r(ctx))
    return cands
