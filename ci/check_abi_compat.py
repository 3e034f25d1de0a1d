"""Cross-package CI for the stable ABI: an extension built once keeps working on later cores.

    python3 ci/check_abi_compat.py [--wheels bazel-bin/wheels] [--out ci-out/abi]

1. a fresh venv gets ember-stable-abi and ember-core from --wheels (never from a registry), and
   the build tools from requirements.lock (setuptools, pybind11);
2. examples/extension is built ONCE into a wheel (ember-example-ext, requiring
   ember-stable-abi>=1.1,<2 and nothing of ember-core) and installed;
3. its tests run against three cores, swapping only ember/_C*.so in the venv:
     current  the core from the wheel (ABI 1.1)                     -> loads and passes
     bumped   core built with ABI minor 2 (an entry appended)        -> loads and passes
     older    core built offering ABI 1.0 (the 1.1 entries absent)   -> import fails, naming both
The two other cores are compiled here from packages/core/csrc with EMBER_CORE_ABI_MINOR, against
the installed headers. Junit XML per run goes to --out (tools/summarize_tests.py counts it).
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "ci"))
from check_wheels import TEST_DEPS, lock_pins, run, wheel_file  # noqa: E402

EXT = os.path.join(ROOT, "examples", "extension")


def venv_python(tmp: str, python: str) -> str:
    venv = os.path.join(tmp, "venv")
    run([python, "-m", "venv", venv])
    return os.path.join(venv, "bin", "python")


def build_core(py: str, minor: int, out: str) -> str:
    """packages/core/csrc as ember._C offering ABI 1.<minor>, against the venv's headers."""
    code = ("import ember_abi, pybind11, sysconfig; print(ember_abi.get_include()); "
            "print(pybind11.get_include()); print(sysconfig.get_paths()['include']); "
            "print(sysconfig.get_config_var('EXT_SUFFIX'))")
    abi_inc, pb_inc, py_inc, suffix = subprocess.run(
        [py, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    so = os.path.join(out, f"minor{minor}", "_C" + suffix)
    os.makedirs(os.path.dirname(so), exist_ok=True)
    cxx = os.environ.get("CXX", "c++")
    srcs = sorted(glob.glob(os.path.join(ROOT, "packages", "core", "csrc", "*.cpp")))
    run([cxx, "-O1", "-g0", "-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden",
         f"-DEMBER_CORE_ABI_MINOR={minor}", "-I", abi_inc, "-I", pb_inc, "-I", py_inc,
         *srcs, "-o", so])
    return so


def pytest_run(py: str, tmp: str, out: str, name: str, paths: list[str], env_extra: dict) -> int:
    env = dict(os.environ, PYTHONNOUSERSITE="1", **env_extra)
    env.pop("PYTHONPATH", None)
    xml = os.path.join(out, f"abi-{name}.xml")
    print(f"=== extension against the {name} core", flush=True)
    return subprocess.run(
        [py, "-m", "pytest", *paths, "-q", "-p", "no:cacheprovider", "--junitxml", xml,
         "-o", f"junit_suite_name=abi:{name}", "--rootdir", EXT],
        cwd=tmp, env=env).returncode


def check(wheels: str, out: str, python: str) -> int:
    with tempfile.TemporaryDirectory(prefix="ember-ci-abi-") as tmp:
        py = venv_python(tmp, python)
        pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        run(pip + lock_pins(["numpy", "ml-dtypes", "setuptools", "pybind11"] + TEST_DEPS))
        run(pip + ["--no-index", "--find-links", wheels, wheel_file(wheels, "stable_abi"),
                   wheel_file(wheels, "core"), wheel_file(wheels, "autograd")])
        # the other two cores compile while the extension's wheel builds (2 cores)
        with ThreadPoolExecutor(2) as pool:
            cores = {m: pool.submit(build_core, py, m, os.path.join(tmp, "cores")) for m in (2, 0)}
            dist = os.path.join(tmp, "dist")
            src = os.path.join(tmp, "extension")  # a copy: the build must not write into ROOT
            shutil.copytree(EXT, src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
            run([py, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                 "--disable-pip-version-check", "-w", dist, src])
            built = {m: f.result() for m, f in cores.items()}
        whl = glob.glob(os.path.join(dist, "ember_example_ext-*.whl"))
        assert len(whl) == 1, whl
        meta = subprocess.run([py, "-c", "import zipfile, sys; z = zipfile.ZipFile(sys.argv[1]); "
                               "print(z.read([n for n in z.namelist() if n.endswith('METADATA')]"
                               "[0]).decode())", whl[0]], check=True, capture_output=True,
                              text=True).stdout
        requires = [ln for ln in meta.splitlines() if ln.startswith("Requires-Dist")]
        print("example wheel:", os.path.basename(whl[0]), requires, flush=True)
        if requires != ["Requires-Dist: ember-stable-abi<2,>=1.1"]:
            raise SystemExit(f"unexpected Requires-Dist of the example wheel: {requires}")
        run(pip + ["--no-index", "--find-links", dist, whl[0]])
        run([py, "-m", "pip", "check"])

        site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()"
                               "['purelib'])"], check=True, capture_output=True,
                              text=True).stdout.strip()
        core_so = glob.glob(os.path.join(site, "ember", "_C*.so"))
        assert len(core_so) == 1, core_so
        tests = os.path.join(EXT, "tests")
        rc = pytest_run(py, tmp, out, "current", [tests], {"EMBER_EXPECT_CORE_ABI": "1.1"})
        shutil.copy(built[2], core_so[0])
        rc |= pytest_run(py, tmp, out, "bumped", [tests], {"EMBER_EXPECT_CORE_ABI": "1.2"})
        shutil.copy(built[0], core_so[0])
        rc |= pytest_run(py, tmp, out, "older", [os.path.join(tests, "too_old_core.py")], {})
        return rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wheels", default=os.path.join(ROOT, "bazel-bin", "wheels"))
    ap.add_argument("--out", default=os.path.join(ROOT, "ci-out", "abi"))
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    start = time.time()
    try:
        rc = check(os.path.abspath(args.wheels), os.path.abspath(args.out), args.python)
    except (subprocess.CalledProcessError, SystemExit, AssertionError) as e:
        print(f"stable ABI compatibility: setup failed: {e}", flush=True)
        with open(os.path.join(args.out, "abi-setup.xml"), "w") as f:
            f.write('<testsuites><testsuite name="abi setup" tests="1" failures="1" errors="0" '
                    'skipped="0"/></testsuites>\n')
        rc = 1
    print(f"=== stable ABI compatibility: {'ok' if rc == 0 else 'FAILED'} "
          f"({time.time() - start:.0f} s)", flush=True)
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main())
