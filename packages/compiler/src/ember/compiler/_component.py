"""Registers ember-compiler with core (entry point `ember.components: compiler`)."""

NAME = "compiler"


def _compile(model, **kwargs):
    from ember._dynamo import optimize
    return optimize(model, **kwargs)


def register(registry) -> None:
    registry.add(
        NAME, wheel="ember-compiler", modules=["ember.fx", "ember.compiler"], compile=_compile
    )
