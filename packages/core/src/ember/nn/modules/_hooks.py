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

    The tensors among the forward's inputs and among its outputs pass through identity
    autograd.Functions: the outputs' one sees grad_output (runs the pre-hooks), the inputs' one
    sees grad_input (runs the full hooks with both). Hooks see one entry per forward argument
    or output, None where it is not a tensor. When no input requires grad, the full hooks run
    from the outputs' side with grad_input all None, as in PyTorch.
    """

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = -1
        self.input_tensors_index = self.output_tensors_index = None

    @staticmethod
    def _pack(indices, values, size) -> tuple:
        res = [None] * size
        for i, v in zip(indices, values):
            res[i] = v
        return tuple(res)

    def _wrap(self, args, on_grads):
        """(args with their tensors passed through the identity Function, tensor indices), or
        (args, None) when no tensor requires grad."""
        from ... import is_grad_enabled
        idx = _tensors(args)
        if not (idx and is_grad_enabled() and any(args[i].requires_grad for i in idx)):
            return args, None
        new = _identity_function().apply(on_grads, *[args[i] for i in idx])
        new = new if isinstance(new, tuple) else (new,)
        out = list(args)
        for i, t in zip(idx, new):
            out[i] = t
        return (tuple(out) if type(args) is tuple else type(args)(*out)), idx

    def setup_input_hook(self, args):
        res, self.input_tensors_index = self._wrap(args, self._on_grad_input)
        self.n_inputs = len(args)
        return res

    def setup_output_hook(self, result):
        is_tuple = isinstance(result, tuple)
        args = result if is_tuple else (result,)
        res, self.output_tensors_index = self._wrap(args, self._on_grad_output)
        self.n_outputs = len(args)
        return res if is_tuple else res[0]

    def _on_grad_output(self, grads):
        self.grad_outputs = self._pack(self.output_tensors_index, grads, self.n_outputs)
        for hook in self.user_pre_hooks:
            r = hook(self.module, self.grad_outputs)
            if r is None:
                continue
            r = r if isinstance(r, tuple) else (r,)
            if len(r) != len(self.grad_outputs):
                raise RuntimeError("Backward pre hook returned an invalid number of grad_output, "
                                   f"got {len(r)}, but expected {len(self.grad_outputs)}")
            self.grad_outputs = r
        local = self.grad_outputs
        if self.input_tensors_index is None:
            warnings.warn("Full backward hook is firing when gradients are computed with respect "
                          "to module outputs since no inputs require gradients. See "
                          "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                          "#torch.nn.Module.register_full_backward_hook for more details.",
                          stacklevel=5)
            grad_inputs = self._pack([], [], self.n_inputs)
            for hook in self.user_hooks:
                r = hook(self.module, grad_inputs, self.grad_outputs)
                if r is not None and not (isinstance(r, tuple) and all(x is None for x in r)):
                    raise RuntimeError("Backward hook for Modules where no input requires "
                                       "gradient should always return None or None for all "
                                       "gradients.")
            self.grad_outputs = None
        return tuple(local[i] for i in self.output_tensors_index)

    def _on_grad_input(self, grads):
        if self.grad_outputs is None:  # the output side never ran (outputs unused)
            return grads
        res = self._pack(self.input_tensors_index, grads, self.n_inputs)
        for hook in self.user_hooks:
            r = hook(self.module, res, self.grad_outputs)
            if r is None:
                continue
            r = r if isinstance(r, tuple) else (r,)
            if len(r) != len(res):
                raise RuntimeError("Backward hook returned an invalid number of grad_input, got "
                                   f"{len(r)}, but expected {len(res)}")
            res = r
        self.grad_outputs = None
        return tuple(res[i] for i in self.input_tensors_index)


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
