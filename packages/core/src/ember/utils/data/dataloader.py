"""DataLoader: batching, shuffling, collation, and worker processes with clean shutdown."""
from __future__ import annotations

import itertools
import multiprocessing as mp
import queue
import time
import traceback
from dataclasses import dataclass

from ._collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "get_worker_info", "WorkerInfo"]

# How often (seconds) a loader waiting for a batch checks that its workers are still alive: a
# worker gone (even with status 0, as after os._exit(0)) would otherwise leave it waiting forever
_STATUS_CHECK_INTERVAL = 1.0


@dataclass
class WorkerInfo:
    id: int
    num_workers: int
    seed: int
    dataset: object


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """Inside a worker process: its id, the worker count, its seed and dataset copy."""
    return _worker_info


class DataLoader:
    """Iterate over a dataset in batches (as torch.utils.data.DataLoader).

    >>> import ember
    >>> from ember.utils.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(ember.arange(10.0))
    >>> [b[0].tolist() for b in DataLoader(ds, batch_size=4)][-1]
    [8.0, 9.0]
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        self.dataset, self.num_workers = dataset, num_workers
        self.pin_memory, self.timeout = pin_memory, timeout  # pinning is a no-op on CPU
        self.worker_init_fn, self.generator = worker_init_fn, generator
        self.prefetch_factor = 2 if prefetch_factor is None and num_workers else prefetch_factor
        self.multiprocessing_context = multiprocessing_context
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 "option")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else \
                SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last = batch_size, drop_last
        self.sampler, self.batch_sampler = sampler, batch_sampler
        auto = batch_size is not None or batch_sampler is not None
        self.collate_fn = collate_fn or (default_collate if auto else default_convert)
        self._auto_collation = auto

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def _index_stream(self):
        return iter(self.batch_sampler) if self._auto_collation else iter(self.sampler)

    def _fetch(self, index):
        if self._auto_collation:
            return self.collate_fn([self.dataset[i] for i in index])
        return self.collate_fn(self.dataset[index])

    def __iter__(self):
        if self.num_workers == 0:
            return self._single()
        return _MultiWorkerIter(self)

    def _single(self):
        if self._iterable:
            it = iter(self.dataset)
            if not self._auto_collation:
                yield from (self.collate_fn(x) for x in it)
                return
            while True:
                batch = list(itertools.islice(it, self.batch_size))
                if not batch or (self.drop_last and len(batch) < self.batch_size):
                    return
                yield self.collate_fn(batch)
        for index in self._index_stream():
            yield self._fetch(index)


def _worker_loop(loader, wid, seed, tasks, results):
    global _worker_info
    import ember
    ember.manual_seed(seed)
    _worker_info = WorkerInfo(wid, loader.num_workers, seed, loader.dataset)
    try:
        if loader.worker_init_fn is not None:
            loader.worker_init_fn(wid)
        if loader._iterable:
            it = iter(loader.dataset)
            n = 0
            while True:
                size = loader.batch_size if loader._auto_collation else 1
                batch = list(itertools.islice(it, size))
                if not batch or (loader.drop_last and loader._auto_collation
                                 and len(batch) < size):
                    break
                out = loader.collate_fn(batch) if loader._auto_collation else \
                    loader.collate_fn(batch[0])
                results.put((wid, n, out, None))
                n += 1
            results.put((wid, None, None, None))
            return
        while True:
            task = tasks.get()
            if task is None:
                return
            seq, index = task
            try:
                results.put((wid, seq, loader._fetch(index), None))
            except Exception as e:  # noqa: BLE001 - re-raised in the main process
                results.put((wid, seq, None, f"{type(e).__name__} in DataLoader worker process "
                             f"{wid}:\n{traceback.format_exc()}"))
    except KeyboardInterrupt:
        pass
    except Exception:  # noqa: BLE001
        results.put((wid, -1, None, f"DataLoader worker process {wid} failed:\n"
                     f"{traceback.format_exc()}"))


class _MultiWorkerIter:
    """Worker processes fed index batches through a queue; results come back in order."""

    def __init__(self, loader: DataLoader):
        import ember
        self.closed = True  # until the workers exist: __del__ must find nothing to shut down
        self.workers, self.tasks = [], []
        self.loader = loader
        ctx = loader.multiprocessing_context or mp.get_context("fork")
        if isinstance(ctx, str):
            ctx = mp.get_context(ctx)
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(loader.num_workers)]
        base = int(ember.randint(0, 2**62, (), generator=loader.generator).item())
        self.closed = False
        for w in range(loader.num_workers):
            p = ctx.Process(target=_worker_loop, args=(loader, w, base + w, self.tasks[w],
                                                       self.results), daemon=True)
            p.start()
            self.workers.append(p)
        self.index_it = None if loader._iterable else loader._index_stream()
        self.sent = self.next_seq = 0
        self.buffer: dict = {}
        self.done_workers = set()
        if self.index_it is not None:
            for _ in range(loader.num_workers * loader.prefetch_factor):
                self._send()

    def _send(self) -> None:
        try:
            index = next(self.index_it)
        except StopIteration:
            return
        self.tasks[self.sent % len(self.tasks)].put((self.sent, index))
        self.sent += 1

    def __iter__(self):
        return self

    def _get(self):
        """The next result from any worker; raises once a worker that owes results is gone
        (PyTorch's message) or, with `timeout`, once that many seconds pass without one."""
        limit = self.loader.timeout
        deadline = time.monotonic() + limit if limit else None
        while True:
            wait = _STATUS_CHECK_INTERVAL
            if deadline is not None:
                wait = max(0.0, min(wait, deadline - time.monotonic()))
            try:
                return self.results.get(timeout=wait)
            except queue.Empty:
                pass
            dead = [w.pid for i, w in enumerate(self.workers)
                    if i not in self.done_workers and not w.is_alive()]
            if dead:
                try:  # what a worker sent just before it ended is still good
                    return self.results.get(timeout=0.1)
                except queue.Empty:
                    pass
                self._shutdown()
                pids = ", ".join(str(p) for p in dead)
                raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly")
            if deadline is not None and time.monotonic() >= deadline:
                self._shutdown()
                raise RuntimeError(f"DataLoader timed out after {limit} seconds")

    def __next__(self):
        if self.closed:
            raise StopIteration
        if self.loader._iterable:
            while len(self.done_workers) < len(self.workers):
                wid, n, out, err = self._get()
                if err:
                    self._shutdown()
                    raise RuntimeError(err)
                if n is None:
                    self.done_workers.add(wid)
                    continue
                return out
            self._shutdown()
            raise StopIteration
        if self.next_seq >= self.sent:
            self._shutdown()
            raise StopIteration
        while self.next_seq not in self.buffer:
            wid, seq, out, err = self._get()
            if err:
                self._shutdown()
                raise RuntimeError(err)
            self.buffer[seq] = out
        out = self.buffer.pop(self.next_seq)
        self.next_seq += 1
        self._send()
        return out

    def _shutdown(self) -> None:
        if self.closed:
            return
        self.closed = True
        for q in self.tasks:
            q.put(None)
        for w in self.workers:
            w.join(timeout=5)
            if w.is_alive():
                w.terminate()
                w.join(timeout=1)
        for q in self.tasks + [self.results]:
            q.cancel_join_thread()
            q.close()

    def __del__(self):
        self._shutdown()
