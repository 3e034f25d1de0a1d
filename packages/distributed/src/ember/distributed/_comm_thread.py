"""The MPI engine's communication thread: one per communicator, running large collectives (as
nonblocking pieces polled here one after another, or a blocking MPI call) in the order they were
issued, while the caller waits on an event that honours the group's timeout (the watchdog: a
wait that passes the deadline raises DistBackendError; the call stays queued and a later wait
may still see it complete).

Why a thread: a large message advances only while its calls are polled (a nonblocking one) or
blocks its caller (a blocking one); here it progresses by itself, overlapping the caller's work,
and pieces that fit in the cache keep Open MPI's algorithms fast. Small messages stay on the
caller's thread (nonblocking, polled: no hand-off latency) whenever nothing is queued here.
"""
from __future__ import annotations

import collections
import threading
import time

from ._types import DistBackendError, Work

__all__ = ["CommThread", "ThreadWork"]


class ThreadWork(Work):
    """A Work run by a CommThread: `run()` (blocking MPI call, then the finisher) happens on
    the thread; `wait` blocks on an event until done or the timeout."""

    def __init__(self, run, result, timeout: float, what: str, rank: int, keep=()):
        self._event = threading.Event()
        self._error = None
        super().__init__(self._event.is_set, None, result, timeout, what, rank)
        self._run, self._keep = run, keep

    def _execute(self) -> None:
        """On the communication thread."""
        try:
            self._run()
        except BaseException as e:  # reported to the waiter, never lost in the thread
            self._error = e
        self._event.set()

    def is_completed(self) -> bool:
        if not self._done and self._event.is_set():
            self._settle()
        return self._done

    def _settle(self):
        if self._error is not None:
            self._exc = DistBackendError(f"{self._what}: failed on rank {self._rank}: "
                                         f"{self._error}")
            raise self._exc from self._error
        self._complete()

    def wait(self, timeout=None) -> bool:
        if self._done:
            return True
        secs = self._timeout if timeout is None else getattr(timeout, "total_seconds",
                                                              lambda: timeout)()
        if not self._event.wait(secs):
            self._exc = DistBackendError(
                f"{self._what}: timed out after {secs:.1f} s on rank {self._rank} "
                "(a peer rank exited, hung, or called a different collective)")
            raise self._exc
        self._settle()
        return True


class CommThread:
    """A daemon thread executing ThreadWorks in submission order (started on first use)."""

    def __init__(self, name: str):
        self._name = name
        self._queue: collections.deque = collections.deque()
        self._cv = threading.Condition()
        self._busy = 0  # works queued or running
        self._thread = None
        self._closed = False

    def busy(self) -> bool:
        """True while a work is queued or running (the caller then queues every later call,
        so that the communicator sees collectives in the order they were issued)."""
        return self._busy > 0

    def submit(self, work: ThreadWork) -> ThreadWork:
        with self._cv:
            if self._closed:
                raise RuntimeError(f"{work._what}: the process group was destroyed")
            self._busy += 1
            self._queue.append(work)
            self._cv.notify()
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name,
                                                daemon=True)
                self._thread.start()
        return work

    def _loop(self):
        while True:
            with self._cv:
                while not self._queue:
                    self._cv.wait()
                work = self._queue.popleft()
            if work is None:
                return
            work._execute()
            with self._cv:
                self._busy -= 1

    def close(self, grace: float = 1.0) -> bool:
        """Stop the thread; True when nothing was left running (the communicator may be
        freed), False when a call is still blocked (a peer never joined it)."""
        with self._cv:
            self._closed = True
            if self._thread is None:
                return True
            self._queue.append(None)
            self._cv.notify()
        deadline = time.monotonic() + grace
        self._thread.join(max(0.0, deadline - time.monotonic()))
        return not self._thread.is_alive()
