"""ember.multiprocessing: `spawn(fn, args, nprocs)` as torch.multiprocessing.spawn, plus the
standard library's multiprocessing names.

Ships in ember-distributed: the processes are started by mpiexec (through the launcher of
ember.distributed), so that the MPI engine can join them; `fn` must be importable by name
(defined at module level), as with the "spawn" start method.
"""
from multiprocessing import *  # noqa: F403

from ._spawn import ProcessContext, ProcessExitedException, ProcessRaisedException, spawn

__all__ = ["spawn", "ProcessContext", "ProcessRaisedException", "ProcessExitedException"]
