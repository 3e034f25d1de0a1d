"""Macros every packages/<pkg>/BUILD.bazel uses: one py_library, one pytest target, one wheel.

    ember_package(name = "core", dist = "ember-core", ...)
      //packages/core:core    py_library over src/ (imports = ["src"]: `ember` spans packages)
      //packages/core:core_test py_test running pytest over tests/ (glob: new files need no edit)
      //packages/core:wheel   the wheel, in bazel-bin/packages/core/wheel/

    ember_extension(name = "_C", module = "ember._C", srcs = [...])
      a pybind11 extension module; pass it as `extensions = [":_C"]` to ember_package, which puts it
      in the py_library's data and the wheel (which then gets a platform tag and an ABI pin).
"""

load("@ember_python//:info.bzl", "EXT_SUFFIX")
load("//tools/wheel:wheel.bzl", "ember_wheel")

# Every package, in design.md's layering order (the depgraph tool has the allowed arrows).
PACKAGES = ["stable_abi", "core", "autograd", "devices", "compiler", "export", "distributed"]

# What every test target may import besides its own package: the test runner and the references.
TEST_PYPI = ["pytest", "numpy", "ml_dtypes", "torch"]

def _pypi(names):
    return ["@pypi//:" + n for n in names]

def ember_pytest(name, srcs, deps, paths, data = [], pypi = [], shard_count = None, size = "medium", **kwargs):
    """A py_test that runs pytest (through //tools/pytest:pytest_main.py) over `paths`."""
    native.py_test(
        name = name,
        srcs = srcs + ["//tools/pytest:pytest_main.py"],
        main = "//tools/pytest:pytest_main.py",
        deps = deps + _pypi({n: 0 for n in TEST_PYPI + pypi}.keys()),
        data = data + ["//:pyproject.toml"],
        args = paths,
        python_version = "PY3",
        srcs_version = "PY3",
        shard_count = shard_count,
        size = size,
        **kwargs
    )

def ember_extension(name, module, srcs, deps = [], copts = [], **kwargs):
    """A pybind11 extension module `module` (e.g. ember._C) built from `srcs`.

    The shared object lands beside the package's Python sources in runfiles
    (src/ember/_C.cpython-311-x86_64-linux-gnu.so), so `import ember._C` works under Bazel.
    """
    so = "src/" + module.replace(".", "/") + EXT_SUFFIX
    native.cc_binary(
        name = so,
        srcs = srcs,
        deps = deps + ["@pypi//:pybind11_headers"],
        copts = ["-O2", "-g0", "-fvisibility=hidden", "-std=c++17"] + copts,
        linkshared = True,
        linkstatic = True,
        **kwargs
    )
    native.filegroup(name = name, srcs = [":" + so], visibility = ["//visibility:public"])

def ember_package(
        name,
        dist,
        summary,
        deps = [],
        pypi = [],
        requires = [],
        extras = {},
        siblings = [],
        components = {},
        extensions = [],
        extra_files = [],
        prefixes = {},
        test_deps = [],
        test_pypi = [],
        shard_count = None,
        test_size = "medium"):
    """One ember package: py_library `name`, py_test `<name>_test`, wheel `wheel`.

    deps: sibling py_libraries (//packages/core); pypi: third-party names from the lock;
    extra_files: files outside src/ for both the py_library's data and the wheel (see prefixes);
    requires: the wheel's third-party Requires-Dist (ranges); siblings: sibling package names
    pinned by compatible range from their VERSION; components: ember.components entry points.
    """
    pkg = native.package_name()
    srcs = native.glob(["src/**/*.py"])
    data = native.glob(
        ["src/**"],
        exclude = ["src/**/*.py", "**/__pycache__/**", "**/*.pyc", "**/*.so"],
    )
    native.py_library(
        name = name,
        srcs = srcs,
        data = data + extensions + extra_files,
        imports = ["src"],
        deps = deps + _pypi(pypi),
        srcs_version = "PY3",
        visibility = ["//visibility:public"],
    )
    ember_pytest(
        name = name + "_test",
        srcs = native.glob(["tests/**/*.py"]),
        data = native.glob(["tests/**"], exclude = ["**/*.py", "**/__pycache__/**", "**/*.pyc"]) + [
            "VERSION",
        ],
        deps = [":" + name] + test_deps,
        pypi = test_pypi,
        paths = [pkg + "/tests"],
        shard_count = shard_count,
        size = test_size,
    )
    wheel_prefixes = {pkg + "/src/": ""}
    wheel_prefixes.update(prefixes)
    ember_wheel(
        name = "wheel",
        dist = dist,
        summary = summary,
        version_file = "VERSION",
        readme = "README.md",
        srcs = srcs + data + extensions + extra_files,
        prefixes = wheel_prefixes,
        requires = requires,
        extras = extras,
        siblings = {"//packages/%s:VERSION" % s: "ember-" + s.replace("_", "-") for s in siblings},
        native = len(extensions) > 0,
        components = components,
        visibility = ["//visibility:public"],
    )
    native.exports_files(["VERSION", "CHANGELOG.md", "README.md"])
