"""Registers ember-autograd with core: the engine object and the dispatcher's autograd hook."""

NAME = "autograd"


def register(registry) -> None:
    from ember import _dispatch

    from . import _native
    from ._engine import ENGINE, record
    _dispatch.autograd_hook = record
    _native.register()  # graph nodes of native hits built in C++ (when ember._C is built)
    registry.add(NAME, wheel="ember-autograd", modules=["ember.autograd", "ember.optim"],
                 engine=ENGINE)
