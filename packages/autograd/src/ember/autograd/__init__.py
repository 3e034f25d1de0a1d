"""ember.autograd: reverse-mode automatic differentiation over the op table's vjps.

>>> import ember
>>> x = ember.tensor([1., 2.], requires_grad=True)
>>> (x * x).sum().backward()
>>> x.grad.tolist()
[2.0, 4.0]
"""
from . import _component, forward_ad, functional, graph  # noqa: F401
from ._engine import backward, grad
from ._graph import Node
from .anomaly_mode import detect_anomaly, set_detect_anomaly
from .function import Function, once_differentiable
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import gradcheck, gradgradcheck


def Variable(data, requires_grad: bool = False, volatile: bool = False):  # noqa: N802
    """The pre-0.4 PyTorch wrapper: now just the tensor (with requires_grad set)."""
    return data.requires_grad_(requires_grad) if requires_grad else data


__all__ = ["Variable", "backward", "grad", "Node", "Function", "once_differentiable", "gradcheck",
           "gradgradcheck", "detect_anomaly", "set_detect_anomaly", "functional", "graph",
           "forward_ad",
           "no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled"]


def _ensure_hook():
    # importing ember.autograd directly (before core's component scan) still installs the hook
    from ember import _components, _dispatch
    if _dispatch.autograd_hook is None:
        _component.register(_components.registry)


_ensure_hook()


def __getattr__(name):
    # submodules not imported above (profiler, ...) load on first attribute access
    import importlib
    import importlib.util
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
