"""Registers ember-devices with core (entry point `ember.components: devices`).

The subpackage is `ember.cuda` but the component is `devices`: NAME tells core's source-tree scan.
"""

NAME = "devices"


def register(registry) -> None:
    registry.add(NAME, wheel="ember-devices", modules=["ember.cuda"])
