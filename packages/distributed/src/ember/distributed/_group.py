"""Process groups: init_process_group (rendezvous through a store), new_group (MPI communicator
split), the default group, rank/size queries, destroy_process_group.

The MPI engine needs processes started by mpiexec (directly, or by `python -m
ember.distributed.run` / `ember.multiprocessing.spawn`, which use it): Open MPI 5 cannot join
independently started singletons. The NCCL engine needs only the store.
"""
from __future__ import annotations

import datetime
import os
import urllib.parse

from . import _mpi
from ._store import FileStore, PrefixStore, Store, TCPStore
from ._types import Backend, GroupMember

__all__ = ["ProcessGroup", "init_process_group", "destroy_process_group", "is_initialized",
           "get_rank", "get_world_size", "new_group", "new_subgroups", "get_backend",
           "get_default_backend_for_device", "get_process_group_ranks", "get_global_rank",
           "get_group_rank", "is_mpi_available", "is_gloo_available", "is_nccl_available",
           "is_torchelastic_launched"]

default_pg_timeout = datetime.timedelta(minutes=10)


class ProcessGroup:
    """A set of ranks and the engines that run collectives among them (one per device type)."""

    def __init__(self, ranks, rank, backend, store, timeout, mpi_comm=None, name=""):
        self.ranks = list(ranks)           # global ranks, in group-rank order
        self._rank, self._size = rank, len(self.ranks)
        self.backend_str = backend
        self.store, self.timeout = store, timeout
        self.group_name = name
        self._device_backends = _parse_backend(backend)
        self._mpi_comm = mpi_comm
        self._engines: dict[str, object] = {}
        self._tag = 0

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def name(self) -> str:
        return self.backend_str

    def engine(self, device_type: str, what: str, index: int | None = None):
        """This group's engine for device_type, made on first use; a CUDA engine's communicator
        lives on the device of the first tensor it serves (index), else the current device."""
        e = self._engines.get(device_type)
        if e is not None:
            if index is not None and getattr(e, "device", index) != index:
                raise RuntimeError(f"{what}: this process's NCCL communicator is on "
                                   f"cuda:{e.device}, got a tensor on cuda:{index} (one "
                                   "device per process)")
            return e
        kind = self._device_backends.get(device_type)
        if kind is None:
            raise RuntimeError(f"{what}: no backend type associated with device type "
                               f"{device_type} (process group backend '{self.backend_str}')")
        secs = self.timeout.total_seconds()
        if kind in ("mpi", "gloo"):
            from ._engine_mpi import MPIEngine
            if self._mpi_comm is None:
                if not _mpi.launched_by_mpiexec() and self._size > 1:
                    raise RuntimeError(_NO_MPIEXEC.format(what=what, n=self._size))
                raise RuntimeError(f"{what}: this group has no MPI communicator")
            e = MPIEngine(self._mpi_comm, secs)
        else:  # nccl: made on first use, at the same point on every rank (SPMD)
            from ._engine_nccl import NCCLEngine
            e = NCCLEngine(PrefixStore(f"nccl/{self.group_name}", self.store), self._rank,
                           self._size, secs, index)
        self._engines[device_type] = e
        return e

    def __repr__(self):
        return (f"ProcessGroup(backend={self.backend_str!r}, rank={self._rank}, "
                f"size={self._size}, ranks={self.ranks})")


def _parse_backend(backend: str) -> dict:
    backend = str(backend).lower()
    if ":" in backend:
        out = {}
        for part in backend.split(","):
            dev, _, b = part.partition(":")
            Backend(b)
            out[dev.strip()] = b.strip()
        return out
    Backend(backend)
    if backend == "nccl":
        return {"cuda": "nccl"}
    return {"cpu": backend, "cuda": backend} if backend == "mpi" else {"cpu": backend}


class _World:
    def __init__(self):
        self.default: ProcessGroup | None = None
        self.store: Store | None = None
        self.groups: list[ProcessGroup] = []
        self.counter = 0


_W = _World()


def _default() -> ProcessGroup:
    if _W.default is None:
        raise ValueError("Default process group has not been initialized, please make sure to "
                         "call init_process_group.")
    return _W.default


def _resolve(group) -> ProcessGroup:
    """The group a call names (None: the default)."""
    if group is None or group is GroupMember.WORLD:
        return _default()
    if group is GroupMember.NON_GROUP_MEMBER:
        raise RuntimeError("this rank is not a member of the group")
    return group


def _int_env(name):
    v = os.environ.get(name)
    return None if v in (None, "") else int(v)


def _rendezvous(init_method, rank, world_size, timeout):
    """(store, rank, world_size) from the init method, the environment and MPI."""
    url = urllib.parse.urlparse(init_method)
    q = dict(urllib.parse.parse_qsl(url.query))
    rank = rank if rank is not None and rank >= 0 else (
        int(q["rank"]) if "rank" in q else _int_env("RANK"))
    world_size = world_size if world_size is not None and world_size > 0 else (
        int(q["world_size"]) if "world_size" in q else _int_env("WORLD_SIZE"))
    if (rank is None or world_size is None) and _mpi.launched_by_mpiexec():
        comm = _mpi.MPI().COMM_WORLD
        rank = comm.Get_rank() if rank is None else rank
        world_size = comm.Get_size() if world_size is None else world_size
    if rank is None or world_size is None:
        raise ValueError(f"init_process_group: rank and world_size are needed (got rank={rank}, "
                         f"world_size={world_size}): pass them, set RANK and WORLD_SIZE, or "
                         "launch with python -m ember.distributed.run")
    if url.scheme == "file":
        return FileStore(url.path, world_size, timeout), rank, world_size
    if url.scheme == "tcp":
        return (TCPStore(url.hostname, url.port, world_size, rank == 0, timeout), rank,
                world_size)
    if url.scheme != "env":
        raise ValueError(f"init_process_group: unknown init_method scheme '{url.scheme}'")
    addr, port = os.environ.get("MASTER_ADDR"), _int_env("MASTER_PORT")
    if addr is None or port is None:
        if world_size == 1:
            return TCPStore("127.0.0.1", 0, 1, True, timeout), rank, world_size
        if _mpi.launched_by_mpiexec():  # the port of a store on rank 0, told over MPI
            return _store_over_mpi(rank, world_size, timeout), rank, world_size
        raise ValueError("init_process_group: env:// needs MASTER_ADDR and MASTER_PORT")
    return TCPStore(addr, port, world_size, rank == 0, timeout), rank, world_size


def _store_over_mpi(rank, world_size, timeout):
    comm = _mpi.MPI().COMM_WORLD
    store = TCPStore("127.0.0.1", 0, None, True, timeout) if rank == 0 else None
    port = comm.bcast(store.port if store is not None else None, root=0)
    if store is None:
        store = TCPStore("127.0.0.1", port, None, False, timeout)
    return store


_NO_MPIEXEC = ("{what}: the MPI engine (backend 'gloo'/'mpi') needs its {n} processes started "
               "by mpiexec; launch with `python -m ember.distributed.run --nproc-per-node N "
               "script.py` where Open MPI is installed, or ember.multiprocessing.spawn")


def _needs_mpi(backends, world_size, defaulted) -> bool:
    """Whether the default group gets an MPI communicator; raises where it needs one that a
    launch without mpiexec cannot give (before any rendezvous, so no rank waits for it)."""
    if not any(b in ("mpi", "gloo") for b in backends.values()):
        return False
    if _mpi.launched_by_mpiexec() or world_size == 1:
        return True
    if defaulted and backends.get("cuda") == "nccl":
        return False  # a CUDA job started without mpiexec: CPU collectives raise on use
    raise RuntimeError(_NO_MPIEXEC.format(what="init_process_group", n=world_size))


def _world_comm(rank, world_size, backends, _defaulted=False):
    """The MPI communicator of the default group: MPI's world reordered so that ranks follow
    the rendezvous' ranks (None when no MPI engine is asked for)."""
    if not _needs_mpi(backends, world_size, _defaulted):
        return None
    if not _mpi.launched_by_mpiexec():
        return _mpi.MPI().COMM_SELF.Dup()
    M = _mpi.MPI()
    world = M.COMM_WORLD
    if world.Get_size() != world_size:
        raise RuntimeError(f"init_process_group: world_size={world_size} but mpiexec started "
                           f"{world.Get_size()} processes")
    comm = world.Split(0, rank)
    if comm.Get_rank() != rank:
        raise RuntimeError(f"init_process_group: rank {rank} given to two processes")
    return comm


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout: datetime.timedelta | None = None, world_size: int = -1,
                       rank: int = -1, store: Store | None = None, group_name: str = "",
                       pg_options=None, device_id=None) -> None:
    """Join the default process group (torch.distributed.init_process_group).

    backend: "gloo" or "mpi" (CPU, Open MPI), "nccl" (CUDA), "cpu:gloo,cuda:nccl"; None: both.
    """
    if _W.default is not None:
        raise ValueError("trying to initialize the default process group twice!")
    timeout = timeout or default_pg_timeout
    defaulted = backend is None
    backend = backend or "cpu:gloo,cuda:nccl"
    backends = _parse_backend(backend)
    if store is None:
        _needs_mpi(backends, world_size if world_size > 0 else
                   int(os.environ.get("WORLD_SIZE", "1")), defaulted)
        store, rank, world_size = _rendezvous(init_method or "env://", rank, world_size,
                                              timeout)
    elif rank < 0 or world_size <= 0:
        raise ValueError("init_process_group: rank and world_size are needed with store=")
    comm = _world_comm(rank, world_size, backends, defaulted)
    _W.store = store
    pg = ProcessGroup(range(world_size), rank, backend, PrefixStore("default_pg", store),
                      timeout, comm, name=group_name or "0")
    _W.default = pg
    GroupMember.WORLD = pg
    _W.groups = [pg]
    if device_id is not None and "cuda" in backends:
        from ember import device as _device
        d = _device("cuda", device_id) if isinstance(device_id, int) else _device(device_id)
        pg.engine("cuda", "init_process_group", d.index)


def destroy_process_group(group=None) -> None:
    """Free a group's communicators; with no argument, every group and the default."""
    if group is None or group is GroupMember.WORLD:
        for g in _W.groups:
            _close(g)
        _W.default, _W.store, _W.groups, _W.counter = None, None, [], 0
        GroupMember.WORLD = None
        return
    if group is not GroupMember.NON_GROUP_MEMBER:
        _close(group)
        if group in _W.groups:
            _W.groups.remove(group)


def _close(g: ProcessGroup):
    stuck = False  # an engine still blocked in a call on the communicator: leave it unfreed
    for e in g._engines.values():
        stuck |= e.close() is False
    g._engines.clear()
    if g._mpi_comm is not None:
        M = _mpi.MPI()
        if (g._mpi_comm not in (M.COMM_WORLD, M.COMM_SELF) and not M.Is_finalized()
                and not stuck):
            g._mpi_comm.Free()
        g._mpi_comm = None


def is_initialized() -> bool:
    return _W.default is not None


def get_rank(group=None) -> int:
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _resolve(group).rank()


def get_world_size(group=None) -> int:
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _resolve(group).size()


def get_backend(group=None) -> str:
    return _resolve(group).backend_str


def get_process_group_ranks(group) -> list[int]:
    return list(_resolve(group).ranks)


def get_global_rank(group, group_rank: int) -> int:
    return _resolve(group).ranks[group_rank]


def get_group_rank(group, global_rank: int) -> int:
    ranks = _resolve(group).ranks
    if global_rank not in ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {group}")
    return ranks.index(global_rank)


def get_default_backend_for_device(device) -> str:
    dev = str(getattr(device, "type", device)).split(":")[0]
    if dev not in Backend.default_device_backend_map:
        raise ValueError(f"Default backend not registered for device : {dev}")
    return Backend.default_device_backend_map[dev]


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False, group_desc=None, device_id=None):
    """A group of some ranks (all, if None). Every rank of the default group must call it, in
    the same order; ranks outside it get GroupMember.NON_GROUP_MEMBER."""
    world = _default()
    ranks = sorted(range(world.size())) if ranks is None else sorted(int(r) for r in ranks)
    for r in ranks:
        if not 0 <= r < world.size():
            raise ValueError(f"new_group: rank {r} is not in the world of size {world.size()}")
    _W.counter += 1
    name = str(_W.counter)
    backend = backend or world.backend_str
    comm = None
    if world._mpi_comm is not None:
        M = _mpi.MPI()
        color = 0 if world.rank() in ranks else M.UNDEFINED
        comm = world._mpi_comm.Split(color, ranks.index(world.rank()) if color == 0 else 0)
    if world.rank() not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(ranks, ranks.index(world.rank()), backend,
                      PrefixStore(f"pg{name}", _W.store), timeout or world.timeout, comm, name)
    _W.groups.append(pg)
    return pg


def _split_groups(lines, timeout=None, backend=None):
    """One group per list of ranks in `lines` (disjoint), in a single MPI split; every rank of
    the default group calls it with the same lines. Returns this rank's group (or None)."""
    world = _default()
    me = world.rank()
    mine = next((sorted(ln) for ln in lines if me in ln), None)
    _W.counter += 1
    name = str(_W.counter)
    comm = None
    if world._mpi_comm is not None:
        M = _mpi.MPI()
        color = M.UNDEFINED if mine is None else min(mine)
        comm = world._mpi_comm.Split(color, 0 if mine is None else mine.index(me))
    if mine is None:
        return None
    pg = ProcessGroup(mine, mine.index(me), backend or world.backend_str,
                      PrefixStore(f"pg{name}/{min(mine)}", _W.store), timeout or world.timeout,
                      comm, f"{name}.{min(mine)}")
    _W.groups.append(pg)
    return pg


def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None,
                  group_desc=None):
    """Split the world into groups of `group_size` consecutive ranks: (my group, all groups)."""
    world = _default()
    group_size = group_size or 1
    if world.size() % group_size:
        raise ValueError(f"The world size ({world.size()}) must be divisible by group_size "
                         f"({group_size})")
    mine, groups = None, []
    for start in range(0, world.size(), group_size):
        g = new_group(range(start, start + group_size), timeout, backend)
        groups.append(g)
        if g is not GroupMember.NON_GROUP_MEMBER:
            mine = g
    return mine, groups


def is_mpi_available() -> bool:
    try:
        _mpi.mpi_home()
        import mpi4py  # noqa: F401
        return True
    except (RuntimeError, ImportError):
        return False


def is_gloo_available() -> bool:
    """True when the MPI engine (which serves "gloo") is installed."""
    return is_mpi_available()


def is_nccl_available() -> bool:
    try:
        import importlib.util
        return importlib.util.find_spec("nccl") is not None
    except (ImportError, ValueError):
        return False


def is_torchelastic_launched() -> bool:
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None
