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
    """Restore the default generator's state on exit (CPU; device generators are their
    backend's)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
