"""The CPU kernel cache on disk (ember._ops._kcache): only a private directory is used, a library
is loaded only when its recorded digest matches, and no OS error in the cache fails an op.

The end-to-end cases run in child processes: loading a planted or broken library would run its
code or kill the process (SIGBUS), which a child's exit status shows.
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import ember
from ember import _dtype as D
from ember._ops import OPS, _cpujit, _kcache

N = 1 << 17  # elements: above the JIT threshold

# exp and sin of the same input, checked against numpy in the child
CHILD = f"""
import os, sys, numpy as np, ember
from ember._ops import _cpujit
x = ember.linspace(-3, 3, {N})
ops = sys.argv[1].split(",")
for name in ops:
    got = getattr(ember, name)(x).numpy()
    np.testing.assert_allclose(got, getattr(np, name)(x.numpy()), rtol=1e-5, atol=1e-6)
print("ok", _cpujit._broken)
"""


def _child(ops: str, env: dict) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items()
            if k not in ("EMBER_CPU_KERNEL_CACHE", "XDG_CACHE_HOME", "HOME", "TMPDIR")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", CHILD, ops], capture_output=True, text=True,
                          env=full, timeout=300)


def _libs(d) -> list:
    return sorted((p for p in os.listdir(d) if p.endswith(".so")),
                  key=lambda p: os.stat(os.path.join(d, p)).st_mtime_ns)


@pytest.fixture(autouse=True)
def _compiler():
    if not _cpujit.available():
        pytest.fail("no C++ compiler: the JIT cache tests need g++ (or $CXX)")


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A cache holding exp's and sin's libraries, built by a child process."""
    d = tmp_path_factory.mktemp("warm") / "cache"
    r = _child("exp,sin", {"EMBER_CPU_KERNEL_CACHE": str(d)})
    assert r.returncode == 0 and r.stdout.split() == ["ok", "False"], r.stderr
    assert len(_libs(d)) == 2
    return d


def _no_home(tmp_path, monkeypatch):
    """HOME where no cache can be made (a file), temp dir of our own."""
    (tmp_path / "home").write_text("not a directory")
    (tmp_path / "tmp").mkdir()
    monkeypatch.delenv("EMBER_CPU_KERNEL_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return tmp_path / "tmp" / f"ember_cpu_kernels_{os.getuid()}"


def test_fallback_dir_is_private(tmp_path, monkeypatch):
    fallback = _no_home(tmp_path, monkeypatch)
    assert _kcache.cache_dir() == str(fallback)
    assert stat.S_IMODE(os.stat(fallback).st_mode) == 0o700


def test_shared_foreign_or_linked_fallback_refused(tmp_path, monkeypatch):
    fallback = _no_home(tmp_path, monkeypatch)
    fallback.mkdir()
    os.chmod(fallback, 0o777)  # as another user's planted directory would be
    assert _kcache.cache_dir() is None
    os.chmod(fallback, 0o755)
    assert _kcache.cache_dir() == str(fallback)
    uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: uid + 1)  # the directory is someone else's now
    foreign = tmp_path / "tmp" / f"ember_cpu_kernels_{uid + 1}"
    foreign.mkdir(mode=0o755)
    assert _kcache.cache_dir() is None
    monkeypatch.setattr(os, "getuid", lambda: uid)
    os.rmdir(fallback)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    os.symlink(tmp_path / "elsewhere", fallback)  # a link can be pointed anywhere later
    assert _kcache.cache_dir() is None


def test_planted_kernel_in_shared_dir_never_loaded(tmp_path, warm):
    """Another user's /tmp/ember_cpu_kernels_<uid> with libraries (and digests) under the names
    ember would use: ember must not load them, and the ops must still be right."""
    good = warm
    names = _libs(good)
    marker = tmp_path / "pwned"
    evil_cpp = tmp_path / "evil.cpp"
    evil_cpp.write_text('#include <cstdio>\n__attribute__((constructor)) static void f() '
                        f'{{ std::FILE* p = std::fopen("{marker}", "w"); std::fclose(p); }}\n')
    evil = tmp_path / "evil.so"
    subprocess.run([_cpujit._compiler[0], "-shared", "-fPIC", str(evil_cpp), "-o", str(evil)],
                   check=True, timeout=120)
    (tmp_path / "home").write_text("not a directory")
    shared = tmp_path / "tmp" / f"ember_cpu_kernels_{os.getuid()}"
    shared.mkdir(parents=True)
    for p in os.listdir(good):  # the probe's marks too: nothing to compile first
        if not p.endswith((".so", ".sha256")):
            (shared / p).write_bytes((good / p).read_bytes())
    for name in names:
        (shared / name).write_bytes(evil.read_bytes())
        key = name[:-3]
        (shared / (name + ".sha256")).write_text(_kcache._digest(key, str(shared / name)))
    os.chmod(shared, 0o777)
    r = _child("exp,sin", {"HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path / "tmp")})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ok", "True"]  # correct values, from numpy
    assert not marker.exists()
    assert "no private directory" in r.stderr


def test_truncated_or_swapped_library_rebuilt(tmp_path, warm):
    """A truncated cached library (SIGBUS when loaded) and one holding another kernel (SIGFPE,
    wrong results) are rebuilt, not loaded."""
    d = tmp_path / "cache"
    shutil.copytree(warm, d)
    env = {"EMBER_CPU_KERNEL_CACHE": str(d)}
    a, b = _libs(d)
    raw_a = (d / a).read_bytes()
    (d / a).write_bytes(raw_a[: len(raw_a) // 3])
    (d / b).write_bytes(raw_a)
    r = _child("exp,sin", env)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.split() == ["ok", "False"]  # the JIT ran, on rebuilt libraries
    assert sorted(_libs(d)) == sorted([a, b])
    for name in (a, b):
        assert _kcache.verified(name[:-3], str(d / name))
    assert (d / a).read_bytes() != raw_a[: len(raw_a) // 3]


def _fresh(monkeypatch):
    monkeypatch.setattr(_cpujit, "_kernels", {})
    monkeypatch.setattr(_cpujit, "_broken", False)


def test_cache_os_errors_fall_back_to_numpy(tmp_path, monkeypatch):
    x = ember.linspace(-3.0, 3.0, N)
    want = np.exp(x.numpy())
    # the fallback path is a file and the home cache cannot be made
    fallback = _no_home(tmp_path, monkeypatch)
    fallback.write_text("a file where the directory should be")
    _fresh(monkeypatch)
    assert _cpujit.run(OPS["exp"], (x,), D.float32, D.float32) is None
    np.testing.assert_allclose(ember.exp(x).numpy(), want, rtol=1e-6)
    # a directory that vanishes (or stops being writable) after it was chosen
    _fresh(monkeypatch)
    monkeypatch.setattr(_kcache, "cache_dir", lambda: str(tmp_path / "gone"))
    monkeypatch.setattr(_cpujit, "_mvec", False)
    assert _cpujit.run(OPS["exp"], (x,), D.float32, D.float32) is None
    np.testing.assert_allclose(ember.exp(x).numpy(), want, rtol=1e-6)
