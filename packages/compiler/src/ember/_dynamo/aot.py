"""AOT autograd for the "aot_eager" backend: the joint forward+backward graph is traced with
make_fx over a function that runs the captured graph and `ember.autograd.grad` (so the backward
ops are the op table's vjp rules), split by a partitioner (partitioners.py's min cut by default:
in-place updates of buffers stay in the forward) into a forward graph and a backward graph that
reads what the forward saved; the two run as one autograd Function. Graphs with symbolic sizes
trace their joint graph in aot_symbolic.py instead.

By default the joint graph is traced on the capture's fake tensors (aot_symbolic.py walks the
forward's op calls backwards through their vjp rules: nothing is computed). Where that trace
has a gap, or with config.aot_fake_joint=False, it runs on clones of the example inputs (real
values; the autograd engine differentiates them), costing one extra forward and backward
(under fork_rng: random draws are restored, so the compiled run draws what eager would).
"""
from __future__ import annotations

import logging
import operator

import ember
from ember import Tensor
from ember._state import state
from ember.fx.experimental.proxy_tensor import ProxyTorchDispatchMode
from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule

from . import config

__all__ = ["aot_module", "default_partition"]

log = logging.getLogger("ember._dynamo")


def _clone_inputs(example_inputs):
    out = []
    for t in example_inputs:
        if isinstance(t, Tensor):
            c = t.detach().clone()
            if t.requires_grad:
                c.requires_grad_(True)
            out.append(c)
        else:
            out.append(t)
    return out


def _plain(gm, example_inputs=None):
    from .runner import fast_callable
    return fast_callable(gm)


def aot_module(gm: GraphModule, example_inputs, fw_compiler=None, bw_compiler=None,
               _per_size=False, partition_fn=None):
    """A callable running gm; differentiable through a compiled backward where inputs need
    grad (decided once: the entry's guards fix requires_grad and grad mode).

    fw_compiler / bw_compiler: `(GraphModule, example_inputs or None) -> callable` for the
    forward and backward graphs (default: run them as they are); the backward's example
    inputs are not known here (None). partition_fn: how the joint graph is
    split (default: min_cut_rematerialization_partition; `default_partition` is the simpler
    one: the forward keeps what it computes, only cheap chains move to the backward)."""
    from .cudagraphs import wrap_compiled  # (mode="reduce-overhead": CUDA-graph runners)
    from .functionalize import functionalize
    from .partitioners import min_cut_rematerialization_partition
    partition_fn = partition_fn or min_cut_rematerialization_partition
    fw_compiler = fw_compiler or _plain
    bw_compiler = bw_compiler or _plain
    need = [isinstance(t, Tensor) and t.requires_grad for t in example_inputs]
    if not any(need) or not state.grad_enabled:
        fgm = functionalize(gm)
        return wrap_compiled(fw_compiler(fgm, example_inputs), fgm, "inference")
    from .aot_symbolic import SymbolicTraceError, is_symbolic_graph, trace_joint_symbolic
    from .loss_decomp import rewrite
    gm = rewrite(gm)   # (cross_entropy on CUDA: no (N, C) log_softmax stored)
    if not _per_size and is_symbolic_graph(gm):
        try:
            jgm, n_out, diff = trace_joint_symbolic(gm, need)
        except Exception as e:  # noqa: BLE001 - any gap of the symbolic trace: per-size graphs
            if not isinstance(e, SymbolicTraceError):
                log.info("aot_eager: symbolic joint trace failed (%s: %s); one joint graph per "
                         "set of sizes instead", type(e).__name__, e)
            return _PerSizes(gm, fw_compiler, bw_compiler, partition_fn)
    else:
        traced = None
        if not _per_size and config.aot_fake_joint and _has_fakes(gm):
            try:  # on the capture's fake tensors: no forward and backward computed here
                traced = trace_joint_symbolic(gm, need)
            except Exception as e:  # noqa: BLE001 - a gap of the fake trace: the real one
                log.info("aot_eager: joint trace on fake tensors failed (%s: %s); tracing on "
                         "real tensors", type(e).__name__, e)
        if traced is None:
            import ember.random
            with ember.random.fork_rng():  # the trace's random draws are not the user's
                traced = _trace_joint(gm, _clone_inputs(example_inputs), need)
        jgm, n_out, diff = traced
    if jgm is None:
        fgm = functionalize(gm)
        return wrap_compiled(fw_compiler(fgm, example_inputs), fgm, "inference")
    fwd, bwd, n_saved = partition_fn(jgm, len(example_inputs), n_out)
    fwd = functionalize(fwd, n_out)  # in-place updates of inputs: one write-back at the end
    return _make_runtime(wrap_compiled(fw_compiler(fwd, example_inputs), fwd, "forward"),
                         wrap_compiled(bw_compiler(bwd, None), bwd, "backward"), n_out,
                         n_saved, need, diff, (fwd, bwd))


def _has_fakes(gm) -> bool:
    """Every placeholder of gm carries its capture-time value (a fake tensor or a size)."""
    return all("val" in n.meta for n in gm.graph.nodes if n.op == "placeholder")


class _PerSizes:
    """A graph with symbolic sizes that the symbolic joint trace does not model (in-place
    ops, ...): one joint graph traced per set of input sizes, on the call's real inputs."""

    def __init__(self, gm, fw_compiler, bw_compiler, partition_fn):
        self.gm, self.fw, self.bw = gm, fw_compiler, bw_compiler
        self.partition_fn = partition_fn
        self.cache: dict = {}

    def __call__(self, *inputs):
        key = tuple(tuple(x._shape) if isinstance(x, Tensor) else x for x in inputs)
        fn = self.cache.get(key)
        if fn is None:
            fn = self.cache[key] = aot_module(self.gm, list(inputs), self.fw, self.bw,
                                              _per_size=True, partition_fn=self.partition_fn)
        return fn(*inputs)


def _trace_joint(gm, primals, need):
    """(joint GraphModule: primals and tangents in, outputs and input grads out; number of
    outputs; which outputs are differentiable), or (None, n, diff) when none is. The forward
    runs once for real under recording; tangents become placeholders once it is known which
    outputs need them."""
    graph = Graph()
    mode = _AliasProxyMode(graph)
    for i, a in enumerate(primals):
        ph = graph.placeholder(f"primal{i}")
        if isinstance(a, Tensor):
            mode.track(a, ph)
    from .partitioners import TaggingInterpreter
    with ember.enable_grad():
        with mode:
            outs = tuple(TaggingInterpreter(gm, graph).run(*primals))
        diff = [isinstance(o, Tensor) and o.requires_grad for o in outs]
        if not any(diff):
            return None, len(outs), diff
        douts = [o for o, d in zip(outs, diff) if d]
        tans = [ember.ones_like(o) for o in douts]
        for i, t in enumerate(tans):
            mode.track(t, graph.placeholder(f"tangent{i}"))
        want = [p for p, r in zip(primals, need) if r]
        with mode:
            if len(douts) == 1:
                grads = ember.autograd.grad(douts, want, tans, allow_unused=True)
            else:
                # one scalar <o, t> summed over the outputs: the same vjp (ember.autograd.grad
                # with several grad_outputs drops an input's gradient behind some multi-output
                # ops, e.g. slogdet, in eager too)
                total = None
                for o, t in zip(douts, tans):
                    term = (o * t).sum()
                    total = term if total is None else total + term
                grads = ember.autograd.grad(total, want, allow_unused=True)
    graph.output(mode._arg(outs + tuple(grads)))
    return GraphModule(dict(mode.constants), graph, "joint"), len(outs), diff


class _AliasProxyMode(ProxyTorchDispatchMode):
    """make_fx's recording mode that also knows a tensor by its memory: the autograd engine
    hands vjps new Tensor objects over the saved ones' storage."""

    def __init__(self, graph):
        super().__init__(graph, _composites())
        self.by_mem: dict = {}

    @staticmethod
    def _key(t):
        try:
            ptr = t.data_ptr()
        except Exception:
            return None
        return (ptr, tuple(t._shape), tuple(t._stride), t.dtype, t.device.type)

    def track(self, t, node):
        super().track(t, node)
        node.meta.setdefault("nbytes", t.numel() * t.dtype.itemsize)
        node.meta.setdefault("tmeta", (str(tuple(t._shape)), t.dtype))
        key = self._key(t)
        if key is not None:
            self.by_mem.setdefault(key, node)

    def node_of(self, t):
        hit = self.tracked.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        key = self._key(t)
        node = self.by_mem.get(key) if key is not None else None
        if node is not None:
            self.tracked[id(t)] = (t, node)
            return node
        return super().node_of(t)


_COMPOSITES: dict = {}


def _composites() -> dict:
    """Ops autograd differentiates through their decomposition (no vjp of their own): traced
    through it too, so every saved tensor is a node of the joint graph."""
    if not _COMPOSITES:
        from ember._ops import OPS
        for op in OPS.values():
            if getattr(op, "vjp", None) is None and getattr(op, "decomp", None) is not None \
                    and "kernel_in_backward" not in op.tags:   # (called under no_grad only)
                _COMPOSITES[op] = op.decomp
    return _COMPOSITES


def default_partition(jgm: GraphModule, n_in: int, n_out: int):
    """(forward GraphModule, backward GraphModule, number of saved values): the forward keeps
    every node that does not read a tangent; cheap chains only the backward uses move there."""
    g = jgm.graph
    phs = [n for n in g.nodes if n.op == "placeholder"]
    out_node = next(n for n in g.nodes if n.op == "output")
    outs = list(out_node.args[0])
    tangent = set(phs[n_in:])
    bwd_nodes = set(tangent)
    for n in g.nodes:
        if n.op in ("call_function", "call_method") and any(
                a in bwd_nodes for a in n.all_input_nodes):
            bwd_nodes.add(n)
    _recompute_cheap(g, bwd_nodes, set(outs[:n_out]))
    saved = []
    for n in g.nodes:
        if n in bwd_nodes and n.op != "placeholder":
            for a in n.all_input_nodes:
                if a not in bwd_nodes and a not in saved and a.op != "get_attr":
                    saved.append(a)
    grads = outs[n_out:]
    for gnode in grads:  # a gradient that needs no tangent (a constant): saved from forward
        if gnode is not None and gnode not in bwd_nodes and gnode not in saved:
            saved.append(gnode)
    fg, fmap = Graph(), {}
    for n in g.nodes:
        if n.op == "output" or n in bwd_nodes:
            continue
        fmap[n] = fg.node_copy(n, lambda a: fmap[a])
    fg.output(tuple(fmap[o] for o in outs[:n_out]) + tuple(fmap[s] for s in saved))
    bg, bmap = Graph(), {}
    for s in saved:
        bmap[s] = bg.placeholder(s.name)
    for t in phs[n_in:]:
        bmap[t] = bg.placeholder(t.name)
    for n in g.nodes:
        if n in bwd_nodes and n.op != "placeholder":
            for a in n.all_input_nodes:
                if a.op == "get_attr" and a not in bmap:
                    bmap[a] = bg.node_copy(a)
            bmap[n] = bg.node_copy(n, lambda a: bmap[a])
    bg.output(tuple(bmap[x] if x is not None else None for x in grads))
    bg.eliminate_dead_code(lambda n: n.op in ("placeholder", "output")
                           or "inplace" in getattr(n.target, "tags", ()))
    consts = {k: getattr(jgm, k) for k in _attrs(jgm)}
    fwd = GraphModule(consts, fg, "AOTForward")
    bwd = GraphModule(consts, bg, "AOTBackward")
    return fwd, bwd, len(saved)


def _recompute_cheap(g, bwd_nodes: set, fwd_outs: set) -> None:
    """Move views and pointwise ops that only the backward uses into it (recomputed there from
    values it has anyway) instead of computing them in the forward and saving their results:
    the cheap half of a min-cut partitioner."""
    changed = True
    while changed:
        changed = False
        for n in reversed(list(g.nodes)):
            if n in bwd_nodes or n.op != "call_function" or n in fwd_outs:
                continue
            op = n.target
            tags = getattr(op, "tags", ())
            if getattr(op, "pointwise", None) is None and "view" not in tags:
                continue
            if "random" in tags or "inplace" in tags or not n.users or \
                    not all(u in bwd_nodes for u in n.users):
                continue
            if any("inplace" in getattr(u.target, "tags", ()) or getattr(
                    u.target, "mutated_idx", None) for a in n.all_input_nodes for u in a.users):
                continue  # its inputs are written later: recomputing would read new values
            # values the backward would newly need (primals and views cost no memory)
            new = [a for a in n.all_input_nodes if a.op not in ("placeholder", "get_attr")
                   and "view" not in getattr(a.target, "tags", ())
                   and not any(u in bwd_nodes for u in a.users if u is not n)]
            if len(new) <= 1:  # saving at most one value instead of n's result
                bwd_nodes.add(n)
                changed = True


partition = default_partition  # (the name before the min-cut partitioner)


def _attrs(gm):
    return [n.target for n in gm.graph.nodes if n.op == "get_attr"]


_TENSOR = object()   # marks a saved value's slot that save_for_backward holds


def _make_runtime(fwd, bwd, n_out, n_saved, need, diff, gms):
    from ember.autograd import Function

    class CompiledFunction(Function):
        @staticmethod
        def forward(ctx, *inputs):
            r = fwd(*inputs)
            outs, saved = r[:n_out], r[n_out:]
            # tensors through save_for_backward: an in-place write to one of them (a returned
            # output the backward also reads) raises at backward, as eager and torch.compile
            ctx.save_for_backward(*[s for s in saved if isinstance(s, Tensor)])
            ctx.saved = [_TENSOR if isinstance(s, Tensor) else s for s in saved]
            nd = [o for o, d in zip(outs, diff) if not d and isinstance(o, Tensor)]
            if nd:
                ctx.mark_non_differentiable(*nd)
            return tuple(outs)

        @staticmethod
        def backward(ctx, *gouts):
            tans = [g for g, d in zip(gouts, diff) if d]
            tans = [t if t is not None else _zeros_for(ctx, i) for i, t in enumerate(tans)]
            ts = iter(ctx.saved_tensors)
            saved = [next(ts) if s is _TENSOR else s for s in ctx.saved]
            grads = iter(bwd(*saved, *tans))
            return tuple(next(grads) if r else None for r in need)

    def run(*inputs):
        return CompiledFunction.apply(*inputs)
    run.forward_graph, run.backward_graph, run.n_saved = gms[0], gms[1], n_saved
    return run


def _zeros_for(ctx, i):
    raise RuntimeError("ember.compile(backend='aot_eager'): a missing output gradient "
                       "(None) is not supported yet")


_ = operator
