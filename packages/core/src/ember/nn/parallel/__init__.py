"""`ember.nn.parallel`: DataParallel / data_parallel and the DistributedDataParallel name.

Without a visible GPU, DataParallel calls the wrapped module directly (torch does the same), so
programs written for multi-GPU machines run on a CPU-only one unchanged; with one GPU it moves
the inputs to it. DistributedDataParallel comes from ember-distributed; without it (or before it
provides one) constructing it fails naming the wheel, while importing the name still works.
"""
from __future__ import annotations

from .data_parallel import DataParallel, data_parallel

__all__ = ["DataParallel", "data_parallel", "DistributedDataParallel"]


_STAND_IN = []


def _ddp_class():
    from ..._components import ensure_loaded, registry
    ensure_loaded()
    info = registry.get("distributed") or {}
    if "ddp" in info:   # ember-distributed registers its class's loader
        return info["ddp"]()
    if _STAND_IN:
        return _STAND_IN[0]
    from ..modules.module import Module

    class DistributedDataParallel(Module):
        """Stand-in: ember-distributed (with its DistributedDataParallel) is not installed."""

        def __init__(self, *args, **kwargs):
            from ..._components import MissingComponentError
            raise MissingComponentError(
                "ember.nn.parallel.DistributedDataParallel needs the ember-distributed "
                "component's DistributedDataParallel, which is not installed: "
                "pip install ember-distributed")
    _STAND_IN.append(DistributedDataParallel)
    return DistributedDataParallel


def __getattr__(name):
    if name == "DistributedDataParallel":
        return _ddp_class()
    raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
