"""The legacy hook forms of weight_norm and spectral_norm (`torch.nn.utils.weight_norm`,
`torch.nn.utils.spectral_norm`): the parameter is split into new parameters and a forward
pre-hook recomputes `module.<name>` from them before each call."""
from __future__ import annotations

import warnings

import ember

from ..parameter import Parameter
from ._norms import norm_except_dim
from ._norms import weight_norm as _weight_norm

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm", "SpectralNorm", "spectral_norm",
           "remove_spectral_norm"]


class WeightNorm:
    """Forward pre-hook: module.<name> = <name>_g * <name>_v / ||<name>_v||."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, -1 if dim is None else dim

    def compute_weight(self, module):
        return _weight_norm(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"),
                            self.dim)

    @staticmethod
    def apply(module, name: str, dim: int) -> WeightNorm:
        warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning,
                      stacklevel=3)
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same "
                                   f"parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim)
                                                         .detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name: str = "weight", dim: int = 0):
    """Deprecated hook form of parametrizations.weight_norm: parameters <name>_g and <name>_v."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name: str = "weight"):
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")


class SpectralNorm:
    """Forward pre-hook: module.<name> = <name>_orig / sigma, with sigma from power iteration
    on the buffers <name>_u and <name>_v (one step per call in training mode)."""

    _version = 1

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12) -> None:
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim = name, dim
        self.n_power_iterations, self.eps = n_power_iterations, eps

    def reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.dim()) if d != self.dim])
        return weight.reshape(weight.size(0), -1)

    def compute_weight(self, module, do_power_iteration: bool):
        F = ember.nn.functional
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with ember.no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(ember.mv(weight_mat.t(), u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(ember.mv(weight_mat, v), dim=0, eps=self.eps))
                u, v = u.clone(), v.clone()
        sigma = ember.dot(u, ember.mv(weight_mat, v))
        return weight / sigma

    def remove(self, module) -> None:
        with ember.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        for suffix in ("", "_u", "_v", "_orig"):
            delattr(module, self.name + suffix)
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, module.training))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps) -> SpectralNorm:
        F = ember.nn.functional
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        if weight is None:
            raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        with ember.no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).size()
            u = F.normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=fn.eps)
            v = F.normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        setattr(module, fn.name, weight.detach())
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None):
    """Hook form of spectral normalization: parameter <name>_orig, buffers <name>_u/<name>_v."""
    if dim is None:
        from .parametrizations import _default_dim
        dim = _default_dim(module)
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name: str = "weight"):
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
