"""ember's stable ABI: the version it offers and where its C headers are.

>>> import ember_abi
>>> ember_abi.ABI_VERSION
(1, 0)
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ABI_VERSION", "ABI_VERSION_MAJOR", "ABI_VERSION_MINOR", "get_include"]

# Must match EMBER_ABI_VERSION_MAJOR / _MINOR in include/ember/abi.h (a test checks).
ABI_VERSION_MAJOR = 1
ABI_VERSION_MINOR = 0
ABI_VERSION = (ABI_VERSION_MAJOR, ABI_VERSION_MINOR)


def get_include() -> str:
    """The folder to add to an extension's include path (it holds ember/abi.h).

    >>> import os, ember_abi
    >>> os.path.exists(os.path.join(ember_abi.get_include(), "ember", "abi.h"))
    True
    """
    here = Path(__file__).resolve().parent
    for candidate in (here / "include", here.parent.parent / "include"):  # wheel, source tree
        if (candidate / "ember" / "abi.h").exists():
            return str(candidate)
    raise FileNotFoundError(f"ember/abi.h not found beside {here}")
