"""`ember.cuda.make_graphed_callables`: each callable's forward and backward captured as CUDA
graphs (forwards in order, backwards in reverse order, all in one memory pool) and wrapped in an
autograd Function that copies new inputs into the static ones and replays (PyTorch's algorithm).
"""
from __future__ import annotations

from ember.utils._pytree import tree_flatten, tree_leaves, tree_unflatten

from .graphs import CUDAGraph, graph, graph_pool_handle


def _check(callables, sample_args):
    from ember.nn import Module
    for c, args in zip(callables, sample_args):
        if isinstance(c, Module):
            if c._forward_hooks or c._forward_pre_hooks or getattr(c, "_backward_hooks", None):
                raise AssertionError(
                    "Modules must not have hooks registered at the time they are passed. "
                    "However, registering hooks on modules after passing them through "
                    "make_graphed_callables is allowed.")
            if any(b.requires_grad for b in c.buffers()):
                raise AssertionError(
                    "In any Module passed to make_graphed_callables, only parameters may be "
                    "trainable. All buffers must have requires_grad=False.")
        if not all(hasattr(a, "data_ptr") and hasattr(a, "requires_grad")
                   for a in tree_leaves(args)):
            raise AssertionError("In the beta API, sample_args for each callable must contain "
                                 "only Tensors. Other types are not allowed.")


def _grad(outputs, inputs, grad_outputs, allow_unused):
    import ember.autograd
    need = tuple(i for i in inputs if i.requires_grad)
    outs = tuple(o for o in outputs if o.requires_grad)
    if not outs or not need:
        return None
    return ember.autograd.grad(outs, need, grad_outputs, allow_unused=allow_unused)


def make_graphed_callables(callables, sample_args, num_warmup_iters=3,
                           allow_unused_input=False, pool=None):
    import ember
    from ember.nn import Module
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    _check(callables, sample_args)
    flat_args = [tuple(tree_leaves(a)) for a in sample_args]
    params = [tuple(c.parameters()) if isinstance(c, Module) else () for c in callables]
    surfaces = [a + p for a, p in zip(flat_args, params)]
    mempool = graph_pool_handle() if pool is None else pool

    # warmup on a side stream (lazy initializations, allocator state, compiled kernels)
    ember.cuda.synchronize()
    with ember.cuda.stream(ember.cuda.Stream()):
        for fn, args, surface in zip(callables, sample_args, surfaces):
            for _ in range(num_warmup_iters):
                outs = tree_leaves(fn(*args))
                _grad(outs, surface, tuple(ember.empty_like(o) for o in outs
                                           if o.requires_grad), allow_unused_input)
            del outs
    ember.cuda.synchronize()

    fwd_graphs = [CUDAGraph() for _ in callables]
    bwd_graphs = [CUDAGraph() for _ in callables]
    static_outs, specs = [], []
    for fn, args, g in zip(callables, sample_args, fwd_graphs):
        with graph(g, pool=mempool):
            outs = fn(*args)
        leaves, spec = tree_flatten(outs)
        static_outs.append(tuple(leaves))
        specs.append(spec)

    grad_outs_all, grad_ins_all = [], []
    for surface, outs, g in zip(reversed(surfaces), reversed(static_outs), reversed(bwd_graphs)):
        grad_outs = tuple(ember.empty_like(o) if o.requires_grad else None for o in outs)
        grads = None
        if any(o.requires_grad for o in outs):
            with graph(g, pool=mempool):
                grads = _grad(outs, surface, tuple(x for x in grad_outs if x is not None),
                              allow_unused_input)
        it = iter(grads or ())
        grad_ins = tuple(next(it) if (a.requires_grad and grads is not None) else None
                         for a in surface)
        grad_outs_all.append(grad_outs)
        grad_ins_all.append(grad_ins)
    grad_outs_all.reverse()
    grad_ins_all.reverse()

    ret = []
    for i, fn in enumerate(callables):
        graphed = _graphed_function(fwd_graphs[i], bwd_graphs[i], params[i], len(flat_args[i]),
                                    specs[i], surfaces[i], static_outs[i], grad_outs_all[i],
                                    grad_ins_all[i])
        if isinstance(fn, Module):
            fn.forward = _graphed_forward(fn, fn.training, graphed, fn.forward)
            ret.append(fn)
        else:
            ret.append(graphed)
    return ret[0] if just_one else tuple(ret)


def _graphed_forward(module, training, graphed, orig_forward):
    def forward(*user_args):
        # the graph holds the training (or eval) behaviour it was captured with
        if module.training == training:
            return graphed(*user_args)
        return orig_forward(*user_args)
    return forward


def _graphed_function(fwd_graph, bwd_graph, module_params, n_user, spec, surface, static_outs,
                      static_grad_outs, static_grad_ins):
    from ember.autograd import Function

    class Graphed(Function):
        @staticmethod
        def forward(ctx, *inputs):
            for i in range(n_user):  # only user arguments may be new tensors
                if surface[i].data_ptr() != inputs[i].data_ptr():
                    surface[i].copy_(inputs[i])
            fwd_graph.replay()
            return tuple(o.detach() for o in static_outs)

        @staticmethod
        def backward(ctx, *grads):
            for g, grad in zip(static_grad_outs, grads):
                if g is not None and grad is not None and g.data_ptr() != grad.data_ptr():
                    g.copy_(grad)
            bwd_graph.replay()
            return tuple(b.detach() if b is not None else None for b in static_grad_ins)

    def functionalized(*user_args):
        flat = tuple(tree_leaves(user_args))
        out = Graphed.apply(*(flat + module_params))
        if not isinstance(out, tuple):
            out = (out,)
        return tree_unflatten(list(out), spec)
    return functionalized
