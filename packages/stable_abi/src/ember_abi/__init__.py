"""ember's stable ABI: the version it offers, where its C headers are, and how to build against it.

>>> import ember_abi
>>> ember_abi.ABI_VERSION
(1, 1)

An extension includes `ember/abi.h` (C) or `ember/abi.hpp` (C++), states the ABI version it targets
(EMBER_TARGET_VERSION) and fetches core's function table at import (`ember_abi_import()` or
`ember::abi::load()`). It then runs on every ember-core offering the same major version and at least
that minor, without recompiling. `extension()` makes the setuptools Extension for such a module.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ABI_VERSION", "ABI_VERSION_MAJOR", "ABI_VERSION_MINOR", "get_include", "extension",
           "target_macro", "requirement"]

# Must match EMBER_ABI_VERSION_MAJOR / _MINOR in include/ember/abi.h (a test checks).
ABI_VERSION_MAJOR = 1
ABI_VERSION_MINOR = 1
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


def _target(target) -> tuple[int, int]:
    major, minor = ABI_VERSION if target is None else tuple(target)
    if major != ABI_VERSION_MAJOR or not 0 <= minor <= ABI_VERSION_MINOR:
        raise ValueError(f"target ABI {major}.{minor} is not offered by these headers "
                         f"(ember-stable-abi {ABI_VERSION_MAJOR}.{ABI_VERSION_MINOR})")
    return major, minor


def target_macro(target=None) -> tuple[str, str]:
    """("EMBER_TARGET_VERSION", "1001") for target (1, 1): the -D an extension is built with.

    >>> target_macro((1, 0))
    ('EMBER_TARGET_VERSION', '1000')
    """
    major, minor = _target(target)
    return "EMBER_TARGET_VERSION", str(major * 1000 + minor)


def requirement(target=None) -> str:
    """The Requires-Dist line of an extension targeting `target`: any core of that ABI major
    whose ember-stable-abi offers at least that minor.

    >>> requirement((1, 1))
    'ember-stable-abi>=1.1,<2'
    """
    major, minor = _target(target)
    return f"ember-stable-abi>={major}.{minor},<{major + 1}"


def extension(name: str, sources: list[str], *, target=None, pybind11: bool = True, **kwargs):
    """A setuptools Extension built against the stable ABI headers only (C++17, the target
    version defined, pybind11's headers when pybind11=True).

        setup(ext_modules=[ember_abi.extension("myext._C", ["csrc/ext.cpp"], target=(1, 1))])
    """
    from setuptools import Extension  # build time only

    include_dirs = [get_include(), *kwargs.pop("include_dirs", [])]
    if pybind11:
        import pybind11 as pb

        include_dirs.append(pb.get_include())
    macros = [target_macro(target), *kwargs.pop("define_macros", [])]
    args = ["-std=c++17", "-fvisibility=hidden", *kwargs.pop("extra_compile_args", [])]
    return Extension(name, sources, include_dirs=include_dirs, define_macros=macros,
                     extra_compile_args=args, language="c++", **kwargs)
