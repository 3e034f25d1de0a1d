"""Ops on DTensors: sharding propagation, redistribution of inputs, local compute, wrapping.

Core's `execute` hands any op with a DTensor argument to `dispatch` (below autograd, so autograd
records DTensor ops and their vjps run here too). For each mesh dim independently, the op's rule
(`_rules.py`) lists candidate strategies `(input placements, output placement(s))`; the cheapest
one (cost: bytes that would move) wins, the inputs are redistributed to it, the op runs on the
local pieces and the results are wrapped with the global shapes the op's meta gives on meta
tensors. An op without a rule runs its decomposition (whose ops dispatch here again); otherwise
NotImplementedError names the op and the placements: never a silently wrong local result.
"""
from __future__ import annotations

import ember
from ember import _dispatch as core
from ember._tensor import Tensor

from ._placements import Partial, Replicate, Shard
from ._redistribute import redistribute_local

__all__ = ["dispatch", "register", "Ctx"]

RULES: dict = {}        # op name -> rule(ctx, placements of the DTensor inputs on mesh dim m, m)
LOCAL: dict = {}        # op name -> fn(ctx, local args, output placements per mesh dim) -> result
ARGS: dict = {}         # op name -> fn(ctx, local args, inputs' placements, outputs') -> args
DECOMPS: dict = {}      # op name -> fn(*args): the op in other ops on DTensors (or NotImplemented)
_IMPLICIT = [0]         # >0 while a decomposition runs: plain tensors it makes count as Replicate


def register(*names, local=None, args=None):
    """Decorator: `rule` for ops `names`; `local` replaces the local compute, `args` rewrites
    global-size arguments (view sizes, expand sizes) to local ones."""
    def deco(rule):
        for n in names:
            RULES[n] = rule
            if local is not None:
                LOCAL[n] = local
            if args is not None:
                ARGS[n] = args
        return rule
    return deco


class Ctx:
    """What a rule sees: the op, its args (DTensors in place), the DTensor inputs' global shapes
    in argument order and, lazily, the outputs' global shapes."""

    def __init__(self, op, args, dts, mesh):
        self.op, self.args, self.dts, self.mesh = op, args, dts, mesh
        self.shapes = [tuple(d._shape) for d in dts]
        self._out = None

    @property
    def out_meta(self):
        if self._out is None:
            self._out = _meta_call(self.op, self.args)
        return self._out

    @property
    def out_shape(self):
        o = self.out_meta
        return tuple(o.shape) if isinstance(o, Tensor) else None


def _is_dt(a) -> bool:
    return getattr(a.__class__, "__ember_dispatch__", None) is not None


def _flat_positions(op, args):
    """(index, list index or None) of every tensor argument, in argument order."""
    pos = []
    for i in sorted(op.tensor_idx + op.list_idx):
        if i in op.list_idx:
            pos.extend((i, j) for j, a in enumerate(args[i] or ()) if isinstance(a, Tensor))
        elif isinstance(args[i], Tensor):
            pos.append((i, None))
    return pos


def _get(args, p):
    i, j = p
    return args[i] if j is None else args[i][j]


def _set(args, p, v):
    i, j = p
    if j is None:
        args[i] = v
    else:
        args[i] = list(args[i])
        args[i][j] = v


def _meta(a):
    if isinstance(a, Tensor):
        return ember.empty(tuple(a._shape), dtype=a.dtype, device="meta")
    if isinstance(a, (list, tuple)):
        return type(a)(_meta(x) for x in a)
    return a


def _meta_call(op, args):
    with ember.no_grad():
        return core.call(op, tuple(_meta(a) for a in args))


def _describe(ctx) -> str:
    return ", ".join(f"{list(s)}:{tuple(d.placements)}" for s, d in zip(ctx.shapes, ctx.dts))


def _cost(cur, need, numel) -> float:
    if cur == need:
        return 0.0
    if isinstance(cur, Replicate):
        return 0.1 * numel  # a local slice (or zeros): no communication
    return float(numel)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _choose(ctx, rule):
    """Per mesh dim, the cheapest candidate: (needed placements per input, outputs)."""
    n_in = len(ctx.dts)
    need = [[None] * ctx.mesh.ndim for _ in range(n_in)]
    outs = []
    for m in range(ctx.mesh.ndim):
        cur = [d.placements[m] for d in ctx.dts]
        cands = rule(ctx, cur, m)
        if not cands:
            raise NotImplementedError(
                f"DTensor: no sharding strategy for {ctx.op.qualname} with inputs "
                f"{_describe(ctx)} on mesh dim {m}")
        best = min(cands, key=lambda c: sum(
            _cost(a, b, _numel(s)) for a, b, s in zip(cur, c[0], ctx.shapes)))
        for k in range(n_in):
            need[k][m] = best[0][k]
        outs.append(best[1])
    return [tuple(n) for n in need], outs


def _wrap_out(ctx, result, outs):
    """Local result(s) -> DTensors with the rule's output placements and meta's global shapes."""
    from ._dtensor import DTensor
    meta = ctx.out_meta
    if isinstance(result, Tensor):
        return DTensor._wrap(result, ctx.mesh, tuple(outs), tuple(meta.shape))
    if isinstance(result, (tuple, list)):
        vals = []
        for k, (r, mt) in enumerate(zip(result, meta)):
            if isinstance(r, Tensor):
                ps = tuple(o[k] if isinstance(o, (tuple, list)) else o for o in outs)
                vals.append(DTensor._wrap(r, ctx.mesh, ps, tuple(mt.shape)))
            else:
                vals.append(r)
        if isinstance(result, list):
            return vals
        return type(result)(*vals) if hasattr(result, "_fields") else tuple(vals)
    return result


def _promote_plain(op, args, mesh):
    """Plain tensors beside DTensors: 0-d ones (and, inside a decomposition, any: the constants
    it makes) count as Replicate; others are an error, as in PyTorch."""
    from ._dtensor import DTensor
    args = list(args)
    for p in _flat_positions(op, args):
        a = _get(args, p)
        if not _is_dt(a):
            if a.dim() != 0 and not _IMPLICIT[0]:
                raise RuntimeError(
                    f"{op.qualname}: got mixed ember.Tensor and DTensor, need to convert all "
                    "ember.Tensor to DTensor before calling distributed operators!")
            _set(args, p, DTensor._wrap(a, mesh, (Replicate(),) * mesh.ndim, a._shape))
    return args


def dispatch(op, args, out=None):
    """DTensor's `__ember_dispatch__`: see the module docstring."""
    if out is not None:
        raise NotImplementedError(f"{op.qualname}: out= is not supported with DTensor")
    if op.inplace_of is not None or op.name == "copy_":
        return _inplace(op, args)
    if "random" in op.tags or op.name in _FILLS:
        return _whole(op, args)
    dts = [_get(args, p) for p in _flat_positions(op, args)]
    mesh = next(d.device_mesh for d in dts if _is_dt(d))
    for d in dts:
        if _is_dt(d) and d.device_mesh is not mesh and d.device_mesh.shape != mesh.shape:
            raise RuntimeError(f"{op.qualname}: DTensor inputs on different meshes")
    key = op.qualname if op.qualname in RULES else op.name
    if key in DECOMPS:  # (may decline: NotImplemented)
        _IMPLICIT[0] += 1
        try:
            r = DECOMPS[key](*args)
        finally:
            _IMPLICIT[0] -= 1
        if r is not NotImplemented:
            return r
    rule = RULES.get(key)
    if rule is None and op.pointwise is not None and "random" not in op.tags:
        rule = RULES["<pointwise>"]
    if rule is None:
        if op.decomp is not None and "random" not in op.tags:
            _IMPLICIT[0] += 1
            try:
                return op.decomp(*args)
            finally:
                _IMPLICIT[0] -= 1
        ctx = Ctx(op, args, [d for d in dts if _is_dt(d)], mesh)
        raise NotImplementedError(
            f"DTensor: operator {op.qualname} has no sharding rule (inputs {_describe(ctx)})")
    args = _promote_plain(op, args, mesh)
    pos = _flat_positions(op, args)
    ctx = Ctx(op, tuple(args), [_get(args, p) for p in pos], mesh)
    need, outs = _choose(ctx, rule)
    local = list(args)
    for p, d, ps in zip(pos, ctx.dts, need):
        _set(local, p, redistribute_local(d._local_tensor, mesh, d.placements, ps))
    if key in ARGS:
        local = ARGS[key](ctx, local, need, outs)
    with ember.no_grad():
        fn = LOCAL.get(key)
        r = fn(ctx, local, outs) if fn is not None else core.call(op, tuple(local))
    return _wrap_out(ctx, r, outs)


def _inplace_on_plain(op, args):
    """g.mul_(coef) with a 0-d DTensor coef (clip_grad_norm_ on a mix of plain and DTensor
    gradients): the DTensor's value (the same on every rank) is used."""
    full = list(args)
    for p in _flat_positions(op, args):
        a = _get(args, p)
        if _is_dt(a):
            if a.dim() != 0:
                raise RuntimeError(f"{op.qualname}: an in-place op on a plain tensor with a "
                                   "DTensor argument (convert the tensor to a DTensor first)")
            _set(full, p, redistribute_local(a._local_tensor, a.device_mesh, a.placements,
                                             (Replicate(),) * a.device_mesh.ndim))
    with ember.no_grad():
        return core.call(op, tuple(full))


def _inplace(op, args):
    """x.add_(y) on a DTensor: the functional op (or y itself for copy_), redistributed to x's
    placements, written into x's local piece."""
    from ._dtensor import DTensor
    self = args[0]
    if not _is_dt(self):
        return _inplace_on_plain(op, args)
    if op.name == "copy_":
        src = args[1]
        if not _is_dt(src):
            src = DTensor._wrap(src, self.device_mesh, (Replicate(),) * self.device_mesh.ndim,
                                src._shape)
        if tuple(src._shape) != tuple(self._shape):
            src = src.expand(self._shape)
        res = src
    else:
        res = core.call(op.inplace_of, tuple(args))
    if tuple(res._shape) != tuple(self._shape):
        raise RuntimeError(f"{op.qualname}: result shape {list(res._shape)} does not match "
                           f"the DTensor's {list(self._shape)}")
    local = redistribute_local(res._local_tensor, self.device_mesh, res.placements,
                               self.placements)
    with ember.no_grad():
        self._local_tensor.copy_(local.to(self.dtype))
    return self


_FILLS = ("zero_", "fill_")


def _whole(op, args):
    """Random ops and fills: computed on the whole tensor (DTensor inputs gathered), then each
    rank keeps its piece. Random values therefore equal a single process's with the same seed,
    provided every rank's generator is in the same state (as PyTorch requires: same seed)."""
    from ._dtensor import DTensor
    from ._redistribute import from_full
    pos = _flat_positions(op, args)
    dts = [_get(args, p) for p in pos if _is_dt(_get(args, p))]
    first = dts[0]
    mesh = first.device_mesh
    full = list(args)
    for p in pos:
        a = _get(args, p)
        if _is_dt(a):
            _set(full, p, redistribute_local(a._local_tensor, mesh, a.placements,
                                             (Replicate(),) * mesh.ndim))
    if op.mutated_idx:  # uniform_, normal_, fill_, zero_: write the whole value's piece
        self = args[op.mutated_idx[0]]
        if not _is_dt(self):
            raise RuntimeError(f"{op.qualname}: an in-place op on a plain tensor with a DTensor "
                               "argument (convert the tensor to a DTensor first)")
        whole = ember.empty(tuple(self._shape), dtype=self.dtype, device=self.device)
        full[op.mutated_idx[0]] = whole
        with ember.no_grad():
            core.call(op, tuple(full))
            self._local_tensor.copy_(from_full(whole, mesh, self.placements))
        return self
    with ember.no_grad():
        r = core.call(op, tuple(full))
    ps = tuple(Replicate() if isinstance(p, Partial) else p for p in first.placements)
    if isinstance(r, Tensor) and tuple(r.shape) == tuple(first._shape):
        return DTensor._wrap(from_full(r, mesh, ps), mesh, ps, tuple(r.shape))
    if isinstance(r, Tensor):
        return DTensor._wrap(r, mesh, (Replicate(),) * mesh.ndim, tuple(r.shape))
    raise NotImplementedError(f"DTensor: {op.qualname} with several outputs is not supported")


def is_partial_sum(p) -> bool:
    return isinstance(p, Partial) and p.reduce_op in ("sum", "avg")


def shard_dims(ps) -> list:
    return [p.dim if isinstance(p, Shard) else None for p in ps]
