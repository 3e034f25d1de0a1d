"""`ember.random`: the seed API of PyTorch's torch.random, and `fork_rng`.

>>> import ember
>>> with ember.random.fork_rng():
...     _ = ember.manual_seed(1); _ = ember.rand(2)   # the outer stream is untouched
"""
from __future__ import annotations

import contextlib

from ._random import (
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "fork_rng"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled: bool = True, _caller="fork_rng", _devices_kw="devices",
             device_type: str = "cuda"):
    """Restore the generators' states on exit: the CPU's and, as PyTorch, those of `devices`
    (device indices; default all) of `device_type` when its backend module is present and has a
    device (through `ember.<device_type>`'s get/set_rng_state, as torch.random.fork_rng)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    import ember
    mod = getattr(ember, device_type, None)
    saved = []
    if mod is not None and getattr(mod, "is_available", bool)() and hasattr(mod, "get_rng_state"):
        idx = range(mod.device_count()) if devices is None else [
            d if isinstance(d, int) else ember.device(d).index or 0 for d in devices]
        saved = [(i, mod.get_rng_state(i)) for i in idx]
    try:
        yield
    finally:
        set_rng_state(state)
        for i, s in saved:
            mod.set_rng_state(s, i)
