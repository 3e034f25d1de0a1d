"""ember-stable-abi: the Python constants, the C header and the package version agree; the headers
compile as C99 and C++17, and EMBER_TARGET_VERSION hides newer entries at compile time."""

import os
import re

import pytest

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


# ---- the headers compile, and the target version gates entries at compile time ----------------
_USES_1_1 = """
#include "ember/abi.h"
int f(void) { return ember_library_register_autograd("ns", "op", "op_backward"); }
"""
_USES_1_0 = """
#include "ember/abi.h"
int f(void) { return ember_library_define("ns", "op(Tensor x) -> Tensor"); }
"""


def _compile(tmp_path, source: str, *flags: str, lang: str = "c"):
    import shutil
    import subprocess

    cc = shutil.which("cc" if lang == "c" else "c++") or shutil.which("gcc")
    assert cc, "a C/C++ compiler is needed for the header tests"
    src = tmp_path / ("t.c" if lang == "c" else "t.cpp")
    src.write_text(source)
    std = ["-std=c99", "-pedantic"] if lang == "c" else ["-std=c++17"]
    return subprocess.run([cc, *std, "-Wall", "-Werror", "-fsyntax-only", "-I",
                           ember_abi.get_include(), *flags, str(src)],
                          capture_output=True, text=True)


def test_entry_newer_than_target_is_a_compile_error(tmp_path):
    assert _compile(tmp_path, _USES_1_1).returncode == 0  # default target: these headers (1.1)
    assert _compile(tmp_path, _USES_1_1, "-DEMBER_TARGET_VERSION=1001").returncode == 0
    old = _compile(tmp_path, _USES_1_1, "-DEMBER_TARGET_VERSION=1000")
    assert old.returncode != 0 and "ember_library_register_autograd" in old.stderr
    assert _compile(tmp_path, _USES_1_0, "-DEMBER_TARGET_VERSION=1000").returncode == 0


def test_target_beyond_headers_or_other_major_is_refused(tmp_path):
    r = _compile(tmp_path, _USES_1_0, "-DEMBER_TARGET_VERSION=1999")
    assert r.returncode != 0 and "newer than this ember/abi.h" in r.stderr
    r = _compile(tmp_path, _USES_1_0, "-DEMBER_TARGET_VERSION=2000")
    assert r.returncode != 0 and "another ABI major" in r.stderr


def test_cpp_layer_compiles_for_both_targets(tmp_path):
    src = """
#include "ember/abi.hpp"
using ember::abi::Tensor;
static Tensor twice(const Tensor& x, double k, int64_t n, bool b) { (void)k; (void)n; (void)b;
  return ember::abi::call("mul", "Tensor", x, x); }
static std::tuple<Tensor, Tensor> two(const Tensor& x, std::optional<Tensor> y,
                                      std::vector<int64_t> s) { (void)y; (void)s; return {x, x}; }
EMBER_LIBRARY(hdrtest, m) {
  m.def("twice(Tensor x, float k, int n, bool b) -> Tensor");
  m.impl<twice>("twice", "cpu");
  m.impl<two>("two", "cpu");
}
"""
    for target in ("1000", "1001"):
        r = _compile(tmp_path, src, f"-DEMBER_TARGET_VERSION={target}", lang="c++")
        assert r.returncode == 0, r.stderr


def test_helpers():
    assert ember_abi.requirement((1, 1)) == "ember-stable-abi>=1.1,<2"
    assert ember_abi.target_macro((1, 0)) == ("EMBER_TARGET_VERSION", "1000")
    with pytest.raises(ValueError, match="not offered"):
        ember_abi.requirement((1, 99))
