"""`stack_module_state`: the parameters and buffers of same-shaped models stacked along a new
leading dim (for vmap over an ensemble with functional_call)."""
from __future__ import annotations

import ember

__all__ = ["stack_module_state"]


def stack_module_state(models):
    """({name: stacked parameter}, {name: stacked buffer}) of a list of same-structured models.
    The stacked parameters are new leaves (requiring grad where the originals do)."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/"
                           "eval mode.")
    first = type(models[0])
    if not all(type(m) is first for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    params = {}
    for name, p in models[0].named_parameters():
        t = ember.stack([dict(m.named_parameters())[name].detach() for m in models])
        params[name] = t.requires_grad_(p.requires_grad)
    buffers = {name: ember.stack([dict(m.named_buffers())[name] for m in models])
               for name, _ in models[0].named_buffers()}
    return params, buffers
