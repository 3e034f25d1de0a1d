"""`ember.utils.checkpoint`: activation checkpointing (from ember-autograd).

use_reentrant=True: the forward runs under no_grad inside a custom Function; its backward runs
the function again with grad enabled and backpropagates through the recomputed graph (like
PyTorch's, gradients reach parameters the function closes over through .backward(), not
through autograd.grad()).

use_reentrant=False (PyTorch's recommended form): the forward records the usual graph, but
every tensor it saves for backward goes through saved-tensor hooks that keep only a handle;
the first unpack in backward runs the function again and hands out the recomputed tensors in
the order they were saved. The graph is the plain one, so autograd.grad, closures' parameters
and double backward work as without checkpointing.
"""
from __future__ import annotations

import warnings
import weakref

import ember
from ember._tensor import Tensor
from ember.autograd.function import Function
from ember.autograd.graph import saved_tensors_hooks

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError"]


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


class CheckpointError(RuntimeError):
    """The recomputation did not save what the forward saved."""


class _Handle:
    """What the forward's pack hook keeps in place of a saved tensor."""

    __slots__ = ("__weakref__",)


class _Frame:
    """One non-reentrant checkpoint call: the handles in save order, and the recomputed
    tensors by handle (weak keys: a tensor goes once its graph node is freed)."""

    def __init__(self, recompute):
        self.recompute = recompute
        self.handles: list = []
        self.values: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def pack(self, t):
        h = _Handle()
        self.handles.append(weakref.ref(h))
        return h

    def unpack(self, h):
        # each value is handed out once (then freed); a later backward through a retained
        # graph recomputes again, as in PyTorch
        if h not in self.values:
            self._run()
        if h not in self.values:
            raise CheckpointError(
                "torch.utils.checkpoint: Unpack is being triggered for a tensor that was "
                "not saved again when the function was recomputed (the checkpointed function "
                "must run the same ops in both passes).")
        return self.values.pop(h)

    def _run(self):
        k = 0

        def pack(t):
            nonlocal k
            if k >= len(self.handles):
                raise CheckpointError(
                    f"torch.utils.checkpoint: the recomputation saved more tensors than the "
                    f"forward ({len(self.handles)}): the checkpointed function must run the "
                    f"same ops in both passes.")
            h = self.handles[k]()
            k += 1
            if h is not None:  # None: its node was freed already
                self.values[h] = t.detach()
            return None
        with saved_tensors_hooks(pack, lambda _: None), ember.enable_grad():
            self.recompute()


def _checkpoint_non_reentrant(function, preserve_rng_state, args):
    rng = _rng_state() if preserve_rng_state else None
    tensor_idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    # the inputs, held by the frame (not saved for backward): an in-place write to them later
    # changes the recomputation, as in PyTorch
    inputs = list(args)

    def recompute():
        a = list(inputs)
        for i in tensor_idx:
            a[i] = inputs[i].detach().requires_grad_(inputs[i].requires_grad)
        if rng is not None:
            now = ember.get_rng_state()
            ember.set_rng_state(rng)
        try:
            function(*a)
        finally:
            if rng is not None:
                ember.set_rng_state(now)
    frame = _Frame(recompute)
    with saved_tensors_hooks(frame.pack, frame.unpack):
        return function(*args)


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state: bool = True, **kwargs):
    """Run function(*args) saving only its inputs; recompute it during backward."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed "
                      "explicitly. Starting in PyTorch 2.9, calling checkpoint without "
                      "use_reentrant will raise an exception. use_reentrant=False is "
                      "recommended, but if you need to preserve the current default behavior, "
                      "you can pass use_reentrant=True. Refer to docs for more details on the "
                      "differences between the two variants.", UserWarning, stacklevel=2)
        use_reentrant = True
    if kwargs:
        if use_reentrant:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        fn = function

        def function(*a):
            return fn(*a, **kwargs)
    if not use_reentrant:
        return _checkpoint_non_reentrant(function, preserve_rng_state, args)
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
