"""ember-distributed: the component registers with core, and without it core names the wheel."""

import os
import subprocess
import sys

import ember.distributed._component as component
from ember._components import MissingComponentError, require


class FakeRegistry:
    def __init__(self):
        self.added = {}

    def add(self, name, *, wheel, modules=(), **hooks):
        self.added[name] = dict(wheel=wheel, modules=list(modules), **hooks)


def test_register_adds_the_component():
    reg = FakeRegistry()
    component.register(reg)
    assert reg.added["distributed"]["wheel"] == "ember-distributed"
    assert "ember.distributed" in reg.added["distributed"]["modules"]


def test_core_finds_the_component():
    info = require("distributed", "test")
    assert info["wheel"] == "ember-distributed"
    assert issubclass(MissingComponentError, ModuleNotFoundError)
    assert "ember.distributed" in info["modules"]


def test_without_the_component_core_names_the_wheel():
    # Same interpreter and path, minus this package's source folder.
    here = os.sep + os.path.join("packages", "distributed", "src")
    path = [p for p in sys.path if not p.rstrip(os.sep).endswith(here)]
    code = """
import ember
from ember._components import MissingComponentError, require
try:
    require("distributed", "ember.distributed")
except MissingComponentError as e:
    print(e)
else:
    raise SystemExit("component still found")
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    message = out.stdout.strip()
    assert "pip install ember-distributed" in message, message
    assert "\n" not in message and ". " not in message  # one sentence


def test_distributed_reports_not_initialized():
    import ember.distributed as dist

    assert dist.is_available() is True
    assert dist.is_initialized() is False
