"""ember-stable-abi: the Python constants, the C header and the package version agree."""

import os
import re

import ember_abi


def _header_macro(name: str) -> int:
    with open(os.path.join(ember_abi.get_include(), "ember", "abi.h")) as f:
        return int(re.search(rf"#define {name} (\d+)", f.read()).group(1))


def test_python_constants_match_header():
    assert ember_abi.ABI_VERSION == (
        _header_macro("EMBER_ABI_VERSION_MAJOR"),
        _header_macro("EMBER_ABI_VERSION_MINOR"),
    )


def test_cpp_header_is_shipped():
    assert os.path.exists(os.path.join(ember_abi.get_include(), "ember", "abi.hpp"))


def test_package_major_is_abi_major():
    # Native wheels pin ember-stable-abi>=M,<M+1 from the package VERSION: the two must agree.
    version_file = os.path.join(os.path.dirname(__file__), "..", "VERSION")
    if not os.path.exists(version_file):  # running against an installed wheel
        from importlib.metadata import version

        major = int(version("ember-stable-abi").split(".")[0])
    else:
        with open(version_file) as f:
            major = int(f.read().split(".")[0])
    assert major == ember_abi.ABI_VERSION_MAJOR
