"""Registers ember-distributed with core (entry point `ember.components: distributed`)."""

NAME = "distributed"


def register(registry) -> None:
    registry.add(NAME, wheel="ember-distributed",
                 modules=["ember.distributed", "ember.multiprocessing"])
