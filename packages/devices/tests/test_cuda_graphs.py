"""CUDA graphs: the allocator's private pools (bookkeeping, on CPU), and capture / replay /
pool safety / illegal operations / make_graphed_callables as scripts that run in this process
on a GPU and on the fake device (Triton's interpreter, a subprocess) elsewhere: the same
assertions on both."""
import pytest
from cuda_script import run_script

from ember.cuda.runtime.allocator import CachingAllocator


class _Raw:
    """Pretend device memory: addresses handed out and returned, nothing behind them."""

    def __init__(self):
        self.next, self.live = 1 << 20, {}

    def alloc(self, n):
        p = self.next
        self.next += n + (1 << 20)
        self.live[p] = n
        return p

    def free(self, p):
        del self.live[p]


def _alloc():
    raw = _Raw()
    return CachingAllocator(raw.alloc, raw.free), raw


def _inside(a, ptr, blocks):
    return any(b.segment <= ptr < b.segment + a.segments[b.segment] for b in blocks)


def test_capture_allocations_come_from_the_private_pool_and_stay_there():
    a, raw = _alloc()
    before = a.malloc(4096, 7)          # a global block on the capture stream
    a.free(before)
    a.begin_capture(7, (1, 0))
    x = a.malloc(4096, 7)               # during capture: the graph's pool, not the freed block
    tmp = a.malloc(8192, 7)
    other = a.malloc(4096, 3)           # another stream: the global pool
    assert x.pool is not None and tmp.pool is x.pool and other.pool is None
    assert x.ptr != before.ptr
    a.free(tmp)                         # freed during capture: back to the graph's pool only
    a.end_capture(7)
    later = [a.malloc(n, s) for n in (4096, 8192, 512) for s in (7, 3)]
    assert not any(_inside(a, b.ptr, [x]) for b in later)
    again = a.malloc(8192, 7)
    assert again.pool is None            # no capture: never the private pool's memory
    a.begin_capture(7, (1, 0))          # a second capture sharing the pool reuses its free block
    y = a.malloc(8192, 7)
    a.end_capture(7)
    assert y.pool is x.pool and y.ptr == tmp.ptr
    assert x.pool.use_count == 2


def test_a_released_pool_returns_its_segments_when_its_last_block_dies():
    a, raw = _alloc()
    a.begin_capture(5, (2, 0))
    out = a.malloc(1 << 16, 5)
    scratch = a.malloc(3 << 20, 5)
    a.free(scratch)
    a.end_capture(5)
    n = len(raw.live)
    a.release_pool((2, 0))              # the graph is gone: the free segment goes back
    assert len(raw.live) == n - 1 and (2, 0) in a.private
    a.free(out)                         # the last live output dies: the pool is gone
    assert (2, 0) not in a.private
    assert raw.live == {} and a.stats["reserved"] == 0


def test_nothing_is_released_or_queried_while_capturing():
    events = []

    class Ev:
        def __init__(self, s):
            events.append(s)

        def query(self):
            raise AssertionError("an event was queried during capture")

    raw = _Raw()
    a = CachingAllocator(raw.alloc, raw.free, event_factory=Ev)
    b = a.malloc(4096, 1)
    a.record_stream(b, 2)
    a.begin_capture(9, (3, 0))
    a.free(b)                           # used on stream 2: its event waits for the capture end
    a.empty_cache()                     # a no-op while capturing
    assert events == [] and b.ptr in raw.live
    a.malloc(100, 1)                    # no event query on the eager path either
    a.end_capture(9)
    assert events == [2]


CAPTURE = r"""
import ember
import numpy as np

x = ember.randn(64, 32, device="cuda")
w = ember.randn(32, 16, device="cuda")
f = lambda x: (ember.relu(x @ w) * 2 + 1).sum(dim=1)
f(x)                                          # warm up (kernels compiled) on the default stream
ember.cuda.synchronize()
g = ember.cuda.CUDAGraph()
with ember.cuda.graph(g):
    y = f(x)
for i in range(3):
    new = ember.randn(64, 32)
    x.copy_(new.cuda())
    g.replay()
    want = f(x)
    np.testing.assert_allclose(y.cpu().numpy(), want.cpu().numpy(), rtol=1e-4, atol=1e-4)
# replayed on another (the default) stream, after eager work: still right
x.mul_(-1)
g.replay()
np.testing.assert_allclose(y.cpu().numpy(), f(x).cpu().numpy(), rtol=1e-4, atol=1e-4)
assert not ember.cuda.is_current_stream_capturing()
# random ops replay the capture's draws (said by a warning, not silently)
import warnings
ember.rand(4, device="cuda")
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    g2 = ember.cuda.CUDAGraph()
    with ember.cuda.graph(g2):
        r = ember.rand(4, device="cuda") * 1
assert any("random op was captured" in str(w.message) for w in seen), [str(w) for w in seen]
"""


def test_capture_and_replay_equal_eager():
    run_script(CAPTURE, "graphs_capture")


POOL = r"""
import gc
import ember

a = ember.cuda._allocator(0)
x = ember.ones(1024, device="cuda")
((x + 1) * 3 - 4, x * x)      # warm up: every kernel compiled before a capture needs it
g = ember.cuda.CUDAGraph()
with ember.cuda.graph(g):
    t = x + 1           # an intermediate, freed inside the capture
    y = t * 3
    del t
ptr_y = y.data_ptr()
pool = a.active[ptr_y].pool
assert pool is not None and pool.id == g.pool()
segs = set(pool.segments)
keep = [ember.empty(1024, device="cuda") for _ in range(64)]   # eager allocations after capture
for k in keep:
    p = k.data_ptr()
    assert not any(s <= p < s + a.segments[s] for s in segs), "eager tensor got graph memory"
keep[0].fill_(-5.0)
x.fill_(2.0)
g.replay()                     # the graph's writes hit only its own memory
assert y.cpu().tolist() == [9.0] * 1024
assert keep[0].cpu().tolist() == [-5.0] * 1024
# a second graph sharing the pool; replays in capture order
g2 = ember.cuda.CUDAGraph()
with ember.cuda.graph(g2, pool=g.pool()):
    z = y - 4
g.replay(); g2.replay()
assert z.cpu().tolist() == [5.0] * 1024
assert a.active[z.data_ptr()].pool is pool
r = ember.cuda.memory_reserved()
del y, z
g.reset(); g2.reset()
gc.collect()
assert pool.id not in a.private
assert ember.cuda.memory_reserved() < r
h = ember.cuda.graph_pool_handle()
g3 = ember.cuda.CUDAGraph()
with ember.cuda.graph(g3, pool=h):
    w = x * x
assert g3.pool() == h and a.active[w.data_ptr()].pool.id == h
"""


def test_private_pool_is_safe_and_released():
    run_script(POOL, "graphs_pool")


ILLEGAL = r"""
import ember

def raises(fn, text):
    try:
        fn()
    except RuntimeError as e:
        assert text in str(e), str(e)
        return
    raise AssertionError("no error")

x = ember.ones(8, device="cuda")
(x * 2).sum(), x * 5, x + 1

def capture(body):
    g = ember.cuda.CUDAGraph()
    with ember.cuda.graph(g):
        body()

NP = "operation not permitted when stream is capturing"
raises(lambda: capture(lambda: (x * 2).sum().item()), NP)
raises(lambda: capture(lambda: ember.cuda.synchronize()), NP)
raises(lambda: capture(lambda: (x + 1).cpu()), NP)
raises(lambda: capture(lambda: ember.ones(3).cuda()), NP)
raises(lambda: ember.cuda.CUDAGraph().capture_begin(), "non-default stream")
raises(lambda: ember.cuda.CUDAGraph().replay(), "without a preceding successful capture")
raises(lambda: ember.cuda.CUDAGraph().pool(), "without a preceding successful capture")
a = ember.cuda._allocator(0)
assert not a.capture_pools
# a capture that failed leaves the device usable and a later capture works
g = ember.cuda.CUDAGraph()
with ember.cuda.graph(g):
    y = x * 5
x.fill_(2.0)
g.replay()
assert y.cpu().tolist() == [10.0] * 8
raises(lambda: g.capture_begin(), "already owns a captured graph")
"""


def test_illegal_operations_during_capture_raise():
    run_script(ILLEGAL, "graphs_illegal")


GRAPHED = r"""
import ember
import numpy as np

ember.manual_seed(0)
mlp = ember.nn.Sequential(ember.nn.Linear(16, 32), ember.nn.ReLU(), ember.nn.Linear(32, 4)).cuda()
ref = ember.nn.Sequential(ember.nn.Linear(16, 32), ember.nn.ReLU(), ember.nn.Linear(32, 4)).cuda()
ref.load_state_dict(mlp.state_dict())
fn = lambda a, b: (a * b).sum(dim=1, keepdim=True)
x = ember.randn(8, 16, device="cuda")
a0 = ember.randn(8, 4, device="cuda", requires_grad=True)
b0 = ember.randn(8, 4, device="cuda")
gmlp, gfn = ember.cuda.make_graphed_callables((mlp, fn), ((x,), (a0, b0)), num_warmup_iters=1)
for step in range(2):
    xs = ember.randn(8, 16, device="cuda")
    a = ember.randn(8, 4, device="cuda", requires_grad=True)
    b = ember.randn(8, 4, device="cuda")
    out = gfn(gmlp(xs) * a, b).sum()
    out.backward()
    a2 = a.detach().clone().requires_grad_(True)
    want = fn(ref(xs) * a2, b).sum()
    want.backward()
    np.testing.assert_allclose(out.item(), want.item(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(a.grad.cpu().numpy(), a2.grad.cpu().numpy(), rtol=1e-4, atol=1e-4)
    for p, q in zip(mlp.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.cpu().numpy(), q.grad.cpu().numpy(), rtol=1e-4,
                                   atol=1e-4)
        p.grad = None
        q.grad = None
mlp.eval()          # not the captured state: the original forward runs
np.testing.assert_allclose(gmlp(xs).detach().cpu().numpy(), ref(xs).detach().cpu().numpy(),
                           rtol=1e-4, atol=1e-4)
"""


def test_make_graphed_callables_forward_and_backward_equal_eager():
    run_script(GRAPHED, "graphs_graphed")


def test_make_graphed_callables_rejects_non_tensor_samples():
    import ember
    with pytest.raises(AssertionError, match="only Tensors"):
        ember.cuda.make_graphed_callables(lambda a: a, ((1.0,),))
