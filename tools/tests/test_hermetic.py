"""The Bazel Python is hermetic: only declared packages import, from the pinned lock."""

import importlib.util
import sys
import sysconfig

import pytest


def test_undeclared_package_is_not_importable():
    # This target declares pytest, numpy, ml_dtypes and torch (TEST_PYPI) but not safetensors,
    # which the system Python has installed and the lock pins.
    with pytest.raises(ModuleNotFoundError):
        import safetensors  # noqa: F401


def test_no_system_site_packages():
    base_site = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})
    assert base_site["purelib"] not in sys.path, sys.path
    assert sys.prefix != sys.base_prefix  # the hermetic venv


def test_declared_packages_come_from_the_lock():
    import numpy

    assert numpy.__version__ == "2.4.6"
    assert "/site/numpy" in numpy.__file__.replace("\\", "/")


def test_torch_is_the_cpu_reference():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is locked for CPython 3.11 x86_64 only")
    import torch

    assert torch.__version__ == "2.13.0+cpu"
