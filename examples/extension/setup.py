"""ember-example-ext: built against ember's stable ABI headers only (ember-stable-abi), so the
wheel requires ember-stable-abi>=1.1,<2 and pins nothing of ember-core.

    pip wheel --no-build-isolation --no-deps examples/extension     # needs ember-stable-abi,
                                                                     # pybind11, setuptools
"""
import os

from setuptools import setup

import ember_abi

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = (1, 1)  # register_autograd is new in ABI 1.1

with open(os.path.join(HERE, "VERSION")) as f:
    version = f.read().strip()

setup(
    name="ember-example-ext",
    version=version,
    description="An example ember extension: a C++ op built against the stable ABI only",
    package_dir={"": "src"},
    packages=["ember_example_ext"],
    ext_modules=[ember_abi.extension("ember_example_ext._C", ["csrc/ext.cpp"], target=TARGET)],
    install_requires=[ember_abi.requirement(TARGET)],
    python_requires=">=3.11",
    zip_safe=False,
)
