"""SparseAdam, as `torch.optim.SparseAdam`: Adam on the entries a sparse (COO) gradient holds.

A dense gradient is refused with PyTorch's error. The update reads the coalesced gradient's
`_indices()` / `_values()` and touches only those rows of the moments and the parameter.
"""
from __future__ import annotations

import math

from .optimizer import Optimizer, _use_grad

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    """Masked Adam for dense parameters with sparse-layout gradients (nn.Embedding(sparse=True))."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        sparse, cplx = [], []
        for gi, group in enumerate(self.param_groups):
            for pi, p in enumerate(group["params"]):
                if p.is_sparse:
                    sparse.append([gi, pi])
                if p.is_complex():
                    cplx.append([gi, pi])
        if sparse:
            raise ValueError(f"Sparse params at indices {sparse}: SparseAdam requires dense "
                             "parameter tensors")
        if cplx:
            raise ValueError(f"Complex params at indices {cplx}: SparseAdam does not support "
                             "complex parameters")

    @_use_grad
    def step(self, closure=None):
        import ember
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if not p.grad.is_sparse:
                    raise RuntimeError("SparseAdam does not support dense gradients, please "
                                       "consider Adam instead")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = ember.zeros_like(p)
                    state["exp_avg_sq"] = ember.zeros_like(p)
                state["step"] += 1
                grad = -p.grad if group["maximize"] else p.grad
                _sparse_adam_update(p, grad.coalesce(), state, beta1, beta2, group["eps"],
                                    group["lr"])
        return loss


def _sparse_adam_update(p, grad, state, beta1, beta2, eps, lr):
    values = grad._values()
    if values.numel() == 0:
        return
    rows = tuple(grad._indices())             # one index tensor per sparse dim
    exp_avg, exp_avg_sq, step = state["exp_avg"], state["exp_avg_sq"], state["step"]
    old_avg, old_sq = exp_avg[rows], exp_avg_sq[rows]
    avg_update = values.sub(old_avg).mul_(1 - beta1)
    sq_update = values.pow(2).sub_(old_sq).mul_(1 - beta2)
    exp_avg.index_put_(rows, avg_update, accumulate=True)
    exp_avg_sq.index_put_(rows, sq_update, accumulate=True)
    numer = avg_update.add_(old_avg)
    denom = sq_update.add_(old_sq).sqrt_().add_(eps)
    step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
    p.index_put_(rows, numer.div_(denom) * -step_size, accumulate=True)
