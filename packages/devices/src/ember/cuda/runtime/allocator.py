"""A caching device allocator, like PyTorch's: cudaMalloc is slow and synchronizes, so freed blocks
are kept and reused.

- Sizes round up to 512 bytes. Requests up to 1 MiB come from the small pool, carved out of 2 MiB
  segments; larger ones from the large pool (20 MiB segments under 10 MiB, else the size rounded
  up to 2 MiB). A free block bigger than needed is split; freed neighbours merge again.
- A freed block is reused only by allocations on the stream it was allocated on: kernels queued on
  that stream before the free run before any later user. A block also used on other streams
  (`record_stream`) waits for events recorded on those streams at free time.
- When the device is out of memory, cached unused segments are released and the allocation is
  retried; then OutOfMemoryError names the sizes.
- CUDA graphs: while a stream captures, its allocations come from the graph's private pool
  (segments of its own, `begin_capture`). A block of a private pool, freed, goes back to that
  pool only: memory a graph's replays write is never handed to other tensors. Nothing is
  released to the driver and no event is queried while a capture is underway; a pool's
  segments go back once no graph uses it (`release_pool`) and its blocks are all free.

The raw allocation functions are parameters, so the bookkeeping is tested on CPU.
"""
from __future__ import annotations

import bisect
import itertools

K512 = 512
SMALL_LIMIT = 1 << 20          # requests up to this go to the small pool
SMALL_SEGMENT = 2 << 20
LARGE_SEGMENT = 20 << 20
LARGE_UNDER = 10 << 20         # requests under this share a 20 MiB segment
ROUND_LARGE = 2 << 20


class OutOfMemoryError(RuntimeError):
    """ember.cuda.OutOfMemoryError (torch.cuda.OutOfMemoryError is a RuntimeError too)."""


def round_size(n: int) -> int:
    return K512 if n < K512 else (n + K512 - 1) // K512 * K512


def segment_size(n: int) -> int:
    if n <= SMALL_LIMIT:
        return SMALL_SEGMENT
    if n < LARGE_UNDER:
        return LARGE_SEGMENT
    return (n + ROUND_LARGE - 1) // ROUND_LARGE * ROUND_LARGE


_ids = itertools.count()


class Block:
    __slots__ = ("ptr", "size", "stream", "small", "segment", "prev", "next", "allocated",
                 "streams_used", "events", "id", "cached", "pool")

    def __init__(self, ptr, size, stream, small, segment):
        self.ptr, self.size, self.stream, self.small = ptr, size, stream, small
        self.segment = segment      # the segment's base pointer
        self.prev = self.next = None
        self.allocated = False
        self.streams_used = None    # other streams this block was used on (record_stream)
        self.events = 0             # events still pending before reuse
        self.id = next(_ids)
        self.cached = False         # free, held in the allocator's exact-reuse lists
        self.pool = None            # the PrivatePool (CUDA graphs) it belongs to, or None

    def key(self):
        return (self.stream, self.size, self.ptr)


class Pool:
    """Free blocks ordered by (stream, size, address): best fit is one bisect."""

    def __init__(self):
        self.keys: list = []
        self.blocks: dict = {}

    def add(self, b: Block) -> None:
        k = b.key()
        bisect.insort(self.keys, k)
        self.blocks[k] = b

    def remove(self, b: Block) -> None:
        k = b.key()
        i = bisect.bisect_left(self.keys, k)
        del self.keys[i]
        del self.blocks[k]

    def best_fit(self, stream: int, size: int):
        i = bisect.bisect_left(self.keys, (stream, size, -1))
        if i < len(self.keys) and self.keys[i][0] == stream:
            return self.blocks[self.keys[i]]
        return None


class PrivatePool:
    """A CUDA graph's memory pool: free lists and segments of its own. `use_count`: graphs (and
    captures underway) using it; at 0 its free segments go back to the driver."""

    def __init__(self, pool_id):
        self.id = pool_id
        self.small, self.large = Pool(), Pool()
        self.segments: set = set()
        self.use_count = 0
        self.allocated = 0          # blocks of it in use


class CachingAllocator:
    """One device's allocator. raw_alloc(nbytes) -> ptr or None (out of memory);
    raw_free(ptr); event_factory(stream) -> an object with query() (stream-use events)."""

    def __init__(self, raw_alloc, raw_free, device: int = 0, event_factory=None,
                 capacity=None):
        self.raw_alloc, self.raw_free = raw_alloc, raw_free
        self.device = device
        self.event_factory = event_factory
        self.capacity = capacity    # () -> (free, total) of the device, for error messages
        self.small, self.large = Pool(), Pool()
        self.segments: dict = {}    # base ptr -> size
        self.active: dict = {}      # ptr -> allocated Block
        self.pending: list = []     # (event, block) waiting before reuse
        # freed blocks kept as they are for an exact (stream, size) reuse, the eager loop's
        # pattern; flushed into the pools (and merged) when a request does not find one
        self.recent: dict = {}
        self.n_recent = 0
        self.private: dict = {}     # pool id -> PrivatePool (CUDA graphs)
        self.capture_pools: dict = {}  # stream under capture -> its PrivatePool
        self.deferred: list = []    # blocks freed during a capture that need stream events
        self.stats = dict(allocated=0, reserved=0, peak_allocated=0, peak_reserved=0,
                          num_alloc_retries=0, num_ooms=0, allocations=0, frees=0,
                          segments_allocated=0, segments_freed=0, requested=0)

    # ---- allocation -------------------------------------------------------------------------
    def malloc(self, nbytes: int, stream: int) -> Block:
        if self.capture_pools:
            priv = self.capture_pools.get(stream)
            if priv is not None:
                return self._malloc_private(priv, nbytes, stream)
        elif self.pending:  # (no event is queried while a capture is underway)
            self._process_events()
        size = K512 if nbytes < K512 else (nbytes + K512 - 1) // K512 * K512
        lst = self.recent.get((stream, size))
        if lst:
            b = lst.pop()
            self.n_recent -= 1
            b.cached = False
            b.allocated = True
            self.active[b.ptr] = b
            st = self.stats
            st["allocated"] += size
            st["requested"] += nbytes
            st["allocations"] += 1
            if st["allocated"] > st["peak_allocated"]:
                st["peak_allocated"] = st["allocated"]
            return b
        small = size <= SMALL_LIMIT
        pool = self.small if small else self.large
        b = pool.best_fit(stream, size)
        if b is None and self.n_recent:
            self._flush_recent()
            b = pool.best_fit(stream, size)
        if b is not None:
            pool.remove(b)
        else:
            b = self._new_segment(size, stream, small)
        self._split(b, size, pool)
        return self._activate(b, nbytes)

    def _malloc_private(self, priv: PrivatePool, nbytes: int, stream: int) -> Block:
        size = round_size(nbytes)
        small = size <= SMALL_LIMIT
        pool = priv.small if small else priv.large
        b = pool.best_fit(stream, size)
        if b is not None:
            pool.remove(b)
        else:
            b = self._new_segment(size, stream, small)
            priv.segments.add(b.segment)
        b.pool = priv
        self._split(b, size, pool)
        priv.allocated += 1
        return self._activate(b, nbytes)

    def _split(self, b: Block, size: int, pool: Pool) -> None:
        # split off the rest when it is worth keeping (PyTorch's rule)
        small = b.small
        stream = b.stream
        rest = b.size - size
        if (small and rest >= K512) or (not small and rest > SMALL_LIMIT):
            tail = Block(b.ptr + size, rest, stream, small, b.segment)
            tail.pool = b.pool
            tail.prev, tail.next = b, b.next
            if b.next is not None:
                b.next.prev = tail
            b.next = tail
            b.size = size
            pool.add(tail)

    def _activate(self, b: Block, nbytes: int) -> Block:
        b.allocated = True
        self.active[b.ptr] = b
        st = self.stats
        st["allocated"] += b.size
        st["requested"] += nbytes
        st["allocations"] += 1
        if st["allocated"] > st["peak_allocated"]:
            st["peak_allocated"] = st["allocated"]
        return b

    def _new_segment(self, size: int, stream: int, small: bool) -> Block:
        seg = segment_size(size)
        ptr = self.raw_alloc(seg)
        if ptr is None and not self.capture_pools:
            self.stats["num_alloc_retries"] += 1
            self._process_events(wait=True)
            self.empty_cache()
            ptr = self.raw_alloc(seg)
            if ptr is None and seg > size:  # the rounding up alone may not fit
                seg = round_size(size)
                ptr = self.raw_alloc(seg)
        if ptr is None:
            self.stats["num_ooms"] += 1
            raise OutOfMemoryError(self._oom_message(size))
        self.segments[ptr] = seg
        st = self.stats
        st["reserved"] += seg
        st["segments_allocated"] += 1
        if st["reserved"] > st["peak_reserved"]:
            st["peak_reserved"] = st["reserved"]
        return Block(ptr, seg, stream, small, ptr)

    def _oom_message(self, size: int) -> str:
        free = total = None
        if self.capacity is not None:
            try:
                free, total = self.capacity()
            except Exception:  # the message must not fail
                pass
        cap = ""
        if total is not None:
            cap = (f" GPU {self.device} has a total capacity of {_fmt(total)} of which "
                   f"{_fmt(free)} is free.")
        return (f"CUDA out of memory. Tried to allocate {_fmt(size)}.{cap} Of the allocated "
                f"memory {_fmt(self.stats['allocated'])} is allocated by ember, and "
                f"{_fmt(self.stats['reserved'] - self.stats['allocated'])} is reserved by ember "
                f"but unallocated.")

    # ---- free -------------------------------------------------------------------------------
    def record_stream(self, block: Block, stream: int) -> None:
        if stream != block.stream:
            if block.streams_used is None:
                block.streams_used = set()
            block.streams_used.add(stream)

    def free(self, block: Block) -> None:
        if not block.allocated:
            return
        block.allocated = False
        del self.active[block.ptr]
        st = self.stats
        st["allocated"] -= block.size
        st["frees"] += 1
        if block.pool is not None:
            block.pool.allocated -= 1
        self._release(block)

    def _release(self, block: Block) -> None:
        """Where a freed block goes: behind events of the other streams that used it, back to
        its graph's private pool, or into the exact-reuse lists."""
        if block.streams_used and self.event_factory is not None:
            if self.capture_pools:  # no event is recorded or queried while capturing
                self.deferred.append(block)
                block.events += 1
                return
            for s in block.streams_used:
                self.pending.append((self.event_factory(s), block))
                block.events += 1
            block.streams_used = None
            return
        block.streams_used = None
        priv = block.pool
        if priv is not None:
            self._return(block)
            if priv.use_count <= 0 and not self.capture_pools:
                self._release_free_segments(priv)
            return
        k = (block.stream, block.size)
        lst = self.recent.get(k)
        if lst is None:
            lst = self.recent[k] = []
        block.cached = True
        lst.append(block)
        self.n_recent += 1
        if self.n_recent > 256:
            self._flush_recent()

    def _flush_recent(self) -> None:
        # (a fresh dict first: a tensor collected while this runs frees into it, never into
        # the dict being walked)
        recent, self.recent, self.n_recent = self.recent, {}, 0
        for lst in recent.values():
            for b in lst:  # one at a time: neighbours still listed are not in a pool yet
                b.cached = False
                self._return(b)

    def _return(self, b: Block) -> None:
        owner = self if b.pool is None else b.pool
        pool = owner.small if b.small else owner.large
        for nb in (b.prev, b.next):   # merge with free neighbours of the same segment
            if nb is not None and not nb.allocated and nb.events == 0 and not nb.cached:
                pool.remove(nb)
                if nb is b.prev:
                    b.ptr, b.prev = nb.ptr, nb.prev
                    if nb.prev is not None:
                        nb.prev.next = b
                else:
                    b.next = nb.next
                    if nb.next is not None:
                        nb.next.prev = b
                b.size += nb.size
        pool.add(b)

    def _process_events(self, wait: bool = False) -> None:
        if not self.pending:
            return
        keep = []
        for ev, b in self.pending:
            if wait:
                ev.synchronize()
            if wait or ev.query():
                b.events -= 1
                if b.events == 0 and not b.allocated:
                    self._return(b)
            else:
                keep.append((ev, b))
        self.pending = keep

    # ---- CUDA graphs' private pools ---------------------------------------------------------
    def begin_capture(self, stream: int, pool_id) -> None:
        """Allocations on stream come from the private pool pool_id until end_capture; the pool
        counts one more user (the graph: release_pool gives it back)."""
        priv = self.private.get(pool_id)
        if priv is None:
            priv = self.private[pool_id] = PrivatePool(pool_id)
        priv.use_count += 1
        self.capture_pools[stream] = priv

    def end_capture(self, stream: int) -> None:
        self.capture_pools.pop(stream, None)
        if not self.capture_pools and self.deferred:
            blocks, self.deferred = self.deferred, []
            for b in blocks:  # freed during the capture: their stream-use events now
                b.events -= 1
                if not b.allocated:
                    self._release(b)

    def release_pool(self, pool_id) -> None:
        """A graph using pool_id is gone: at no users, the pool's free segments are released
        (the rest when their last block is freed)."""
        priv = self.private.get(pool_id)
        if priv is None:
            return
        priv.use_count -= 1
        if priv.use_count <= 0 and not self.capture_pools:
            self._release_free_segments(priv)

    def _release_free_segments(self, priv: PrivatePool) -> None:
        for pool in (priv.small, priv.large):
            for b in list(pool.blocks.values()):
                if b.prev is None and b.next is None and b.ptr == b.segment:
                    pool.remove(b)
                    priv.segments.discard(b.ptr)
                    seg = self.segments.pop(b.ptr)
                    self.raw_free(b.ptr)
                    self.stats["reserved"] -= seg
                    self.stats["segments_freed"] += 1
        if not priv.segments and priv.use_count <= 0:
            self.private.pop(priv.id, None)

    def empty_cache(self) -> None:
        """Release every cached segment that holds no allocated block (none while a CUDA
        graph captures: the driver may not free memory then)."""
        if self.capture_pools:
            return
        self._process_events()
        self._flush_recent()
        for priv in list(self.private.values()):
            if priv.use_count <= 0:
                self._release_free_segments(priv)
        for pool in (self.small, self.large):
            for b in list(pool.blocks.values()):
                if b.prev is None and b.next is None and b.ptr == b.segment:
                    pool.remove(b)
                    seg = self.segments.pop(b.ptr)
                    self.raw_free(b.ptr)
                    self.stats["reserved"] -= seg
                    self.stats["segments_freed"] += 1

    # ---- stats ------------------------------------------------------------------------------
    def reset_peak(self) -> None:
        self.stats["peak_allocated"] = self.stats["allocated"]
        self.stats["peak_reserved"] = self.stats["reserved"]

    def memory_stats(self) -> dict:
        self._flush_recent()
        s = self.stats
        return {
            "allocated_bytes.all.current": s["allocated"],
            "allocated_bytes.all.peak": s["peak_allocated"],
            "reserved_bytes.all.current": s["reserved"],
            "reserved_bytes.all.peak": s["peak_reserved"],
            "requested_bytes.all.allocated": s["requested"],
            "allocation.all.allocated": s["allocations"],
            "allocation.all.freed": s["frees"],
            "allocation.all.current": len(self.active),
            "segment.all.allocated": s["segments_allocated"],
            "segment.all.freed": s["segments_freed"],
            "segment.all.current": len(self.segments),
            "num_alloc_retries": s["num_alloc_retries"],
            "num_ooms": s["num_ooms"],
            "inactive_split_bytes.all.current": sum(
                b.size for p in (self.small, self.large) for b in p.blocks.values()
                if b.prev is not None or b.next is not None),
        }

    def summary(self) -> str:
        s = self.stats
        rows = [("Allocated memory", s["allocated"], s["peak_allocated"]),
                ("Reserved memory", s["reserved"], s["peak_reserved"])]
        lines = ["|" + "=" * 62 + "|",
                 f"|{'ember CUDA memory summary, device ' + str(self.device):^62}|",
                 "|" + "-" * 62 + "|",
                 f"| {'Metric':<26}| {'Cur Usage':>15} | {'Peak Usage':>15} |"]
        for name, cur, peak in rows:
            lines.append(f"| {name:<26}| {_fmt(cur):>15} | {_fmt(peak):>15} |")
        lines.append(f"| {'Active allocs':<26}| {len(self.active):>15} | {'':>15} |")
        lines.append(f"| {'Segments':<26}| {len(self.segments):>15} | {'':>15} |")
        lines.append(f"| {'cudaMalloc retries':<26}| {s['num_alloc_retries']:>15} | "
                     f"{'':>15} |")
        lines.append(f"| {'OOMs':<26}| {s['num_ooms']:>15} | {'':>15} |")
        lines.append("|" + "=" * 62 + "|")
        return "\n".join(lines) + "\n"


def _fmt(n) -> str:
    if n is None:
        return "?"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} bytes"
