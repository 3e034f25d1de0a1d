"""Registers ember-distributed with core (entry point `ember.components: distributed`)."""

NAME = "distributed"


def _ddp():
    """DistributedDataParallel, imported on first use (core's ember.nn.parallel asks for it)."""
    from ._ddp import DistributedDataParallel
    return DistributedDataParallel


def register(registry) -> None:
    registry.add(NAME, wheel="ember-distributed",
                 modules=["ember.distributed", "ember.multiprocessing"], ddp=_ddp)
