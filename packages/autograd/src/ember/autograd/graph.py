"""`ember.autograd.graph`, as `torch.autograd.graph`: the node type, hook handles, and hooks on
the tensors autograd saves for backward.

>>> import ember
>>> x = ember.tensor([1., 2.], requires_grad=True)
>>> with ember.autograd.graph.saved_tensors_hooks(lambda t: t * 1, lambda t: t):
...     y = x.exp()                      # exp saves its result through the pack hook
>>> y.sum().backward()
"""
from __future__ import annotations

from ember._state import state
from ember._tensor import Tensor

from ._graph import SAVED_HOOKS, Node, RemovableHandle

__all__ = ["Node", "RemovableHandle", "saved_tensors_hooks", "save_on_cpu",
           "disable_saved_tensors_hooks", "increment_version"]


class saved_tensors_hooks:  # noqa: N801 - PyTorch's name
    """Within the block, every tensor an op (or a custom Function) saves for backward goes
    through pack_hook(tensor) -> anything, kept instead of the tensor; backward calls
    unpack_hook(packed) -> Tensor to get it back. The innermost pair wins."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        msg = state.__dict__.get("saved_hooks_disabled")
        if msg is not None:
            raise RuntimeError(msg)
        stack = state.__dict__.get("saved_hooks")
        state.saved_hooks = (stack or []) + [(self.pack_hook, self.unpack_hook)]
        self._prev = stack
        SAVED_HOOKS[0] += 1
        return self

    def __exit__(self, *exc):
        state.saved_hooks = self._prev
        SAVED_HOOKS[0] -= 1


class save_on_cpu(saved_tensors_hooks):  # noqa: N801
    """Saved tensors live on the CPU until backward needs them (on their device again)."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        def pack(t):
            if t.device.type == "cpu":
                return (t.device, t)
            return (t.device, t.detach().to("cpu"))

        def unpack(packed):
            device, t = packed
            return t if t.device == device else t.to(device)
        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:  # noqa: N801
    """Within the block, registering saved-tensor hooks raises RuntimeError(error_message)."""

    def __init__(self, error_message: str):
        self.error_message = error_message

    def __enter__(self):
        self._prev = state.__dict__.get("saved_hooks_disabled")
        state.saved_hooks_disabled = self.error_message
        return self

    def __exit__(self, *exc):
        state.saved_hooks_disabled = self._prev


def increment_version(tensor) -> None:
    """Bump the version counter of tensor(s), as an in-place write would (for writes autograd
    cannot see, e.g. through .data or numpy)."""
    for t in (tensor if isinstance(tensor, (tuple, list)) else (tensor,)):
        if isinstance(t, Tensor):
            t._storage.version += 1
