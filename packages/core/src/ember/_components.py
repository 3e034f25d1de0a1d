"""Finding installed components (ember-autograd, ember-devices, ...) and naming missing ones.

Each component's wheel declares an entry point in group `ember.components` whose target is
`register(registry)`. Running from source (Bazel, PYTHONPATH over packages/*/src) there is no
dist-info, so we also scan the `ember` namespace for subpackages with a `_component.py`.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import os
import pkgutil

__all__ = ["MissingComponentError", "registry", "ensure_loaded", "engine", "require"]


class MissingComponentError(ModuleNotFoundError):
    """A feature needs a component (wheel) that is not installed."""


class Registry:
    """What components registered: name -> dict(wheel=..., modules=[...], **hooks)."""

    def __init__(self):
        self.components: dict[str, dict] = {}

    def add(self, name: str, *, wheel: str, modules=(), **hooks) -> None:
        self.components[name] = {"wheel": wheel, "modules": list(modules), **hooks}

    def get(self, name: str):
        return self.components.get(name)


registry = Registry()
_loaded = False
_loading = False

# feature -> (component, wheel): what `require` names when the component is absent.
WHEELS = {"autograd": "ember-autograd", "devices": "ember-devices",
          "compiler": "ember-compiler", "export": "ember-export",
          "distributed": "ember-distributed"}


def ensure_loaded() -> None:
    """Load every installed component once (entry points first, then the source-tree scan)."""
    global _loaded, _loading
    if _loaded or _loading:
        return
    _loading = True
    try:
        seen = set()
        for ep in importlib.metadata.entry_points(group="ember.components"):
            if ep.name in seen:
                continue
            seen.add(ep.name)
            ep.load()(registry)
        import ember
        for mod in pkgutil.iter_modules(ember.__path__):
            if not mod.ispkg or mod.name.startswith("_"):
                continue
            # look on disk: find_spec would import the subpackage (ember.nn, ...) itself
            where = getattr(mod.module_finder, "path", None)
            if where is None or not os.path.exists(
                    os.path.join(where, mod.name, "_component.py")):
                continue
            m = importlib.import_module(f"ember.{mod.name}._component")
            name = getattr(m, "NAME", mod.name)
            if name not in registry.components:
                m.register(registry)
        _loaded = True
    finally:
        _loading = False


def require(component: str, feature: str) -> dict:
    """The registration of `component`, or MissingComponentError naming its wheel."""
    ensure_loaded()
    info = registry.get(component)
    if info is None:
        wheel = WHEELS.get(component, f"ember-{component}")
        raise MissingComponentError(
            f"{feature} needs the {wheel} component, which is not installed: "
            f"pip install {wheel}")
    return info


def engine(feature: str):
    """The autograd engine registered by ember-autograd."""
    return require("autograd", feature)["engine"]
