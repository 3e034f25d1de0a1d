"""FlexAttention as higher-order ops (torch's `flex_attention` / `flex_attention_backward`
HOPs): under make_fx or ember.compile a flex_attention call is one node, its score_mod and
mask_mod traced into subgraphs (`sdpa_score0`, `sdpa_mask0`) on one-element tensors, the BlockMask's
block lists its tensor arguments; where inputs need gradients its autograd node's backward is
one `flex_attention_backward` node. Run (by an fx graph, by ember._inductor's extern call),
each op calls the fused kernels (C++ on CPU, Triton on CUDA) with the subgraphs as the mods,
or the eager reference where a kernel declines them: the (L, S) scores are never in a graph.

>>> import ember
>>> from ember.nn.attention.flex_attention import flex_attention
>>> from ember.fx.experimental.proxy_tensor import make_fx
>>> q = ember.randn(1, 1, 4, 8)
>>> gm = make_fx(lambda q: flex_attention(q, q, q))(q)
>>> sum(n.target is flex_attention_hop for n in gm.graph.nodes)
1
"""
from __future__ import annotations

import operator

import ember
from ember import Tensor
from ember._state import state

from . import HigherOrderOperator
from ._subtrace import SubgraphMode, proxy_mode, trace_subgraph

__all__ = ["flex_attention_hop", "flex_attention_backward_hop", "tracing", "call"]

_BLOCKS = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
           "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices")


def tracing() -> bool:
    return proxy_mode() is not None


def call(query, key, value, score_mod, block_mask, scale, enable_gqa):
    """core's flex_attention under make_fx: (out, lse) through the higher-order op."""
    if block_mask is None:
        blocks, bs, mask_mod = (None,) * 8, None, None
    else:
        blocks = tuple(getattr(block_mask, n) for n in _BLOCKS)
        bs, mask_mod = tuple(block_mask.BLOCK_SIZE), block_mask.mask_mod
    return flex_attention_hop(query, key, value, score_mod, mask_mod, blocks, float(scale), bs,
                              bool(enable_gqa))


class _Mod:
    """A traced mod (a subgraph, with the captured tensors it reads as extra inputs) called as
    a mod: on tensors it runs the graph; on the fused kernels' symbolic values it interprets it
    op by op (`_modexpr`'s expressions; captured tensors become kernel reads)."""

    def __init__(self, gm, extra=()):
        self.gm, self.extra = gm, tuple(extra)

    def __call__(self, *args):
        from ember.nn.attention import _modexpr as mx
        if any(isinstance(a, mx.Expr) for a in args):
            return _interpret(self.gm, (*args, *self.extra))
        r = self.gm(*args, *self.extra)
        return r[0] if isinstance(r, (tuple, list)) else r


def _wrap(fn, extra=()):
    from ember.fx.graph_module import GraphModule
    return _Mod(fn, extra) if isinstance(fn, GraphModule) else fn


def _interpret(gm, args):
    from ember.nn.attention import _modexpr as mx
    env, it = {}, iter(args)
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            env[n] = next(it)
        elif n.op == "get_attr":   # a tensor the mod captured (make_fx: a constant)
            env[n] = getattr(gm, n.target)
        elif n.op == "call_function":
            fn = _EXPR.get(getattr(n.target, "qualname", None) or
                           getattr(n.target, "__name__", ""))
            if fn is None:
                raise mx.Unsupported(f"{n.target} in a mod")
            def val(x):
                if isinstance(x, (list, tuple)):
                    return type(x)(val(e) for e in x)
                return env[x] if isinstance(x, ember.fx.Node) else x
            env[n] = fn(*val(n.args), **{k: val(v) for k, v in n.kwargs.items()})
        elif n.op == "output":
            out = n.args[0]
            out = out[0] if isinstance(out, (tuple, list)) else out
            return env[out] if isinstance(out, ember.fx.Node) else out
        else:
            raise mx.Unsupported(f"{n.op} in a mod")


def _where(c, a, b):
    from ember.nn.attention import _modexpr as mx
    return mx._where(mx._lift(c), a, b)


def _same(x, *a, **k):
    return x


_EXPR = {  # table ops a mod's subgraph holds -> the expression they build
    "add.Tensor": lambda a, b, alpha=1: a + (b if alpha == 1 else b * alpha),
    "sub.Tensor": lambda a, b, alpha=1: a - (b if alpha == 1 else b * alpha),
    "rsub.Scalar": lambda a, b, alpha=1: b - a * alpha if alpha != 1 else b - a,
    "mul.Tensor": operator.mul, "div.Tensor": operator.truediv,
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "remainder.Scalar": operator.mod, "remainder.Tensor": operator.mod,
    "floor_divide": operator.floordiv, "floor_divide.Scalar": operator.floordiv,
    "ge.Tensor": operator.ge, "ge.Scalar": operator.ge, "gt.Tensor": operator.gt,
    "gt.Scalar": operator.gt, "le.Tensor": operator.le, "le.Scalar": operator.le,
    "lt.Tensor": operator.lt, "lt.Scalar": operator.lt, "eq.Tensor": operator.eq,
    "eq.Scalar": operator.eq, "ne.Tensor": operator.ne, "ne.Scalar": operator.ne,
    "bitwise_and.Tensor": operator.and_, "bitwise_or.Tensor": operator.or_,
    "logical_and": operator.and_, "logical_or": operator.or_,
    "bitwise_not": operator.invert, "logical_not": operator.invert,
    "neg": operator.neg, "abs": abs, "exp": lambda x: x.exp(), "log": lambda x: x.log(),
    "sqrt": lambda x: x.sqrt(), "sigmoid": lambda x: x.sigmoid(), "tanh": lambda x: x.tanh(),
    "index.Tensor": lambda t, idx: t[tuple(idx)], "where.self": _where, "_to_copy": _same,
    "to.dtype": _same, "clone": _same, "alias": _same, "lift_fresh_copy": _same,
}
for _k in list(_EXPR):
    if "." in _k:
        _EXPR.setdefault(_k.split(".")[0], _EXPR[_k])


# ---- the forward op -------------------------------------------------------------------------
def _block_mask(blocks, bs, mask_mod, L, S):
    if blocks[1] is None:
        return None
    from ember.nn.attention.flex_attention import BlockMask, noop_mask
    return BlockMask((L, S), *blocks, bs, mask_mod or noop_mask)


def _plan(query, key, value, score_mod, block_mask, scale):
    """The fused kernels' plan for these tensors (C++ or Triton), or None."""
    from ember.nn.attention import _modexpr as mx
    mask_mod = None if block_mask is None else block_mask.mask_mod
    dev = query.device.type
    try:
        if dev == "cpu":
            from ember.nn.attention import _flex_cpu as fc
            if query.dtype not in (ember.float32, ember.float64, ember.float16, ember.bfloat16):
                return None
            srcs, bufs = fc.trace(score_mod, mask_mod)
            fns = fc._library(srcs)
            return None if fns is None else fc.CpuPlan(fns, block_mask, query, key, value, scale,
                                                       bufs)
        if dev == "cuda":
            from ember._device import get_backend
            from ember.cuda import _flex
            if query.dtype not in (ember.float32, ember.float16, ember.bfloat16):
                return None
            srcs, bufs = _flex._trace(score_mod, mask_mod)
            return _flex.FlexPlan(get_backend("cuda"), srcs, block_mask, query, key, value,
                                  scale, bufs)
    except mx.Unsupported:
        return None
    return None


def _forward_impl(query, key, value, score_mod, mask_mod, blocks, scale, bs, enable_gqa,
                  extra=((), ())):
    """(out, lse); score_mod and mask_mod: subgraphs (extra: the captured tensors each reads),
    or Python functions."""
    sm, mm = _wrap(score_mod, extra[0]), _wrap(mask_mod, extra[1])
    mode = proxy_mode()
    if mode is not None:
        return _trace_forward(mode, query, key, value, sm, mm, blocks, scale, bs, enable_gqa)
    B, H, L, _ = query.shape
    if query.device.type == "meta" or hasattr(query, "fake_mode"):
        return (ember.empty(B, H, L, value.size(-1), dtype=query.dtype, device=query.device),
                ember.empty(B, H, L, dtype=_work(query), device=query.device))
    bm = _block_mask(blocks, bs, mm, L, key.size(2))
    plan = _plan(query, key, value, sm, bm, scale)
    if plan is not None:
        with ember.no_grad():
            return plan.forward(query, key, value)
    from ember.nn.attention.flex_attention import _reference
    return _reference(query, key, value, sm, bm, scale, True)


def _work(t):
    return ember.float64 if t.dtype == ember.float64 else ember.float32


flex_attention_hop = HigherOrderOperator("flex_attention", _forward_impl)


class _ModMode(SubgraphMode):
    """Records a mod; keeps the values of the captured tensors it lifts."""

    def __init__(self, parent, graph):
        super().__init__(parent, graph)
        self.values: list = []

    def lift(self, outer, value):
        self.values.append(value)
        return super().lift(outer, value)


def _subgraphs(mode, score_mod, mask_mod, dtype):
    """The mods traced on one-element tensors into the caller's graph constants -> their
    get_attr nodes (None for no mod) and the captured tensors each reads (outer graph
    values)."""
    at = state.modes.index(mode)
    state.modes.pop(at)
    try:
        # one-element tensors, one each (a placeholder each): indexing a captured tensor with
        # them is recorded as `index` (a 0-d index would be read as a Python int, a constant)
        z = ember.zeros(1, dtype=dtype)
        b, h, q, k = (ember.zeros(1, dtype=ember.int32) for _ in range(4))
    finally:
        state.modes.insert(at, mode)
    n = sum(1 for k in mode.constants if k.startswith("sdpa_score"))
    out, lifts, made = [], [], []

    def sub_mode(parent, graph):
        made.append(_ModMode(parent, graph))
        return made[-1]
    for name, fn, args in (("sdpa_score", score_mod, (z, b, h, q, k)),
                           ("sdpa_mask", mask_mod, (b, h, q, k))):
        if fn is None:
            out.append(None)
            lifts.append(())
            continue
        with ember.no_grad():
            gm, _, _, lifted = trace_subgraph(mode, fn, list(args), "flex_attention", sub_mode)
        consts = [getattr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"]
        if any(isinstance(v, Tensor) and v.requires_grad for v in made[-1].values + consts):
            # (its gradient would need the mod's derivative by the captured tensor)
            raise NotImplementedError("flex_attention under tracing: a score_mod or mask_mod "
                                      "reading a captured tensor that requires grad")
        mode.constants[f"{name}{n}"] = gm
        out.append(mode.graph.get_attr(f"{name}{n}"))
        lifts.append(tuple(lifted))
    return out, lifts


def _trace_forward(mode, query, key, value, score_mod, mask_mod, blocks, scale, bs,
                   enable_gqa):
    if hasattr(mode, "tape"):
        # AOT autograd's joint trace on fake tensors walks vjp rules (this op has none): it
        # falls back to the joint trace on values, where the autograd node below records
        from ember._dynamo.aot_symbolic import SymbolicTraceError
        raise SymbolicTraceError("flex_attention")
    (s_node, m_node), lifts = _subgraphs(mode, score_mod, mask_mod, _work(query))
    graph = mode.graph
    args = (mode._arg(query), mode._arg(key), mode._arg(value), s_node, m_node,
            tuple(mode._arg(list(blocks))), scale, bs, enable_gqa, tuple(lifts))
    node = graph.call_function(flex_attention_hop, args)
    at = state.modes.index(mode)
    state.modes.pop(at)
    try:
        if ember.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)) and \
                not hasattr(query, "fake_mode"):
            out, lse = _function().apply(query, key, value, (score_mod, mask_mod, blocks,
                                                             scale, bs, enable_gqa))
        else:
            out, lse = _forward_impl(query, key, value, score_mod, mask_mod, blocks, scale, bs,
                                     enable_gqa)
    finally:
        state.modes.insert(at, mode)
    mode.track(out, graph.call_function(operator.getitem, (node, 0)))
    mode.track(lse, graph.call_function(operator.getitem, (node, 1)))
    return out, lse


# ---- the backward op ------------------------------------------------------------------------
def _backward_impl(query, key, value, out, lse, dout, dlse, score_mod, mask_mod, blocks, scale,
                   bs, enable_gqa, extra=((), ())):
    sm, mm = _wrap(score_mod, extra[0]), _wrap(mask_mod, extra[1])
    mode = proxy_mode()
    if mode is not None:
        return _trace_backward(mode, query, key, value, out, lse, dout, dlse, sm, mm, blocks,
                               scale, bs, enable_gqa)
    if query.device.type == "meta" or hasattr(query, "fake_mode"):
        return (ember.empty_like(query), ember.empty_like(key), ember.empty_like(value))
    L, S = query.size(2), key.size(2)
    bm = _block_mask(blocks, bs, mm, L, S)
    plan = _plan(query, key, value, sm, bm, scale)
    if plan is not None:
        with ember.no_grad():
            return plan.backward(query, key, value, out, lse, dout, dlse)
    return _reference_backward(query, key, value, dout, dlse, sm, bm, scale)


def _reference_backward(query, key, value, dout, dlse, sm, bm, scale):
    from ember.nn.attention.flex_attention import _reference
    xs = [t.detach().requires_grad_(True) for t in (query, key, value)]
    with ember.enable_grad():
        o, lse = _reference(*xs, sm, bm, scale, True)
        outs, grads = [o], [ember.zeros_like(o) if dout is None else dout]
        if dlse is not None:
            outs.append(ember.where(lse == -float("inf"), 0.0, lse))
            grads.append(dlse)
        return tuple(ember.autograd.grad(outs, xs, grads, allow_unused=True))


flex_attention_backward_hop = HigherOrderOperator("flex_attention_backward", _backward_impl)


def _trace_backward(mode, query, key, value, out, lse, dout, dlse, score_mod, mask_mod, blocks,
                    scale, bs, enable_gqa):
    graph = mode.graph
    (s_node, m_node), lifts = _subgraphs(mode, score_mod, mask_mod, _work(query))
    args = (mode._arg(query), mode._arg(key), mode._arg(value), mode._arg(out),
            mode._arg(lse), None if dout is None else mode._arg(dout),
            None if dlse is None else mode._arg(dlse), s_node, m_node,
            tuple(mode._arg(list(blocks))), scale, bs, enable_gqa, tuple(lifts))
    node = graph.call_function(flex_attention_backward_hop, args)
    at = state.modes.index(mode)
    state.modes.pop(at)
    try:
        grads = _backward_impl(query, key, value, out, lse, dout, dlse, score_mod, mask_mod,
                               blocks, scale, bs, enable_gqa)
    finally:
        state.modes.insert(at, mode)
    for i, g in enumerate(grads):
        mode.track(g, graph.call_function(operator.getitem, (node, i)))
    return grads


_FN = None


def _function():
    """The autograd node of a traced forward: its backward is the backward op (recorded)."""
    global _FN
    if _FN is None:
        from ember.autograd import Function

        class FlexAttentionHop(Function):
            @staticmethod
            def forward(ctx, q, k, v, rest):
                sm, mm, blocks, scale, bs, gqa = rest
                ctx.rest = rest
                out, lse = _forward_impl(q, k, v, sm, mm, blocks, scale, bs, gqa)
                ctx.save_for_backward(q, k, v, out, lse)
                return out, lse

            @staticmethod
            def backward(ctx, dout, dlse):
                q, k, v, out, lse = ctx.saved_tensors
                sm, mm, blocks, scale, bs, gqa = ctx.rest
                dq, dk, dv = flex_attention_backward_hop(q, k, v, out, lse, dout, dlse, sm, mm,
                                                         blocks, scale, bs, gqa)
                return dq, dk, dv, None

        _FN = FlexAttentionHop
    return _FN
