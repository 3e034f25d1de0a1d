"""Registers ember-autograd with core: the engine object and the dispatcher's autograd hook."""

NAME = "autograd"


def register(registry) -> None:
    from ember import _dispatch

    from ._engine import ENGINE, record
    _dispatch.autograd_hook = record
    registry.add(NAME, wheel="ember-autograd", modules=["ember.autograd", "ember.optim"],
                 engine=ENGINE)
