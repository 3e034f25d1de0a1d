"""DeviceMesh: ranks laid out in an n-D array with named dims; one process group per line of
each dim (made once, with one MPI split per dim), slicing by dim names without communication."""
from __future__ import annotations

import os

import numpy as np

from ._group import _default, _split_groups, get_rank, init_process_group, is_initialized

__all__ = ["DeviceMesh", "init_device_mesh"]


class DeviceMesh:
    """`DeviceMesh("cpu", [[0, 1], [2, 3]], mesh_dim_names=("dp", "tp"))`: every rank of the
    default group builds it with the same arguments."""

    def __init__(self, device_type: str, mesh, *, mesh_dim_names=None, _groups=None):
        self.device_type = device_type
        self._mesh = np.array(mesh.tolist() if hasattr(mesh, "tolist") else mesh, dtype=np.int64)
        if self._mesh.ndim == 0:
            self._mesh = self._mesh.reshape(1)
        names = tuple(mesh_dim_names) if mesh_dim_names is not None else None
        if names is not None and len(names) != self._mesh.ndim:
            raise ValueError(f"mesh_dim_names {names} must have one name per mesh dim "
                             f"({self._mesh.ndim})")
        self.mesh_dim_names = names
        me = get_rank()
        where = np.argwhere(self._mesh == me)
        self._coord = tuple(int(c) for c in where[0]) if len(where) else None
        self._groups = _groups if _groups is not None else [
            self._make_group(d) for d in range(self._mesh.ndim)]

    def _make_group(self, dim):
        lines = np.moveaxis(self._mesh, dim, -1).reshape(-1, self._mesh.shape[dim])
        return _split_groups([list(map(int, ln)) for ln in lines])

    # ---- queries ---------------------------------------------------------------------------
    @property
    def mesh(self):
        import ember
        return ember.tensor(self._mesh)

    @property
    def ndim(self) -> int:
        return self._mesh.ndim

    @property
    def shape(self) -> tuple:
        return tuple(self._mesh.shape)

    def size(self, mesh_dim=None) -> int:
        return int(self._mesh.size) if mesh_dim is None else self.shape[self._dim(mesh_dim)]

    def _dim(self, mesh_dim) -> int:
        if isinstance(mesh_dim, str):
            if not self.mesh_dim_names or mesh_dim not in self.mesh_dim_names:
                raise KeyError(f"Mesh dimension '{mesh_dim}' does not exist. Available mesh "
                               f"dimensions are: mesh_dim_names={self.mesh_dim_names}")
            return self.mesh_dim_names.index(mesh_dim)
        if mesh_dim is None:
            if self.ndim != 1:
                raise RuntimeError("Found the DeviceMesh have more than one dim; pass mesh_dim")
            return 0
        return int(mesh_dim)

    def get_group(self, mesh_dim=None):
        return self._groups[self._dim(mesh_dim)]

    def get_all_groups(self) -> list:
        return list(self._groups)

    def get_local_rank(self, mesh_dim=None) -> int:
        return self._coord[self._dim(mesh_dim)]

    def get_rank(self) -> int:
        return get_rank()

    def get_coordinate(self):
        return list(self._coord) if self._coord is not None else None

    def __getitem__(self, names) -> DeviceMesh:
        """The sub-mesh through this rank along the named dims (no communication)."""
        names = (names,) if isinstance(names, str) else tuple(names)
        dims = [self._dim(n) for n in names]
        if sorted(dims) != dims or len(set(dims)) != len(dims):
            raise ValueError(f"Invalid mesh_dim_names {names}: must be in the mesh's order")
        index = tuple(slice(None) if d in dims else self._coord[d] for d in range(self.ndim))
        sub = DeviceMesh(self.device_type, self._mesh[index], mesh_dim_names=names,
                         _groups=[self._groups[d] for d in dims])
        sub._root = getattr(self, "_root", None) or self  # FSDP + TP finds the 2-D mesh here
        return sub

    def __repr__(self):
        names = f", mesh_dim_names={self.mesh_dim_names}" if self.mesh_dim_names else ""
        return f"DeviceMesh('{self.device_type}', {self._mesh.tolist()}{names})"


def _pick_local_device(world_size: int) -> None:
    """As torch's DeviceMesh: a process that has not chosen a CUDA device takes LOCAL_RANK's
    (else rank modulo the devices on the host), so that ranks on one host use distinct GPUs."""
    import ember
    count = ember.cuda.device_count()
    if count <= 1 or ember.cuda.current_device() != 0:
        return
    if world_size > count and world_size % count:
        raise RuntimeError(f"init_device_mesh: {world_size} ranks do not spread evenly over "
                           f"{count} CUDA devices on this host")
    local = os.environ.get("LOCAL_RANK")
    ember.cuda.set_device(int(local) if local is not None else _default().rank() % count)


def init_device_mesh(device_type: str, mesh_shape, *, mesh_dim_names=None, backend_override=None):
    """A mesh of all ranks, in order, with shape mesh_shape (torch's init_device_mesh)."""
    if not is_initialized():
        init_process_group()
    n = _default().size()
    if device_type == "cuda" and n > 1:
        _pick_local_device(n)
    shape = tuple(int(s) for s in mesh_shape)
    if int(np.prod(shape)) != n:
        raise RuntimeError(f"init_device_mesh: mesh shape {shape} does not hold the world size "
                           f"{n}")
    return DeviceMesh(device_type, np.arange(n).reshape(shape), mesh_dim_names=mesh_dim_names)
