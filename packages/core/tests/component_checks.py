"""The checks every component package runs on itself: it registers with core, and without its
source folder core's MissingComponentError names the wheel in one sentence.

    globals().update(component_tests("compiler", "ember.compiler", "ember.compile"))
"""
import importlib
import os
import subprocess
import sys

from ember._components import MissingComponentError, require


class FakeRegistry:
    def __init__(self):
        self.added = {}

    def add(self, name, *, wheel, modules=(), **hooks):
        self.added[name] = dict(wheel=wheel, modules=list(modules), **hooks)


def component_tests(name: str, module: str, feature: str, folder: str | None = None) -> dict:
    """Test functions for component `name` (wheel ember-<folder>) shipping `module`."""
    folder = folder or name
    wheel = f"ember-{folder}"

    def test_register_adds_the_component():
        reg = FakeRegistry()
        importlib.import_module(f"{module}._component").register(reg)
        assert reg.added[name]["wheel"] == wheel
        assert module in reg.added[name]["modules"]

    def test_core_finds_the_component():
        info = require(name, "test")
        assert info["wheel"] == wheel
        assert issubclass(MissingComponentError, ModuleNotFoundError)
        assert module in info["modules"]

    def test_without_the_component_core_names_the_wheel():
        # Same interpreter and path, minus this package's source folder.
        here = os.sep + os.path.join("packages", folder, "src")
        path = [p for p in sys.path if p and not p.rstrip(os.sep).endswith(here)]
        code = (f"from ember._components import MissingComponentError, require\n"
                f"try:\n    require({name!r}, {feature!r})\n"
                f"except MissingComponentError as e:\n    print(e)\n"
                f"else:\n    raise SystemExit('component still found')\n")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True)
        assert out.returncode == 0, out.stderr
        message = out.stdout.strip()
        assert f"pip install {wheel}" in message, message
        assert "\n" not in message and ". " not in message  # one sentence

    return {f.__name__: f for f in (test_register_adds_the_component,
                                    test_core_finds_the_component,
                                    test_without_the_component_core_names_the_wheel)}
