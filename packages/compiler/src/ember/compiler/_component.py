"""Registers ember-compiler with core (entry point `ember.components: compiler`)."""

NAME = "compiler"


def _compile(model, **kwargs):
    raise NotImplementedError(
        "ember.compile: ember-compiler is installed but its compiler is not written yet"
    )


def register(registry) -> None:
    registry.add(
        NAME, wheel="ember-compiler", modules=["ember.fx", "ember.compiler"], compile=_compile
    )
