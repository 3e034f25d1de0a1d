"""`ember.version`: the version string programs compare (`__version__`), and build facts
(`cuda`, `git_version`), as `torch.version`.

`__version__` names the PyTorch API level ember implements as its release ("2.13.0") and ember's
own core version as the local label ("+ember0.1.0"), so checks written for PyTorch
(`torch.__version__ >= "2.0"`) take the paths meant for the API ember provides.

>>> import ember
>>> ember.__version__ >= "2.0", ember.__version__ >= (2, 1), ember.__version__ < "3"
(True, True, True)
>>> ember.version.cuda is None or isinstance(ember.version.cuda, str)
True
"""
from __future__ import annotations

import os
import re

__all__ = ["__version__", "cuda", "git_version", "debug", "hip", "xpu", "ember",
           "TorchVersion", "EmberVersion", "InvalidVersion"]

TORCH_API = "2.13.0"


class InvalidVersion(ValueError):
    """A string that is not a PEP 440 version (packaging.version.InvalidVersion's role)."""


_PEP440 = re.compile(
    r"^\s*v?(?:(?P<epoch>\d+)!)?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre_l>a|b|c|rc|alpha|beta|pre|preview)[-_.]?(?P<pre_n>\d+)?)?"
    r"(?:-(?P<post_n1>\d+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d+)?)?"
    r"(?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>\d+)?)?"
    r"(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$", re.IGNORECASE)
_INF, _NEG_INF = (1, 0), (-1, 0)        # sort above / below every (0, ...) key
_PRE = {"alpha": "a", "beta": "b", "c": "rc", "pre": "rc", "preview": "rc"}


def _key(text: str) -> tuple:
    """PEP 440's ordering key of a version string (what packaging.version.Version sorts by)."""
    m = _PEP440.match(text)
    if m is None:
        raise InvalidVersion(f"Invalid version: {text!r}")
    release = [int(p) for p in m["release"].split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    pre_l = m["pre_l"]
    post = m["post_n1"] or m["post_n2"] or ("0" if m["post_l"] else None)
    dev = m["dev_n"] or ("0" if m["dev_l"] else None)
    if pre_l is None:
        pre = _NEG_INF if post is None and dev is not None else _INF
    else:
        pre_l = _PRE.get(pre_l.lower(), pre_l.lower())
        pre = (0, pre_l, int(m["pre_n"] or 0))
    post_k = _NEG_INF if post is None else (0, int(post))
    dev_k = _INF if dev is None else (0, int(dev))
    if m["local"] is None:
        local = _NEG_INF
    else:
        parts = re.split(r"[-_.]", m["local"].lower())
        local = (0, tuple((1, int(p), "") if p.isdigit() else (0, 0, p) for p in parts))
    return (int(m["epoch"] or 0), tuple(release), pre, post_k, dev_k, local)


def _as_text(other) -> str:
    if isinstance(other, str):
        return other
    if hasattr(other, "release") and hasattr(other, "public"):   # packaging's Version
        return str(other)
    try:
        return ".".join(str(p) for p in other)                  # (2, 1) -> "2.1"
    except TypeError:
        raise InvalidVersion(other) from None


class TorchVersion(str):
    """A str that compares as a version with strings, tuples and packaging Versions.

    >>> v = TorchVersion("2.13.0+cpu")
    >>> v > "2.9", v > (2, 13), v == "2.13.0+cpu", v < "2.13.1", str(v)
    (True, True, True, True, '2.13.0+cpu')
    """

    __slots__ = ()

    def _cmp(self, other, method: str) -> bool:
        try:
            a, b = _key(self), _key(_as_text(other))
        except InvalidVersion:
            return getattr(str, method)(self, other)    # 'parrot': plain string comparison
        return getattr(a, method)(b)

    def __gt__(self, other):
        return self._cmp(other, "__gt__")

    def __ge__(self, other):
        return self._cmp(other, "__ge__")

    def __lt__(self, other):
        return self._cmp(other, "__lt__")

    def __le__(self, other):
        return self._cmp(other, "__le__")

    def __eq__(self, other):
        return self._cmp(other, "__eq__")

    # no __ne__: torch's TorchVersion keeps str's (so "2.13.0" != "2.13" holds there too)
    __hash__ = str.__hash__


EmberVersion = TorchVersion


def _core_version() -> str:
    """ember-core's version: the source tree's VERSION file, else the installed wheel's."""
    here = os.path.join(os.path.dirname(__file__), "..", "..", "VERSION")
    try:
        with open(here) as f:
            return f.read().strip()
    except OSError:
        pass
    try:
        from importlib.metadata import version
        return version("ember-core")
    except Exception:  # noqa: BLE001 - neither a source tree nor a wheel: unknown
        return "0.0.0"


def _cuda_version():
    """The CUDA version ember-devices runs on (cuda-bindings' major.minor); None without it."""
    import importlib.util
    try:
        if importlib.util.find_spec("ember.cuda") is None or \
                importlib.util.find_spec("cuda.bindings") is None:
            return None
        from importlib.metadata import version
        major, minor = version("cuda-bindings").split(".")[:2]
    except Exception:  # noqa: BLE001 - no usable CUDA: a CPU build
        return None
    return f"{major}.{minor}"


ember = _core_version()
__version__ = TorchVersion(f"{TORCH_API}+ember{ember}")
git_version = "unknown"
debug = False
hip = None
xpu = None
cuda = _cuda_version()
