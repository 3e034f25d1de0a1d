"""Adadelta, ASGD and Rprop: PyTorch's single-tensor update rules in ember ops."""
from __future__ import annotations

import ember

from .optimizer import Optimizer, _get_value, _inc_step, _step_tensor, _use_grad

__all__ = ["Adadelta", "ASGD", "Rprop"]


def _scalar_tensor(v):
    """A 0-dim state scalar in PyTorch's optimizer scalar dtype (float64 under a float64 default)."""
    dt = ember.float64 if ember.get_default_dtype() == ember.float64 else ember.float32
    return ember.tensor(v, dtype=dt)


def _nonneg(**named):
    for name, v in named.items():
        if not 0.0 <= v:
            raise ValueError(f"Invalid {name}: {v}")


class Adadelta(Optimizer):
    """Adadelta, as `torch.optim.Adadelta`.

    >>> import ember
    >>> w = ember.ones(2, requires_grad=True)
    >>> opt = ember.optim.Adadelta([w])
    >>> w.sum().backward(); opt.step()
    >>> round(w[0].item(), 6)
    0.996838
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _nonneg(**{"learning rate": lr, "epsilon value": eps,
                   "weight_decay value": weight_decay})
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, rho, eps, wd = group["lr"], group["rho"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Adadelta does not support sparse gradients")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    state["square_avg"] = ember.zeros_like(p)
                    state["acc_delta"] = ember.zeros_like(p)
                _inc_step(state["step"])
                grad = -p.grad if group["maximize"] else p.grad
                if wd != 0:
                    grad = grad.add(p, alpha=wd)
                square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                square_avg.mul_(rho).add_(grad * grad, alpha=1 - rho)
                std = square_avg.add(eps).sqrt_()
                delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
                acc_delta.mul_(rho).add_(delta * delta, alpha=1 - rho)
                p.add_(delta, alpha=-lr)
        return loss


class ASGD(Optimizer):
    """Averaged SGD, as `torch.optim.ASGD`: the average of the iterates is state["ax"]."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _nonneg(**{"learning rate": lr, "weight_decay value": weight_decay})
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
            wd = group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("ASGD does not support sparse gradients")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _scalar_tensor(0.0)
                    state["eta"] = _scalar_tensor(float(lr))
                    state["mu"] = _scalar_tensor(1.0)
                    state["ax"] = ember.zeros_like(p)
                grad = -p.grad if group["maximize"] else p.grad
                _inc_step(state["step"])
                if wd != 0:
                    grad = grad.add(p, alpha=wd)
                eta = _get_value(state["eta"])
                p.mul_(1 - lambd * eta)
                p.add_(grad, alpha=-eta)
                ax, mu = state["ax"], state["mu"]
                if _get_value(mu) != 1:
                    ax.add_(p.sub(ax).mul_(mu))
                else:
                    ax.copy_(p)
                step = _get_value(state["step"])
                state["eta"].fill_(lr / ((1 + lambd * lr * step) ** alpha))
                state["mu"].fill_(1 / max(1, step - t0))
        return loss


class Rprop(Optimizer):
    """Resilient backpropagation, as `torch.optim.Rprop`: per-element step sizes grown by
    etas[1] while the gradient keeps its sign and shrunk by etas[0] when it flips."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _nonneg(**{"learning rate": lr})
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            etaminus, etaplus = group["etas"]
            lo, hi = group["step_sizes"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Rprop does not support sparse gradients")
                grad = -p.grad if group["maximize"] else p.grad
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    state["prev"] = ember.zeros_like(p)
                    state["step_size"] = ember.full_like(grad, float(group["lr"]))
                _inc_step(state["step"])
                prev, step_size = state["prev"], state["step_size"]
                sign = grad.mul(prev).sign()
                factor = ember.where(sign > 0, etaplus, ember.where(sign < 0, etaminus, 1.0))
                factor = factor.to(sign.dtype)
                step_size.mul_(factor).clamp_(lo, hi)
                grad = ember.where(factor == etaminus, ember.zeros_like(grad), grad)
                p.add_(grad.sign() * step_size, alpha=-1)
                prev.copy_(grad)
        return loss
