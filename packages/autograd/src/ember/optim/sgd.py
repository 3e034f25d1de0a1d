"""SGD with momentum, dampening, Nesterov, weight decay and maximize (PyTorch's update rule)."""
from __future__ import annotations

import numpy as np

from . import _cpu_fused, _foreach
from .adam import _accel, _fusable
from .optimizer import Optimizer, _use_grad, required

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent, as `torch.optim.SGD` (single-tensor implementation)."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize: bool = False, foreach=None, differentiable: bool = False,
                 fused=None):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach,
                        differentiable=differentiable, fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)
        _foreach.check_fused(defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)

    @_use_grad
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, momentum = group["lr"], group["momentum"]
            dampening, wd = group["dampening"], group["weight_decay"]
            params = [p for p in group["params"] if p.grad is not None]
            if group["fused"]:
                for p in params:
                    _foreach.check_fused_param(p)
            if self._foreach(group, params):
                continue
            for p in params:
                buf = self.state[p].get("momentum_buffer") if momentum != 0 else None
                if buf is not None and _fusable(group, p, p.grad, buf):
                    _sgd_fused(p, p.grad, buf, lr, momentum, dampening, wd, group["nesterov"],
                               group["maximize"])
                    continue
                fused = _accel(group, p) if buf is not None else None
                if fused is not None and fused("sgd", (p, p.grad, buf), (
                        lr, momentum, dampening, wd, group["nesterov"], group["maximize"])):
                    continue
                grad = -p.grad if group["maximize"] else p.grad
                if wd != 0:
                    grad = grad.add(p, alpha=wd)
                if momentum != 0:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = state["momentum_buffer"] = grad.clone().detach()
                    else:
                        buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                    grad = grad.add(buf, alpha=momentum) if group["nesterov"] else buf
                p.add_(grad, alpha=-lr)
        return loss

    def _foreach(self, group, params) -> bool:
        """All of the group's parameters in a few launches of the backend (after the first
        step, which makes the momentum buffers); False: not done."""
        fn = _foreach.backend_foreach(group, params)
        if fn is None:
            return False
        bufs = None
        if group["momentum"] != 0:
            bufs = [self.state[p].get("momentum_buffer") for p in params]
            if any(b is None for b in bufs):
                return False
        hyper = {k: group[k] for k in ("lr", "momentum", "dampening", "weight_decay",
                                       "nesterov", "maximize")}
        return fn("sgd", (params, [p.grad for p in params], bufs), hyper)


def _sgd_fused(p, grad, buf, lr, momentum, dampening, wd, nesterov, maximize):
    """One momentum step on numpy views with in-place ufuncs: the operations of SGD.step's
    op-by-op path (after the first step, which creates the buffer), in the same order/dtype."""
    pp, g, b = p._np, grad._np, buf._np
    if _cpu_fused.sgd(pp, g, b, lr, momentum, dampening, wd, nesterov, maximize):
        p._bump()
        buf._bump()
        return
    if maximize:
        g = np.negative(g)
    if wd != 0:
        g = g + pp * wd
    b *= momentum                  # buf * momentum + grad * (1 - dampening)
    b += g * (1 - dampening)
    d = g + b * momentum if nesterov else b
    pp += d * -lr                  # p + grad * -lr
    p._bump()
    buf._bump()
