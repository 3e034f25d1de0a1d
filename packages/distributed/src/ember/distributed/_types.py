"""Small public types of ember.distributed: ReduceOp, Backend, Work, Future, the error classes."""
from __future__ import annotations

import enum
import os
import threading
import time

__all__ = ["ReduceOp", "RedOpType", "Backend", "Work", "Future", "DistError",
           "DistBackendError", "DistStoreError", "DistNetworkError", "GroupMember", "P2POp"]

from ._store import DistStoreError

# How long a wait polls hard (yielding the core between polls) before it backs off with sleeps:
# a collective whose peers are there completes within it; one waiting for a slower peer (DDP's
# last bucket, a rank still in its backward) sleeps instead of taking the core that peer needs
# on an oversubscribed host. EMBER_MPI_SPIN_US overrides (default 2 ms).
SPIN_S = float(os.environ.get("EMBER_MPI_SPIN_US", 2000)) * 1e-6


class DistError(RuntimeError):
    """Base of ember.distributed's errors (torch.distributed.DistError)."""


class DistBackendError(DistError):
    """A communication engine failed or a collective timed out."""


class DistNetworkError(DistError):
    """A network (rendezvous) failure."""


class RedOpType(enum.IntEnum):
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8


class ReduceOp:
    """Reduction operations (`dist.ReduceOp.SUM`, ...): members are `RedOpType` values."""

    SUM = RedOpType.SUM
    AVG = RedOpType.AVG
    PRODUCT = RedOpType.PRODUCT
    MIN = RedOpType.MIN
    MAX = RedOpType.MAX
    BAND = RedOpType.BAND
    BOR = RedOpType.BOR
    BXOR = RedOpType.BXOR
    PREMUL_SUM = RedOpType.PREMUL_SUM
    RedOpType = RedOpType


class Backend(str):
    """Backend names, as torch.distributed.Backend. "gloo" is served by the MPI engine here
    (ember has no gloo: CPU collectives run on Open MPI either way)."""

    UNDEFINED = "undefined"
    GLOO = "gloo"
    MPI = "mpi"
    NCCL = "nccl"
    backend_list = ["undefined", "gloo", "nccl", "mpi"]
    default_device_backend_map = {"cpu": "gloo", "cuda": "nccl"}

    def __new__(cls, name: str):
        low = name.lower()
        if ":" not in low and low not in cls.backend_list[1:]:
            raise ValueError(f"Invalid backend: '{name}'")
        return str.__new__(cls, low)


class GroupMember:
    """`GroupMember.WORLD` (the default group) and `NON_GROUP_MEMBER` (what new_group returns
    to ranks outside the group)."""

    WORLD = None  # set by init_process_group
    NON_GROUP_MEMBER = object()


class Future:
    """The result of an async collective (torch.futures.Future's wait/value/done/then)."""

    def __init__(self, work=None):
        self._work = work
        self._value = None
        self._done = False
        self._callbacks = []
        self._lock = threading.Lock()

    def done(self) -> bool:
        if not self._done and self._work is not None:
            self._work.is_completed()
        return self._done

    def set_result(self, value) -> None:
        with self._lock:
            self._value, self._done = value, True
            cbs, self._callbacks = self._callbacks, []
        for cb in cbs:
            cb(self)

    def wait(self):
        if not self._done and self._work is not None:
            self._work.wait()
        return self._value

    def value(self):
        return self.wait()

    def then(self, callback) -> Future:
        out = Future(self._work)

        def run(f):
            out.set_result(callback(f))
        with self._lock:
            if not self._done:
                self._callbacks.append(run)
                return out
        run(self)
        return out

    def add_done_callback(self, callback) -> None:
        self.then(callback)


class Work:
    """An in-flight operation. `poll()` is engine-specific (True when complete); `wait` polls
    until done or the timeout, then runs the finisher (copies back, divides for AVG, ...)."""

    def __init__(self, poll, finish, result, timeout: float, what: str, rank: int):
        self._poll, self._finish, self._result = poll, finish, result
        self._timeout, self._what, self._rank = timeout, what, rank
        self._done = False
        self._exc = None
        self._fut = None

    def is_completed(self) -> bool:
        if not self._done and self._poll():
            self._complete()
        return self._done

    def is_success(self) -> bool:
        return self._done and self._exc is None

    def exception(self):
        return self._exc

    def _complete(self):
        self._done = True
        if self._finish is not None:
            self._finish()
        if self._fut is not None:
            self._fut.set_result(self._result)

    def wait(self, timeout=None) -> bool:
        if self._done:
            return True
        secs = self._timeout if timeout is None else getattr(timeout, "total_seconds",
                                                              lambda: timeout)()
        start = time.monotonic()
        deadline = start + secs
        spins, delay, slow = 0, 0.0, False
        while not self._poll():
            spins += 1
            if spins & 63 and not slow:
                # MPI progresses a large message only inside its calls: poll hard at first,
                # yielding the core (the peer may share it), then back off with sleeps
                os.sched_yield()
                continue
            now = time.monotonic()
            if now > deadline:
                self._exc = DistBackendError(
                    f"{self._what}: timed out after {secs:.1f} s on rank {self._rank} "
                    "(a peer rank exited, hung, or called a different collective)")
                raise self._exc
            slow = now - start > SPIN_S
            if slow:
                delay = min(delay + 2e-5, 5e-4)
                time.sleep(delay)
        self._complete()
        return True

    def get_future(self) -> Future:
        if self._fut is None:
            self._fut = Future(self)
            if self._done:
                self._fut.set_result(self._result)
        return self._fut

    def result(self):
        self.wait()
        return self._result

    def synchronize(self):
        self.wait()


class _DoneWork(Work):
    """A Work that has already completed (world size 1 shortcuts, non-members)."""

    def __init__(self, result=None):
        super().__init__(lambda: True, None, result, 0.0, "", 0)
        self._done = True


class P2POp:
    """One point-to-point op for batch_isend_irecv: `P2POp(dist.isend, tensor, peer)`."""

    def __init__(self, op, tensor, peer=None, group=None, tag: int = 0, group_peer=None):
        self.op, self.tensor, self.group, self.tag = op, tensor, group, tag
        self.peer = peer
        self.group_peer = group_peer
