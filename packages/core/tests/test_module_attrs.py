"""`import ember` alone exposes every public submodule as an attribute (lazily), and
`ember.__version__` / `ember.version` behave as torch's."""
import json
import operator
import os
import subprocess
import sys

import pytest

import ember
from ember.version import TorchVersion as EV

torch = pytest.importorskip("torch")
from torch.torch_version import TorchVersion as TV  # noqa: E402

# What real programs reach after `import torch` and that ember ships (in this tree).
MUST = ["nn", "nn.functional", "nn.init", "nn.utils", "optim", "optim.lr_scheduler", "autograd",
        "utils", "utils.data", "utils.checkpoint", "linalg", "amp", "backends", "random",
        "serialization", "library", "testing", "version", "cuda", "fx", "compiler", "export",
        "distributed"]

_PROBE = r"""
import json, pkgutil, sys
import ember
before = sorted(m for m in sys.modules if m.startswith("ember."))
out = {"before": before, "missing": [], "found": [], "optional": []}
def reach(dotted):
    obj = ember
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj.__name__
def walk(prefix, path):
    for m in pkgutil.iter_modules(path):
        if m.name.startswith("_") or m.name in ("tests", "conftest"):
            continue
        dotted = prefix + m.name
        try:
            name = reach(dotted)
        except ImportError as e:
            # an optional third-party package (tensorboard, ...) that is not installed: the
            # error must say what to install
            key = "optional" if "pip install" in str(e) else "missing"
            out[key].append(f"{dotted}: {type(e).__name__}: {e}")
            continue
        except Exception as e:
            out["missing"].append(f"{dotted}: {type(e).__name__}: {e}")
            continue
        out["found"].append(dotted)
        assert name == "ember." + dotted, (name, dotted)
for dotted in sys.argv[1:]:
    try:
        name = reach(dotted)
        if name == "ember._cuda_stub" and dotted == "cuda":   # ember-devices not installed
            assert not ember.cuda.is_available()
            out["optional"].append("cuda: the stub (ember-devices absent)")
            continue
        assert name == "ember." + dotted, name
        out["found"].append(dotted)
    except ImportError as e:   # another wheel's component, not installed: named in the error
        key = "optional" if "pip install ember-" in str(e) else "missing"
        out[key].append(f"{dotted}: {type(e).__name__}: {e}")
    except Exception as e:
        out["missing"].append(f"{dotted}: {type(e).__name__}: {e}")
walk("", ember.__path__)
walk("utils.", ember.utils.__path__)
print(json.dumps(out))
"""


def _probe(names):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", _PROBE, *names], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _installed(name: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec("ember." + name) is not None
    except ImportError:
        return False


def test_every_public_submodule_is_an_attribute_after_import_ember():
    out = _probe(MUST)
    assert out["missing"] == []
    # every module of an installed wheel is found; an absent component's error names its wheel
    want = {m for m in MUST if _installed(m.split(".")[0])}
    assert want <= set(out["found"]), (want - set(out["found"]), out["optional"])
    assert "nn" in want and "utils.data" in want
    # the walk covered every top-level public module on ember's path (other wheels' included)
    assert {"nn", "utils", "version", "optim"} <= set(out["found"])


def test_submodules_load_lazily():
    out = _probe([])
    # (ember.nn is left out: ember-export's component subclasses nn.Module when it loads)
    for name in ("ember.utils.data", "ember.version", "ember.testing", "ember.library",
                 "ember.optim", "ember.distributions", "ember.profiler", "ember.sparse",
                 "ember.nested", "ember.jit", "ember.onnx", "ember.nn.parallel"):
        assert name not in out["before"], name


def test_unknown_attribute_raises_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'"):
        ember.no_such_thing  # noqa: B018
    assert not hasattr(ember, "_private_nothing")
    assert not hasattr(ember.utils, "no_such_module")


def test_version_module_fields():
    assert isinstance(ember.__version__, str)
    assert ember.__version__ is ember.version.__version__
    assert ember.__version__.startswith(torch.__version__.split("+")[0])
    assert isinstance(ember.version.git_version, str)
    assert ember.version.cuda is None or isinstance(ember.version.cuda, str)
    from ember import __version__
    assert __version__ == ember.__version__


def test_version_cuda_none_without_devices(monkeypatch):
    import importlib.util

    import ember.version as v
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda n, *a: None if n == "cuda.bindings" else real(n, *a))
    assert v._cuda_version() is None


VERSIONS = ["2.13.0+cpu", "2.13.0", "1.10.0a", "2.0.0rc1", "2.1.0.dev20230101", "2.1.0.post1",
            "1!1.0", "2.13", "2.13.0+cu121", "0.1.0"]
OTHERS = ["2.13", "2.13.0", "2.13.0+cpu", "2.12.9", "2.14", "1.10", "1.10.0a", "1.10.0b1",
          "2.0.0rc1", "2.0", "2.1.0.dev1", "2.1.0.post1", "parrot", (2, 13), (2, 13, 0), (1, 2),
          (3,), "2.13.0+cu121"]


@pytest.mark.parametrize("v", VERSIONS)
def test_version_comparisons_match_torch(v):
    for o in OTHERS:
        for op in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq,
                   operator.ne):
            try:
                want = op(TV(v), o)
            except TypeError:      # torch: str vs tuple on an invalid version
                continue
            assert op(EV(v), o) == want, (v, op, o)


def test_version_against_packaging_version():
    packaging = pytest.importorskip("packaging.version")
    v = EV("2.13.0+ember0.1.0")
    assert v > packaging.Version("2.0") and v >= packaging.Version("2.13")
    assert v < packaging.Version("2.14.0a1")
    assert str(v) == "2.13.0+ember0.1.0" and hash(v) == hash("2.13.0+ember0.1.0")
