"""The FX-graph cache: compiled graphs (`graph.Artifact`: wrapper and kernel sources, size
values, extern ops) kept in memory and on disk, keyed by the graph's code, the inputs' sizes,
strides and dtypes, the thread count and the versions of ember and of this package's sources.
A second process compiling the same model loads the artifact (no lowering, no codegen) and its
kernels from core's kernel cache (no compiler run): it starts warm.

Files live beside core's kernel cache (`<cache>/fxgraph/<key>.pkl`, a directory only this user
can write: `_kcache.cache_dir`). EMBER_FX_GRAPH_CACHE=0 turns the disk half off.
"""
from __future__ import annotations

import hashlib
import logging
import os
import pickle
import tempfile

from ember import _flags
from ember._ops import _kcache
from ember._tensor import Tensor

from .graph import load as _load

__all__ = ["lookup", "save", "load", "cache_key", "stats"]

log = logging.getLogger("ember._inductor")
_memory: dict = {}
stats = {"hit_memory": 0, "hit_disk": 0, "miss": 0}
_SOURCE_HASH = []


def _sources_hash() -> str:
    """A digest of this package's sources: a changed code generator never reads old entries."""
    if not _SOURCE_HASH:
        h = hashlib.sha256()
        d = os.path.dirname(__file__)
        for name in sorted(os.listdir(d)):
            if name.endswith(".py"):
                with open(os.path.join(d, name), "rb") as f:
                    h.update(name.encode() + f.read())
        import ember
        h.update(str(getattr(ember, "__version__", "")).encode())
        _SOURCE_HASH.append(h.hexdigest())
    return _SOURCE_HASH[0]


def _codes(gm) -> list:
    """The graph's code and its subgraphs' (a higher-order op's branches or mods)."""
    subs = [f"{n}:{m.code}" for n, m in gm.named_modules() if m is not gm and hasattr(m, "code")]
    return [gm.code, *sorted(subs)]


def cache_key(gm, args, flags: str = "") -> str:
    parts = [*_codes(gm), _sources_hash(), str(_flags._threads or os.cpu_count()), flags,
             os.environ.get("EMBER_INDUCTOR_STATIC_SIZES", "1"),   # (graph.static_sizes)
             *(os.environ.get(f"EMBER_INDUCTOR_{k}", "") for k in ("PERSISTENT", "ONLINE",
                                                                   "XBLOCK_BIG")),
             os.environ.get("TRITON_INTERPRET", "0"),   # (no libdevice in the interpreter)
             os.environ.get("EMBER_CPU_GRAIN", "")]     # (the kernels' thread counts)
    for a in args:
        if isinstance(a, Tensor):
            parts.append(f"T{a.dtype}{a.device.type}{tuple(a._shape)}{tuple(a._stride)}")
        else:
            parts.append(f"V{type(a).__name__}{a!r}")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:40]


def _dir():
    if os.environ.get("EMBER_FX_GRAPH_CACHE", "1") == "0":
        return None
    base = _kcache.cache_dir()
    if base is None:
        return None
    d = os.path.join(base, "fxgraph")
    os.makedirs(d, mode=0o700, exist_ok=True)
    return d if _kcache.trusted(d) else None


def lookup(gm, args, flags: str = ""):
    """The artifact compiled for this graph and these inputs (and flags: "max_autotune"), or
    None."""
    key = cache_key(gm, args, flags)
    art = _memory.get(key)
    if art is not None:
        stats["hit_memory"] += 1
        return art
    d = _dir()
    if d is not None:
        path = os.path.join(d, key + ".pkl")
        try:
            with open(path, "rb") as f:
                art = pickle.load(f)  # noqa: S301 - our own private, user-owned directory
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            art = None
        if art is not None:
            stats["hit_disk"] += 1
            _memory[key] = art
            return art
    stats["miss"] += 1
    return None


def save(gm, args, art, flags: str = "") -> None:
    key = cache_key(gm, args, flags)
    _memory[key] = art
    d = _dir()
    if d is None:
        return
    try:
        data = pickle.dumps(art)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        log.debug("ember inductor: graph not cached on disk (%s)", e)
        return
    fd, tmp = tempfile.mkstemp(suffix=".pkl", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(d, key + ".pkl"))
    except OSError:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load(art, gm):
    return _load(art, gm)
