"""Build core's native module ember._C in place for running from source (tests, benchmarks).

    python tools/build_native.py          # -> packages/core/src/ember/_C<EXT_SUFFIX>

Bazel builds the same sources (packages/core/BUILD.bazel, `ember_extension`) with the same
flags; this script is for checkouts used without Bazel. ember works without the module (the
dispatcher's Python path, slower), so a failed build is never fatal to ember itself.
"""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    import pybind11

    core = os.path.join(ROOT, "packages", "core")
    out = os.path.join(core, "src", "ember", "_C" + sysconfig.get_config_var("EXT_SUFFIX"))
    srcs = sorted(glob.glob(os.path.join(core, "csrc", "*.cpp")))
    cxx = os.environ.get("CXX", "c++")
    flags = ["-O2", "-g0", "-fvisibility=hidden", "-std=c++17", "-fPIC",
             f"-I{sysconfig.get_paths()['include']}", f"-I{pybind11.get_include()}",
             f"-I{os.path.join(ROOT, 'packages', 'stable_abi', 'include')}"]
    objdir = os.path.join(ROOT, "packages", "core", "build")  # (ignored by git)
    os.makedirs(objdir, exist_ok=True)
    objs = []
    for src in srcs:  # one object per source, rebuilt only when its source or a header changed
        # (objects per Python ABI: a checkout built for another Python never links stale ones)
        tag = sysconfig.get_config_var("SOABI") or "py"
        obj = os.path.join(objdir, f"{os.path.basename(src)}.{tag}.o")
        deps = [src] + glob.glob(os.path.join(core, "csrc", "*.h"))
        if not os.path.exists(obj) or os.path.getmtime(obj) < max(map(os.path.getmtime, deps)):
            cmd = [cxx, *flags, "-c", src, "-o", obj]
            print(" ".join(cmd))
            if subprocess.call(cmd) != 0:
                return 1
        objs.append(obj)
    cmd = [cxx, "-shared", *objs, "-o", out, "-ldl"]  # (devplan.cpp: dlopen of libcuda)
    print(" ".join(cmd))
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
