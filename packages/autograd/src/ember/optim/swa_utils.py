"""Stochastic weight averaging, as `torch.optim.swa_utils`: AveragedModel (SWA or EMA of a
model's weights), SWALR (anneal to a constant SWA learning rate), update_bn (recompute batch
norm statistics for the averaged weights)."""
from __future__ import annotations

import itertools
import math
from copy import deepcopy

import ember
from ember.nn import Module

from .lr_scheduler import LRScheduler, _per_group

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")


def get_ema_multi_avg_fn(decay=0.999):
    """In-place exponential moving average over lists of tensors."""
    _check_decay(decay)

    @ember.no_grad()
    def ema_update(ema_param_list, current_param_list, _):
        for p_ema, p_model in zip(ema_param_list, current_param_list):
            if p_ema.is_floating_point() or p_ema.is_complex():
                p_ema.lerp_(p_model, 1 - decay)
            else:
                p_ema.copy_(p_ema * decay + p_model * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    """In-place running (equal-weight) average over lists of tensors."""
    @ember.no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        for p_avg, p_model in zip(averaged_param_list, current_param_list):
            if p_avg.is_floating_point() or p_avg.is_complex():
                p_avg.lerp_(p_model, float(1 / (num_averaged + 1)))
            elif isinstance(num_averaged, ember.Tensor):
                p_avg.copy_(p_avg + (p_model - p_avg) / (num_averaged + 1))
            else:
                p_avg.add_(p_model - p_avg, alpha=1.0 / (num_averaged + 1))
    return swa_update


def get_ema_avg_fn(decay=0.999):
    _check_decay(decay)

    @ember.no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    @ember.no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A copy of `model` whose parameters (and, with use_buffers, buffers) are averaged by
    `update_parameters(model)`: an equal-weight running mean unless avg_fn / multi_avg_fn say
    otherwise (get_ema_multi_avg_fn for an EMA).

    >>> import ember
    >>> m = ember.nn.Linear(2, 1)
    >>> swa = ember.optim.swa_utils.AveragedModel(m)
    >>> swa.update_parameters(m); int(swa.n_averaged)
    1
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None,
                 use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", ember.tensor(0, dtype=ember.long, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @ember.no_grad()
    def update_parameters(self, model) -> None:
        if self.use_buffers:
            mine = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs = itertools.chain(model.parameters(), model.buffers())
        else:
            mine, theirs = self.parameters(), model.parameters()
        avg, cur = [], []
        first = bool(self.n_averaged == 0)
        for p_avg, p_model in zip(mine, theirs):
            p_model_ = p_model.detach().to(p_avg.device)
            avg.append(p_avg.detach())
            cur.append(p_model_)
            if first:
                p_avg.detach().copy_(p_model_)
        if self.n_averaged > 0:
            n = self.n_averaged
            if self.multi_avg_fn is not None:
                self.multi_avg_fn(avg, cur, n)
            elif self.avg_fn is None:
                get_swa_multi_avg_fn()(avg, cur, n)
            else:
                for p_avg, p_model in zip(avg, cur):
                    p_avg.copy_(self.avg_fn(p_avg, p_model, n.to(p_avg.device)))
        if not self.use_buffers:
            for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                b_swa.detach().copy_(b_model.detach().to(b_swa.device))
        self.n_averaged += 1


@ember.no_grad()
def update_bn(loader, model, device=None) -> None:
    """One pass over `loader` in train mode with cumulative batch-norm statistics (momentum None),
    so the averaged weights get matching running means and variances."""
    from ember.nn.modules.batchnorm import _BatchNorm
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for inp in loader:
        if isinstance(inp, (list, tuple)):
            inp = inp[0]
        if device is not None:
            inp = inp.to(device)
        model(inp)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr to `swa_lr` over `anneal_epochs` (cosine or linear), then holds."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        for lr, group in zip(_per_group(swa_lr, optimizer.param_groups, "swa_lr"),
                             optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        return swa_lr if alpha == 1 else (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, strategy) -> None:
        self._anneal_strategy = strategy
        self.anneal_func = self._cosine_anneal if strategy == "cos" else self._linear_anneal

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        groups = self.optimizer.param_groups
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
