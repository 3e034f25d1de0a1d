"""`ember.utils.checkpoint`: activation checkpointing (from ember-autograd).

The forward runs without saving activations; backward runs it again with grad enabled and
backpropagates through the recomputed graph (PyTorch's reentrant algorithm, used for both
use_reentrant settings: like it, gradients reach parameters the function closes over through
.backward(), not through autograd.grad()).
"""
from __future__ import annotations

import ember
from ember._tensor import Tensor
from ember.autograd.function import Function

__all__ = ["checkpoint", "checkpoint_sequential"]


def _rng_state():
    get = getattr(ember, "get_rng_state", None)
    return get() if get is not None else None


class CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.rng = _rng_state() if preserve_rng_state else None
        ctx.tensor_idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.args = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        with ember.no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        args = list(ctx.args)
        detached = []
        for i, t in zip(ctx.tensor_idx, saved):
            d = t.detach().requires_grad_(t.requires_grad)
            args[i] = d
            detached.append(d)
        if ctx.rng is not None:
            ember.set_rng_state(ctx.rng)
        with ember.enable_grad():
            outs = ctx.run_function(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        pairs = [(o, g) for o, g in zip(outs, grads)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not "
                               "necessary")
        ember.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        it = iter(detached)
        res = [None, None]
        for i in range(len(ctx.args)):
            res.append(next(it).grad if i in ctx.tensor_idx else None)
        return tuple(res)


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state: bool = True, **kwargs):
    """Run function(*args) saving only its inputs; recompute it during backward."""
    if kwargs:
        fn = function

        def function(*a):
            return fn(*a, **kwargs)
    return CheckpointFunction.apply(function, preserve_rng_state, *args)


def checkpoint_sequential(functions, segments: int, input, use_reentrant=None, **kwargs):
    """Split a sequence of modules/functions into segments and checkpoint each but the last."""
    fns = list(functions.children()) if hasattr(functions, "children") else list(functions)
    size = max(len(fns) // segments, 1)

    def run(start, end):
        def f(x):
            for j in range(start, end + 1):
                x = fns[j](x)
            return x
        return f
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run(end + 1, len(fns) - 1)(input)
