"""The multi-tensor (foreach/fused) and capturable parts of Adam/AdamW and SGD.

`foreach=None` and `fused=None` choose as PyTorch does: the multi-tensor path when every
parameter is on a device with multi-tensor kernels (ember-devices' CUDA backend answers
`foreach_optim`), the group is not differentiable, and lr is not a tensor unless capturable.
The backend updates all parameters of a group in a few launches, or answers False (a float64
parameter, an unusual layout) and the per-parameter path runs. `capturable=True` keeps the step
counters on the parameters' device (float32, as PyTorch) and computes bias corrections on the
device, so nothing is read back and the step can be captured in a CUDA graph.
"""
from __future__ import annotations

import math

import ember
from ember import _dispatch
from ember._device import get_backend
from ember._tensor import Tensor

__all__ = ["check_fused", "backend_foreach", "device_step", "adam_capturable"]

_CAPTURABLE_DEVICES = ("cuda",)


def check_fused(defaults: dict) -> None:
    """PyTorch's constructor checks of fused=True."""
    if defaults.get("fused"):
        if defaults.get("differentiable"):
            raise RuntimeError("`fused` does not support `differentiable`")
        if defaults.get("foreach"):
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def check_fused_param(p) -> None:
    if not p.is_floating_point():
        raise RuntimeError("`fused=True` requires all the params to be floating point Tensors "
                           f"of supported devices: ['cpu', 'cuda'] but {p.dtype} and "
                           f"{p.device.type}")


def check_capturable(params, steps) -> None:
    """PyTorch's check (outside compilation): capturable needs device params and steps."""
    if _dispatch.special[0]:
        return
    for p, s in zip(params, steps):
        if p.device.type not in _CAPTURABLE_DEVICES or p.device != s.device:
            raise AssertionError("If capturable=True, params and state_steps must be on "
                                 f"supported devices: {list(_CAPTURABLE_DEVICES)}.")


def wants_device_step(group) -> bool:
    return bool(group.get("capturable") or group.get("fused"))


def device_step(p):
    """A new step counter: on p's device for capturable/fused groups."""
    return ember.zeros((), dtype=ember.float32, device=p.device)


def place_step(state, p) -> None:
    """A capturable/fused group's step counter on p's device (one loaded from a state dict or
    made before capturable was switched on may sit on the host)."""
    s = state["step"]
    if not isinstance(s, Tensor):
        state["step"] = ember.tensor(float(s), dtype=ember.float32, device=p.device)
    elif s.device != p.device:
        state["step"] = s.to(device=p.device, dtype=ember.float32)


def _chooses_foreach(group, params) -> bool:
    if group.get("differentiable") or _dispatch.special[0]:
        return False
    if group.get("fused"):
        return True
    foreach = group.get("foreach")
    if foreach is False:
        return False
    if foreach is None:
        lr = group["lr"]
        if isinstance(lr, Tensor) and not group.get("capturable"):
            return False  # PyTorch does not flip foreach on here either
        return all(p.device.type == "cuda" for p in params)
    return True


def backend_foreach(group, params):
    """The parameters' backend multi-tensor update `foreach_optim(kind, lists, hyper) -> bool`,
    or None (the per-parameter path)."""
    if not params or not _chooses_foreach(group, params):
        return None
    p = params[0]
    dev = p.device
    if dev.type == "cpu" or any(hasattr(q.__class__, "__ember_dispatch__") or q.device != dev
                                for q in params):
        return None
    return getattr(get_backend(dev.type), "foreach_optim", None)


def _log(beta: float) -> float:
    return math.log(beta) if beta > 0 else -math.inf


def adam_capturable(p, grad, state, group) -> None:
    """One Adam/AdamW step of a capturable group with the step counter on the device: PyTorch's
    capturable single-tensor update, every value a device tensor (no host read)."""
    beta1, beta2 = group["betas"]
    lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
    step_t, exp_avg, exp_avg_sq = state["step"], state["exp_avg"], state["exp_avg_sq"]
    step_t.add_(1)
    if wd != 0:
        if group["decoupled_weight_decay"]:
            p.mul_(1 - lr * wd)
        else:
            grad = grad.add(p, alpha=wd)
    exp_avg.add_((grad - exp_avg) * (1 - beta1))
    exp_avg_sq.mul_(beta2).add_(grad * grad, alpha=1 - beta2)
    # beta ** step as exp(step * log(beta)): the same value, and no pow of a scalar base
    # (which Triton's interpreter lacks: the fake device would read the step back)
    bias_correction1 = 1 - (step_t * _log(beta1)).exp()
    bias_correction2 = 1 - (step_t * _log(beta2)).exp()
    step_size_neg = (lr / bias_correction1).neg()
    bias_correction2_sqrt = bias_correction2.sqrt()
    v = exp_avg_sq
    if group["amsgrad"]:
        mx = state["max_exp_avg_sq"]
        mx.copy_(ember.maximum(mx, exp_avg_sq))
        v = mx
    denom = (v.sqrt() / (bias_correction2_sqrt * step_size_neg)).add_(eps / step_size_neg)
    p.addcdiv_(exp_avg, denom)
