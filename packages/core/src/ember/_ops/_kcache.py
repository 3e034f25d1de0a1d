"""The on-disk cache of compiled CPU kernels: a directory only this user can write, and a digest
beside each shared object, checked before it is loaded.

A shared object runs code as soon as it is loaded, so the cache trusts a directory only when it
is a real directory owned by this user that neither group nor others can write
(`~/.cache/ember/cpu_kernels`, else `<tmp>/ember_cpu_kernels_<uid>`, created with mode 0700).
With no such directory there is no cache and the caller runs numpy. Each `<key>.so` has a
`<key>.so.sha256` written (atomically) after the compile; a library whose bytes do not match it
(truncated, overwritten by another kernel) is rebuilt instead of loaded.
"""
from __future__ import annotations

import hashlib
import logging
import os
import stat
import tempfile

__all__ = ["cache_dir", "trusted", "verified", "record_digest"]

_log = logging.getLogger("ember.cpu_jit")
_warned: set = set()


def _warn_once(msg: str, *args) -> None:
    if msg not in _warned:
        _warned.add(msg)
        _log.warning(msg, *args)


def trusted(path: str, follow_symlinks: bool = True) -> bool:
    """Whether path is a directory owned by this user that group and others cannot write."""
    try:
        st = os.stat(path) if follow_symlinks else os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and os.access(path, os.W_OK))


def _make(path: str) -> None:
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        pass  # a file in the way, a read-only parent: `trusted` says no


def cache_dir() -> str | None:
    """The kernel cache directory, or None when no trustworthy one can be had."""
    primary = os.environ.get("EMBER_CPU_KERNEL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "ember", "cpu_kernels")
    _make(primary)
    if trusted(primary):
        return primary
    # a shared temporary directory: anyone may have made this name first, so no symlinks
    fallback = os.path.join(tempfile.gettempdir(), f"ember_cpu_kernels_{os.getuid()}")
    _make(fallback)
    if trusted(fallback, follow_symlinks=False):
        return fallback
    _warn_once("ember: no private directory for the C++ kernel cache (%s and %s are missing, "
               "not writable, not owned by this user or writable by others): using numpy "
               "kernels", primary, fallback)
    return None


def _digest(key: str, path: str) -> str:
    h = hashlib.sha256(key.encode() + b"\0")
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verified(key: str, path: str) -> bool:
    """Whether the library at path is the one built for key (its recorded digest matches)."""
    try:
        with open(path + ".sha256") as f:
            want = f.read().strip()
        return bool(want) and _digest(key, path) == want
    except OSError:
        return False


def record_digest(key: str, path: str) -> None:
    """Write path's digest beside it, atomically (a reader sees the old file or the whole new)."""
    fd, tmp = tempfile.mkstemp(suffix=".sha256", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w") as f:
            f.write(_digest(key, path) + "\n")
        os.replace(tmp, path + ".sha256")
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
