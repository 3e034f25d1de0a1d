"""Cross-package CI: install wheel subsets into fresh venvs and run tests/ against them.

    python3 ci/check_wheels.py [--wheels bazel-bin/wheels] [--out ci-out] [--subset NAME ...]

For each subset (core alone; core+autograd; core+autograd+compiler; all) this makes a fresh venv,
installs the pinned third-party deps from requirements.lock, then the ember wheels from the
folder `bazel build //:wheels` wrote, with --no-index so that no ember-* ever comes from a
registry, and runs tests/ there (from a scratch cwd, so `import ember` is the installed one).
Junit XML per subset goes to --out; tools/summarize_tests.py counts them.

The "all" subset installs the ember wheels with --no-deps: ember-devices requires triton,
cuda-bindings and nvmath-python (GPU-only, gigabytes) and ember-distributed's MPI/NCCL are extras;
the CPU-side third-party deps are installed explicitly instead.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# subset -> (ember packages installed, third-party deps from the lock, pip --no-deps?)
SUBSETS = {
    "core": (["stable_abi", "core"], ["numpy", "ml-dtypes"], False),
    "core+autograd": (["stable_abi", "core", "autograd"], ["numpy", "ml-dtypes"], False),
    "core+autograd+compiler": (
        ["stable_abi", "core", "autograd", "compiler"],
        ["numpy", "ml-dtypes", "sympy", "mpmath"],
        False,
    ),
    "all": (
        ["stable_abi", "core", "autograd", "compiler", "export", "distributed", "devices"],
        ["numpy", "ml-dtypes", "sympy", "mpmath", "safetensors"],
        True,
    ),
}
COMPONENT_OF = {
    "autograd": "autograd",
    "compiler": "compiler",
    "export": "export",
    "distributed": "distributed",
    "devices": "devices",
}
TEST_DEPS = ["pytest", "iniconfig", "packaging", "pluggy", "pygments"]


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    """Run, echoing the command; drop pip's notes about this machine's empty local indexes."""
    print("+", " ".join(cmd), flush=True)
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    for line in res.stdout.splitlines():
        if "is ignored: it is neither a file nor a directory" not in line:
            print(line, flush=True)
    res.check_returncode()
    return res


def lock_pins(names: list[str]) -> list[str]:
    pins = {}
    with open(os.path.join(ROOT, "requirements.lock")) as f:
        for line in f:
            line = line.split("#", 1)[0].split(";", 1)[0].strip()
            if "==" in line:
                pins[line.split("==")[0].lower()] = line
    return [pins[n.lower()] for n in names]


def wheel_file(wheels: str, pkg: str) -> str:
    found = glob.glob(os.path.join(wheels, f"ember_{pkg}-*.whl"))
    if len(found) != 1:
        raise SystemExit(f"expected one ember_{pkg} wheel in {wheels}, found {found}")
    return found[0]


def check_subset(name: str, wheels: str, out: str, python: str) -> int:
    pkgs, third_party, no_deps = SUBSETS[name]
    with tempfile.TemporaryDirectory(prefix=f"ember-ci-{name.replace('+', '-')}-") as tmp:
        venv = os.path.join(tmp, "venv")
        run([python, "-m", "venv", venv])
        py = os.path.join(venv, "bin", "python")
        pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        run(pip + lock_pins(third_party + TEST_DEPS))
        files = [wheel_file(wheels, p) for p in pkgs]
        run(
            pip
            + ["--no-index", "--find-links", wheels]
            + (["--no-deps"] if no_deps else [])
            + files
        )
        if not no_deps:
            run([py, "-m", "pip", "check"])  # every Requires-Dist satisfied, nothing extra
        components = sorted(COMPONENT_OF[p] for p in pkgs if p in COMPONENT_OF)
        env = dict(os.environ, EMBER_EXPECT_COMPONENTS=",".join(components), PYTHONNOUSERSITE="1")
        env.pop("PYTHONPATH", None)
        xml = os.path.join(out, f"subset-{name.replace('+', '-')}.xml")
        # cwd = tmp: `import ember` must find the installed wheels, never packages/*/src.
        smoke = "import ember, sys; assert 'site-packages' in ember.__file__, ember.__file__"
        run([py, "-c", smoke], cwd=tmp, env=env)
        res = subprocess.run(
            [
                py,
                "-m",
                "pytest",
                os.path.join(ROOT, "tests"),
                "-q",
                "-p",
                "no:cacheprovider",
                "--junitxml",
                xml,
                "-o",
                f"junit_suite_name=ci:{name}",
                "--rootdir",
                ROOT,
            ],
            cwd=tmp,
            env=env,
        )
        return res.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wheels", default=os.path.join(ROOT, "bazel-bin", "wheels"))
    ap.add_argument("--out", default=os.path.join(ROOT, "ci-out"))
    ap.add_argument("--subset", action="append", choices=sorted(SUBSETS))
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failed = []
    for name in args.subset or list(SUBSETS):
        start = time.time()
        print(f"=== wheel subset: {name}", flush=True)
        try:
            rc = check_subset(
                name, os.path.abspath(args.wheels), os.path.abspath(args.out), args.python
            )
        except subprocess.CalledProcessError as e:
            print(f"subset {name}: setup failed: {e}", flush=True)
            with open(os.path.join(args.out, f"subset-{name.replace('+', '-')}.xml"), "w") as f:
                f.write(
                    f'<testsuites><testsuite name="ci:{name} setup" tests="1" failures="1" '
                    f'errors="0" skipped="0"/></testsuites>\n'
                )
            rc = 1
        print(
            f"=== wheel subset {name}: {'ok' if rc == 0 else 'FAILED'} "
            f"({time.time() - start:.0f} s)",
            flush=True,
        )
        if rc != 0:
            failed.append(name)
    if failed:
        print("wheel subsets failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
