"""Adam, AdamW, Adamax, NAdam, RAdam: PyTorch's single-tensor update rules in ember ops."""
from __future__ import annotations

import numpy as np

import ember
from ember import _dispatch
from ember._device import get_backend

from . import _cpu_fused, _foreach
from .optimizer import Optimizer, _get_value, _inc_step, _step_tensor, _use_grad

__all__ = ["Adam", "AdamW", "Adamax", "NAdam", "RAdam"]


def _check(lr, eps, betas, weight_decay):
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def _lerp_(a, b, w):
    """a.lerp_(b, w) for a scalar weight: a + w * (b - a)."""
    return a.add_((b - a) * w)


def _grads(group, p):
    return -p.grad if group["maximize"] else p.grad


def _state(opt, p, *zeros: str, mu_product: bool = False) -> dict:
    """p's state in opt; on its first step: the step counter, NAdam's mu_product (1), and
    zero tensors like p named `zeros` (in this order: state_dict's)."""
    state = opt.state[p]
    if len(state) == 0:
        state["step"] = _step_tensor()
        if mu_product:
            state["mu_product"] = ember.tensor(1.0, dtype=ember.float32)
        for name in zeros:
            state[name] = ember.zeros_like(p)
    return state


_FUSED_DTYPES = (ember.float32, ember.float64)


def _fusable(group, p, *others) -> bool:
    """The numpy update below applies: plain CPU float tensors of one dtype, float hyper-
    parameters, no dispatch mode watching (a mode must see every op)."""
    if _dispatch.special[0] or group["differentiable"] or not isinstance(group["lr"], float) \
            or hasattr(p.__class__, "__ember_dispatch__"):  # a DTensor: its ops, not numpy's
        return False
    d = p.dtype
    if d not in _FUSED_DTYPES or p.device.type != "cpu":
        return False
    return all(t.dtype is d and t.device.type == "cpu" for t in others)


def _accel(group, p):
    """A device backend's fused update, `fused_optim(kind, tensors, hyper) -> bool` (ember-devices'
    CUDA backend: one kernel per parameter), or None; the same conditions as the numpy path."""
    if p.device.type == "cpu" or _dispatch.special[0] or group["differentiable"] \
            or not isinstance(group["lr"], float) or hasattr(p.__class__, "__ember_dispatch__"):
        return None
    return getattr(get_backend(p.device.type), "fused_optim", None)


def _adam_fused(p, grad, exp_avg, exp_avg_sq, step, lr, beta1, beta2, eps, wd, decoupled,
                maximize):
    """One Adam/AdamW step on numpy views with in-place ufuncs: the same operations, in the same
    order and dtype, as the op-by-op update in Adam.step, without its temporaries."""
    pp, g, m, v = p._np, grad._np, exp_avg._np, exp_avg_sq._np
    if _cpu_fused.adam(pp, g, m, v, step, lr, beta1, beta2, eps, wd, decoupled, maximize):
        for x in (p, exp_avg, exp_avg_sq):
            x._bump()
        return
    if maximize:
        g = np.negative(g)
    if wd != 0:
        if decoupled:
            np.multiply(pp, 1 - lr * wd, out=pp)
        else:
            g = g + pp * wd
    t = np.subtract(g, m)          # lerp: m + (g - m) * (1 - beta1)
    t *= 1 - beta1
    m += t
    v *= beta2                     # v * beta2 + (g * g) * (1 - beta2)
    np.multiply(g, g, out=t)
    t *= 1 - beta2
    v += t
    bias_correction1 = 1 - beta1 ** step
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    np.sqrt(v, out=t)              # denom = sqrt(v) / bias_correction2_sqrt + eps
    t /= bias_correction2_sqrt
    t += eps
    u = np.multiply(m, -(lr / bias_correction1))
    u /= t
    pp += u
    for x in (p, exp_avg, exp_avg_sq):
        x._bump()


class Adam(Optimizer):
    """Adam (and, with decoupled_weight_decay=True, AdamW), as `torch.optim.Adam`."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        _check(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        _foreach.check_fused(defaults)
        super().__init__(params, defaults)

    def _init_group(self, group):
        """The parameters with gradients and their states (made on first use)."""
        params, grads, states = [], [], []
        dev_step = _foreach.wants_device_step(group)
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                if group["fused"]:
                    _foreach.check_fused_param(p)
                state["step"] = _foreach.device_step(p) if dev_step else _step_tensor()
                state["exp_avg"] = ember.zeros_like(p)
                state["exp_avg_sq"] = ember.zeros_like(p)
                if group["amsgrad"]:
                    state["max_exp_avg_sq"] = ember.zeros_like(p)
            elif dev_step:
                _foreach.place_step(state, p)
            params.append(p)
            grads.append(p.grad)
            states.append(state)
        if group["capturable"] and params:
            _foreach.check_capturable(params, [s["step"] for s in states])
        return params, grads, states

    def _foreach(self, group, params, grads, states) -> bool:
        """All of the group's parameters in a few launches of the backend; False: not done."""
        fn = _foreach.backend_foreach(group, params)
        if fn is None:
            return False
        beta1, beta2 = group["betas"]
        steps = [s["step"] for s in states]
        # device counters (capturable or fused): the kernels add 1 and read them there
        amsgrad, cap = group["amsgrad"], steps[0].device.type != "cpu"
        hyper = dict(lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                     weight_decay=group["weight_decay"], maximize=group["maximize"],
                     decoupled=group["decoupled_weight_decay"], amsgrad=amsgrad,
                     capturable=cap)
        if not cap:
            if any(s.device.type != "cpu" for s in steps):
                return False
            hyper["step_values"] = [_get_value(s) + 1 for s in steps]
        lists = (params, grads, [s["exp_avg"] for s in states],
                 [s["exp_avg_sq"] for s in states],
                 [s["max_exp_avg_sq"] for s in states] if amsgrad else None,
                 steps if cap else None)
        if not fn("adam", lists, hyper):
            return False
        if not cap:
            for s in steps:
                _inc_step(s)
        return True

    @_use_grad
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            params, grads, states = self._init_group(group)
            if not params or self._foreach(group, params, grads, states):
                continue
            for p, state in zip(params, states):
                self._step_one(group, p, state)
        return loss

    @staticmethod
    def _step_one(group, p, state):
        beta1, beta2 = group["betas"]
        lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
        grad = _grads(group, p)
        step_t, exp_avg, exp_avg_sq = state["step"], state["exp_avg"], state["exp_avg_sq"]
        if group["capturable"] or step_t.device.type != "cpu":
            return _foreach.adam_capturable(p, grad, state, group)
        _inc_step(step_t)
        if not group["amsgrad"] and _fusable(group, p, p.grad, exp_avg, exp_avg_sq):
            return _adam_fused(p, p.grad, exp_avg, exp_avg_sq, _get_value(step_t), lr, beta1,
                               beta2, eps, wd, group["decoupled_weight_decay"],
                               group["maximize"])
        fused = None if group["amsgrad"] else _accel(group, p)
        if fused is not None and fused("adam", (p, p.grad, exp_avg, exp_avg_sq), (
                lr, beta1, beta2, eps, wd, group["decoupled_weight_decay"],
                group["maximize"], _get_value(step_t))):
            return
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            else:
                grad = grad.add(p, alpha=wd)
        _lerp_(exp_avg, grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).add_(grad * grad, alpha=1 - beta2)
        step = _get_value(step_t)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
        step_size = lr / bias_correction1
        if group["amsgrad"]:
            mx = state["max_exp_avg_sq"]
            mx.copy_(ember.maximum(mx, exp_avg_sq))
            denom = (mx.sqrt() / bias_correction2_sqrt).add_(eps)
        else:
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        p.add_(exp_avg * -step_size / denom)


class AdamW(Adam):
    """Adam with decoupled weight decay (default 1e-2), as `torch.optim.AdamW`."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)


class Adamax(Optimizer):
    """Adamax (Adam with the infinity norm), as `torch.optim.Adamax`."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = _grads(group, p)
                state = _state(self, p, "exp_avg", "exp_inf")
                step_t, exp_avg, exp_inf = state["step"], state["exp_avg"], state["exp_inf"]
                _inc_step(step_t)
                if wd != 0:
                    grad = grad.add(p, alpha=wd)
                _lerp_(exp_avg, grad, 1 - beta1)
                exp_inf.copy_(ember.maximum(exp_inf * beta2, grad.abs() + eps))
                clr = lr / (1 - beta1 ** _get_value(step_t))
                p.add_(exp_avg * -clr / exp_inf)
        return loss


class NAdam(Optimizer):
    """Adam with Nesterov momentum, as `torch.optim.NAdam`."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check(lr, eps, betas, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
            md = group["momentum_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = _grads(group, p)
                state = _state(self, p, "exp_avg", "exp_avg_sq", mu_product=True)
                step_t, mu_product = state["step"], state["mu_product"]
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                _inc_step(step_t)
                step = _get_value(step_t)
                bias_correction2 = 1 - beta2 ** step
                if wd != 0:
                    if group["decoupled_weight_decay"]:
                        p.mul_(1 - lr * wd)
                    else:
                        grad = grad.add(p, alpha=wd)
                mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * md)))
                mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * md)))
                mu_product.mul_(mu)
                _lerp_(exp_avg, grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).add_(grad * grad, alpha=1 - beta2)
                denom = exp_avg_sq.div(bias_correction2).sqrt().add_(eps)
                mp = _get_value(mu_product)
                mu_product_next = mp * mu_next
                p.add_(grad * (-lr * (1.0 - mu) / (1.0 - mp)) / denom)
                p.add_(exp_avg * ((-lr * mu_next) / (1.0 - mu_product_next)) / denom)
        return loss


class RAdam(Optimizer):
    """Rectified Adam, as `torch.optim.RAdam`."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = _grads(group, p)
                state = _state(self, p, "exp_avg", "exp_avg_sq")
                step_t, exp_avg, exp_avg_sq = state["step"], state["exp_avg"], state["exp_avg_sq"]
                _inc_step(step_t)
                step = _get_value(step_t)
                if wd != 0:
                    if group["decoupled_weight_decay"]:
                        p.mul_(1 - lr * wd)
                    else:
                        grad = grad.add(p, alpha=wd)
                _lerp_(exp_avg, grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).add_(grad * grad, alpha=1 - beta2)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                corrected = exp_avg / bias_correction1
                rho_inf = 2 / (1 - beta2) - 1
                rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
                if rho_t > 5.0:
                    rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                            / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                    adaptive = (bias_correction2 ** 0.5) / exp_avg_sq.sqrt().add_(eps)
                    p.add_(corrected * lr * adaptive * rect, alpha=-1.0)
                else:
                    p.add_(corrected * lr, alpha=-1.0)
        return loss



