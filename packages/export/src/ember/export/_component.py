"""Registers ember-export with core (entry point `ember.components: export`)."""

NAME = "export"


def register(registry) -> None:
    registry.add(NAME, wheel="ember-export", modules=["ember.export"])
