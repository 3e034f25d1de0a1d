"""Hook handles and the full-backward-hook machinery of Module (PyTorch's torch.utils.hooks)."""
from __future__ import annotations

import warnings
import weakref
from collections import OrderedDict

__all__ = ["RemovableHandle", "BackwardHook", "register_module_forward_pre_hook",
           "register_module_forward_hook", "register_module_full_backward_hook",
           "register_module_full_backward_pre_hook", "register_module_buffer_registration_hook",
           "register_module_module_registration_hook",
           "register_module_parameter_registration_hook"]


class RemovableHandle:
    """A handle that removes a hook from the dict(s) it was registered in."""

    next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        if extra_dict is None:
            extra_dict = []
        elif isinstance(extra_dict, dict):
            extra_dict = [extra_dict]
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra_dict)

    def remove(self) -> None:
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


# global hooks, run for every module (register_module_* below)
_global_buffer_registration_hooks: dict = OrderedDict()
_global_module_registration_hooks: dict = OrderedDict()
_global_parameter_registration_hooks: dict = OrderedDict()
_global_backward_pre_hooks: dict = OrderedDict()
_global_backward_hooks: dict = OrderedDict()
_global_forward_pre_hooks: dict = OrderedDict()
_global_forward_hooks: dict = OrderedDict()
_global_forward_hooks_always_called: dict = OrderedDict()
_global_forward_hooks_with_kwargs: dict = OrderedDict()


def register_module_buffer_registration_hook(hook) -> RemovableHandle:
    h = RemovableHandle(_global_buffer_registration_hooks)
    _global_buffer_registration_hooks[h.id] = hook
    return h


def register_module_module_registration_hook(hook) -> RemovableHandle:
    h = RemovableHandle(_global_module_registration_hooks)
    _global_module_registration_hooks[h.id] = hook
    return h


def register_module_parameter_registration_hook(hook) -> RemovableHandle:
    h = RemovableHandle(_global_parameter_registration_hooks)
    _global_parameter_registration_hooks[h.id] = hook
    return h


def register_module_forward_pre_hook(hook) -> RemovableHandle:
    h = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[h.id] = hook
    return h


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    h = RemovableHandle(_global_forward_hooks,
                        extra_dict=[_global_forward_hooks_always_called,
                                    _global_forward_hooks_with_kwargs])
    _global_forward_hooks[h.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[h.id] = True
    if always_call:
        _global_forward_hooks_always_called[h.id] = True
    return h


def register_module_full_backward_pre_hook(hook) -> RemovableHandle:
    h = RemovableHandle(_global_backward_pre_hooks)
    _global_backward_pre_hooks[h.id] = hook
    return h


def register_module_full_backward_hook(hook) -> RemovableHandle:
    h = RemovableHandle(_global_backward_hooks)
    _global_backward_hooks[h.id] = hook
    return h


def _tensors(xs):
    from ..._tensor import Tensor
    return [i for i, x in enumerate(xs) if isinstance(x, Tensor)]


class BackwardHook:
    """Runs a module's full backward (pre-)hooks from the autograd graph.

    Inputs and outputs of the module's forward pass through identity autograd.Functions: the
    outputs' one sees grad_output (runs the pre-hooks), the inputs' one sees grad_input (runs the
    full hooks with both). When no input requires grad, the hooks run with grad_input all None.
    """

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs = None
        self.n_inputs = 0
        self.input_tensors_index = None
        self.inputs_need_grad = False

    def _wrap(self, args, on_grads):
        from ... import is_grad_enabled
        idx = _tensors(args)
        if not idx or not is_grad_enabled():
            return args, False
        if not any(args[i].requires_grad for i in idx):
            return args, False
        fn = _identity_function()
        new = fn.apply(on_grads, *[args[i] for i in idx])
        if not isinstance(new, tuple):
            new = (new,)
        out = list(args)
        for i, t in zip(idx, new):
            out[i] = t
        return tuple(out), True

    def setup_input_hook(self, args):
        self.n_inputs = len(args)
        self.input_tensors_index = _tensors(args)
        args, wrapped = self._wrap(args, self._on_grad_input)
        self.inputs_need_grad = wrapped
        return args

    def setup_output_hook(self, result):
        from ..._tensor import Tensor
        single = isinstance(result, Tensor)
        args = (result,) if single else result
        if not isinstance(args, tuple):
            return result
        args, _ = self._wrap(args, self._on_grad_output)
        return args[0] if single else args

    def _on_grad_output(self, grads):
        grads = tuple(grads)
        for hook in self.user_pre_hooks:
            r = hook(self.module, grads)
            if r is not None:
                r = (r,) if not isinstance(r, tuple) else r
                if len(r) != len(grads):
                    raise RuntimeError(f"Backward pre hook returned an invalid number of grads, "
                                       f"got {len(r)}, but expected {len(grads)}")
                grads = r
        self.grad_outputs = grads
        if not self.inputs_need_grad and self.user_hooks:
            warnings.warn("Full backward hook is firing when gradients are computed with respect "
                          "to module outputs since no inputs require gradients. See "
                          "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                          "#torch.nn.Module.register_full_backward_hook for more details.",
                          stacklevel=5)
            grad_inputs = tuple(None for _ in range(self.n_inputs))
            for hook in self.user_hooks:
                r = hook(self.module, grad_inputs, self.grad_outputs)
                if r is not None and not all(x is None for x in r):
                    raise RuntimeError("Backward hook for Modules where no input requires "
                                       "gradient should always return None or None for all "
                                       "gradients.")
        return grads

    def _on_grad_input(self, grads):
        # grads come for the tensor args only; the hooks see one entry per forward arg
        full = [None] * self.n_inputs
        for i, g in zip(self.input_tensors_index, grads):
            full[i] = g
        full = tuple(full)
        for hook in self.user_hooks:
            r = hook(self.module, full, self.grad_outputs)
            if r is not None:
                r = (r,) if not isinstance(r, tuple) else r
                if len(r) != len(full):
                    raise RuntimeError(f"Backward hook returned an invalid number of grad_input,"
                                       f" got {len(r)}, but expected {len(full)}")
                full = r
        return tuple(full[i] for i in self.input_tensors_index)


_IDENTITY = None


def _identity_function():
    """An autograd.Function passing tensors through and calling a callback on their grads."""
    global _IDENTITY
    if _IDENTITY is None:
        from ...autograd import Function

        class BackwardHookFunction(Function):
            @staticmethod
            def forward(ctx, on_grads, *tensors):
                ctx.on_grads = on_grads
                ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
                return tuple(t.view(t.shape) for t in tensors)

            @staticmethod
            def backward(ctx, *grads):
                return (None, *ctx.on_grads(grads))

        _IDENTITY = BackwardHookFunction
    return _IDENTITY
