"""Functional collectives' asynchronous results (torch.distributed._functional_collectives'
AsyncCollectiveTensor and its work registry).

A functional collective's kernel starts the collective (`async_op=True`) and registers its Work
under the output's storage; `wait_tensor` (the op, or the Python function) waits for it. In
eager code the Python functions return an AsyncCollectiveTensor over that output: the first use
waits. A use is any op that takes it (the op then runs on the finished plain tensor and returns
plain tensors, as PyTorch's subclass does) or any read of its data (`numpy()`, `tolist()`,
printing: everything that reads the numpy view `_np`).
"""
from __future__ import annotations

import threading

from ember import _dispatch
from ember._tensor import Tensor

__all__ = ["AsyncCollectiveTensor", "register_work", "wait_storage", "pending"]

_lock = threading.Lock()
_works: dict = {}  # id(storage) -> (storage, Work): kept, so that the id is not reused


def register_work(t, work) -> None:
    """t's data is complete once `work` is; wait_storage(t) waits for it."""
    if work is None or work.is_completed():
        return
    st = t._storage
    with _lock:
        _prune()
        _works[id(st)] = (st, work)


def _prune() -> None:
    """Forget the works that are done (results dropped unused: finished here, once)."""
    for key, (_, w) in list(_works.items()):
        try:
            if w.is_completed():
                del _works[key]
        except Exception:  # (a failed one: left for its wait to raise)
            pass


def wait_storage(t) -> None:
    """Wait for the collective writing t's storage, if one is registered (once)."""
    st = t._storage
    with _lock:
        entry = _works.pop(id(st), None)
    if entry is not None and entry[0] is st:
        entry[1].wait()


def pending() -> int:
    """How many functional collectives were started and are neither waited for nor done."""
    with _lock:
        _prune()
        return len(_works)


class AsyncCollectiveTensor(Tensor):
    """The result of a functional collective still in flight: a tensor over the output that
    waits for the collective on first use (`elem` is the plain output; `wait()` returns it)."""

    @classmethod
    def wrap(cls, t):
        a = cls._make(t._storage, t._shape, t._stride, t._offset, t.dtype, t.device)
        a.elem, a.completed = t, False
        return a

    def wait(self):
        """The finished plain tensor (torch's AsyncCollectiveTensor.wait / trigger_wait)."""
        if not self.completed:
            wait_storage(self.elem)
            self.completed = True
        return self.elem

    trigger_wait = wait

    @property
    def _np(self):
        self.wait()
        return Tensor._np.fget(self)

    def numpy(self, *, force=False):
        return self.wait().numpy()

    def tolist(self):
        return self.wait().tolist()

    def item(self):
        return self.wait().item()

    def __repr__(self):
        return f"AsyncCollectiveTensor({self.wait()!r})"

    @classmethod
    def __ember_function__(cls, op, args, out):
        """Any op with such an argument: wait for each, then run it on the plain tensors."""
        a = list(args)
        for i in op.tensor_idx:
            if isinstance(a[i], AsyncCollectiveTensor):
                a[i] = a[i].wait()
        for i in op.list_idx:
            if a[i] is not None:
                a[i] = [x.wait() if isinstance(x, AsyncCollectiveTensor) else x for x in a[i]]
        if isinstance(out, AsyncCollectiveTensor):
            out = out.wait()
        return _dispatch.call(op, tuple(a), out)


_dispatch.subclass_function[0] += 1  # calls with an AsyncCollectiveTensor: it waits first
