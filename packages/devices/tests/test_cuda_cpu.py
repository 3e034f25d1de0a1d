"""The CUDA backend's logic on a machine without a GPU or Triton: the caching allocator (fake raw
memory), the launch memo, and 'no GPU' behaviour. Kernels in Triton's interpreter:
test_cuda_interp.py."""
import pytest

import ember
from ember.cuda.runtime.allocator import CachingAllocator, OutOfMemoryError, round_size


# ---- allocator ------------------------------------------------------------------------------
class FakeRaw:
    def __init__(self, capacity=1 << 30):
        self.capacity, self.used, self.next, self.live = capacity, 0, 1 << 20, {}

    def alloc(self, n):
        if self.used + n > self.capacity:
            return None
        p = self.next
        self.next += n + (1 << 20)
        self.used += n
        self.live[p] = n
        return p

    def free(self, p):
        self.used -= self.live.pop(p)


class FakeEvent:
    done = False

    def __init__(self, stream):
        self.stream = stream
        FakeEvent.made.append(self)

    def query(self):
        return self.done

    def synchronize(self):
        self.done = True


FakeEvent.made = []


def make(capacity=1 << 30):
    raw = FakeRaw(capacity)
    return raw, CachingAllocator(raw.alloc, raw.free, 0, FakeEvent, lambda: (raw.capacity -
                                                                           raw.used,
                                                                           raw.capacity))


def test_rounding_and_pools():
    assert round_size(1) == 512 and round_size(512) == 512 and round_size(513) == 1024
    raw, a = make()
    b = a.malloc(100, 0)
    assert b.size == 512 and a.stats["reserved"] == 2 << 20     # a 2 MiB small segment
    c = a.malloc(3 << 20, 0)
    assert a.stats["reserved"] == (2 << 20) + (20 << 20)        # a 20 MiB large segment
    assert a.stats["allocated"] == 512 + (3 << 20)
    a.free(b)
    a.free(c)
    assert a.stats["allocated"] == 0 and a.stats["peak_allocated"] == 512 + (3 << 20)


def test_reuse_split_and_merge():
    raw, a = make()
    x = a.malloc(1000, 0)
    y = a.malloc(1000, 0)
    assert y.ptr == x.ptr + 1024 and len(raw.live) == 1     # carved from one segment
    p = x.ptr
    a.free(x)
    z = a.malloc(600, 0)
    assert z.ptr == p                                        # best fit reuses the hole
    a.free(z)
    a.free(y)
    a._flush_recent()  # freed blocks wait for an exact reuse first; flushed, they merge
    # everything merged back into one free block spanning the segment
    assert len(a.small.blocks) == 1 and next(iter(a.small.blocks.values())).size == 2 << 20
    a.empty_cache()
    assert raw.live == {} and a.stats["reserved"] == 0


def test_reuse_only_on_the_same_stream():
    raw, a = make()
    x = a.malloc(4096, stream=1)
    p = x.ptr
    a.free(x)
    y = a.malloc(4096, stream=2)
    assert y.ptr != p                                       # another stream: a new segment
    z = a.malloc(4096, stream=1)
    assert z.ptr == p


def test_record_stream_waits_for_events():
    raw, a = make()
    FakeEvent.made.clear()
    x = a.malloc(4096, stream=1)
    p = x.ptr
    a.record_stream(x, 7)
    a.free(x)
    assert len(FakeEvent.made) == 1 and FakeEvent.made[0].stream == 7
    assert a.malloc(4096, stream=1).ptr != p                # still in use on stream 7
    FakeEvent.made[0].done = True
    assert a.malloc(4096, stream=1).ptr == p                # event done: reusable


def test_stats_peak_reset_and_summary():
    raw, a = make()
    x = a.malloc(10000, 0)
    a.free(x)
    assert a.stats["peak_allocated"] == round_size(10000)
    a.reset_peak()
    assert a.stats["peak_allocated"] == 0
    s = a.memory_stats()
    assert s["allocation.all.allocated"] == 1 and s["allocation.all.freed"] == 1
    assert "Allocated memory" in a.summary()


def test_oom_frees_cache_then_raises_with_sizes():
    raw, a = make(capacity=40 << 20)
    x = a.malloc(15 << 20, 0)                                # a 16 MiB segment
    a.free(x)                                                # cached, not returned
    y = a.malloc(30 << 20, 0)                                # fits only after empty_cache
    assert a.stats["num_alloc_retries"] == 1 and a.stats["reserved"] == 30 << 20
    with pytest.raises(OutOfMemoryError, match=r"Tried to allocate 20\.00 MiB.*total capacity"):
        a.malloc(20 << 20, 0)
    assert a.stats["num_ooms"] == 1
    a.free(y)
    assert issubclass(OutOfMemoryError, RuntimeError)


# ---- no GPU -----------------------------------------------------------------------------------
def test_no_gpu_behaviour():
    from ember.cuda.runtime import driver as _runtime
    if _runtime.FAKE or ember.cuda.is_available():
        pytest.skip("a (fake) GPU is present")
    assert ember.cuda.device_count() == 0 and ember.cuda.is_available() is False
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        ember.ones(3, device="cuda")
    assert ember.device("cuda:0").type == "cuda"


def test_memoized_launch_updates_last():
    # the backend's per-op plans copy the launcher's latest launch: a memo hit must update it
    from ember.cuda.runtime.launcher import FastLauncher

    class Recorder:
        args = None

        def __call__(self, *a):
            self.args = a

    launcher, rec = FastLauncher(), Recorder()
    launcher.last = ("stale", (), ())
    launcher.fast((rec, ("prefix",), (7,), (3,), (9,)), [1, 2])
    assert launcher.last == (rec, ("prefix",), (7,))
    assert rec.args[0] == 3 and rec.args[4:] == ("prefix", 1, 2, 9, 7)


def test_random_alloc_free_keeps_blocks_disjoint_and_merges_back():
    import random
    rnd = random.Random(0)
    raw, a = make()
    live = []
    for step in range(3000):
        if live and rnd.random() < 0.45:
            a.free(live.pop(rnd.randrange(len(live))))
        else:
            n = rnd.choice([100, 512, 4000, 70000, 1 << 20, 3 << 20, 12 << 20])
            live.append(a.malloc(n, rnd.choice([0, 0, 0, 5])))
        if step % 500 == 0:  # allocated blocks never overlap
            spans = sorted((b.ptr, b.ptr + b.size) for b in live)
            assert all(e <= s for (_, e), (s, _) in zip(spans, spans[1:]))
    assert a.stats["allocated"] == sum(b.size for b in live)
    for b in live:
        a.free(b)
    a.empty_cache()
    assert raw.live == {} and a.stats["reserved"] == 0 and a.stats["allocated"] == 0
