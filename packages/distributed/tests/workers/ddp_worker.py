"""Worker (run under mpiexec, 2 ranks): DDP training equals single-process training on the same
data: plain steps, gradient accumulation under no_sync, an unused parameter
(find_unused_parameters), the start-up broadcast of rank 0's state, buffer broadcast."""

import numpy as np
from worker_check import check as _check
from worker_check import finish

import ember
import ember.distributed as dist
from ember import nn
from ember.nn.parallel import DistributedDataParallel as DDP
from ember.utils.data import DataLoader, TensorDataset
from ember.utils.data.distributed import DistributedSampler

dist.init_process_group("gloo")
R, N = dist.get_rank(), dist.get_world_size()


check = _check(R)


class Net(nn.Module):
    def __init__(self, unused=False):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(5, 16), nn.Linear(16, 3)
        self.extra = nn.Linear(16, 3) if unused else None
        self.register_buffer("scale", ember.full((3,), 1.0 + R))  # differs until broadcast

    def forward(self, x):
        return self.fc2(ember.relu(self.fc1(x))) * self.scale


def make(seed, unused=False):
    ember.manual_seed(seed)
    return Net(unused)


def data():
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((16, 5)).astype(np.float32))
    y = ember.tensor(rng.standard_normal((16, 3)).astype(np.float32))
    return x, y


def same(a, b, tol=1e-5):
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=tol, atol=tol,
                                   err_msg=n)


def reference(steps, accumulate=1, unused=False):
    """Single process, full batch: what the DDP runs must reproduce."""
    ref = make(0, unused)
    ref.scale.fill_(1.0)
    opt = ember.optim.SGD(ref.parameters(), lr=0.1)
    x, y = data()
    for _ in range(steps):
        opt.zero_grad()
        for xs, ys in zip(x.chunk(accumulate), y.chunk(accumulate)):
            (nn.functional.mse_loss(ref(xs), ys) / accumulate).backward()
        opt.step()
    return ref


@check
def ddp_matches_single_process():
    model = DDP(make(R), bucket_cap_mb=0.0002)  # tiny buckets: several all-reduces
    same(model.module, make(0))                 # rank 0's initial weights everywhere
    assert model.module.scale.tolist() == [1.0] * 3
    assert len(model._buckets) > 1
    x, y = data()
    ds = TensorDataset(x, y)
    loader = DataLoader(ds, batch_size=16 // N, sampler=DistributedSampler(ds, shuffle=False))
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(4):
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.mse_loss(model(xb), yb).backward()
            opt.step()
    same(model.module, reference(4))


@check
def gradient_as_bucket_view():
    """Each .grad is a view of its bucket's buffer (kept across steps: no copies after the
    first), for set_to_none and zeroing zero_grad and under no_sync; training equals one
    process."""
    model = DDP(make(R), bucket_cap_mb=0.0002, gradient_as_bucket_view=True)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    x, y = data()
    xb, yb = x.chunk(N)[R], y.chunk(N)[R]
    for i in range(4):
        opt.zero_grad(set_to_none=i % 2 == 0)
        nn.functional.mse_loss(model(xb), yb).backward()
        for b in model._buckets:
            for p, v in zip(b.params, b.views):
                assert p.grad.data_ptr() == v.data_ptr(), "grad is not the bucket view"
        opt.step()
    same(model.module, reference(4))
    acc = DDP(make(R), gradient_as_bucket_view=True)
    opt = ember.optim.SGD(acc.parameters(), lr=0.1)
    halves = [t.chunk(2) for t in (xb, yb)]
    for _ in range(2):
        opt.zero_grad()
        with acc.no_sync():
            (nn.functional.mse_loss(acc(halves[0][0]), halves[1][0]) / 2).backward()
        (nn.functional.mse_loss(acc(halves[0][1]), halves[1][1]) / 2).backward()
        opt.step()
    same(acc.module, reference(2, accumulate=2 * N))


@check
def first_bucket_is_small():
    """The first bucket (the last parameters) holds up to 1 MiB, the next ones bucket_cap_mb,
    as PyTorch's DDP; a step with them equals one process."""
    ember.manual_seed(0)
    net = nn.Sequential(nn.Linear(300, 600), nn.Linear(600, 600), nn.Linear(600, 300))
    model = DDP(net, bucket_cap_mb=2)
    sizes = [sum(p.numel() * 4 for p in b.params) for b in model._buckets]
    assert sizes[0] <= 1 << 20 and len(sizes) >= 2 and max(sizes) <= 2 << 20, sizes
    assert [p for b in model._buckets for p in b.params] == list(net.parameters())[::-1]


@check
def no_sync_accumulates_then_syncs():
    model = DDP(make(R))
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    x, y = data()
    mine = [t.chunk(N)[R] for t in (x, y)]
    halves = [t.chunk(2) for t in mine]
    for _ in range(3):
        opt.zero_grad()
        with model.no_sync():
            (nn.functional.mse_loss(model(halves[0][0]), halves[1][0]) / 2).backward()
        g = model.module.fc1.weight.grad.clone()
        (nn.functional.mse_loss(model(halves[0][1]), halves[1][1]) / 2).backward()
        assert not np.allclose(g.numpy(), model.module.fc1.weight.grad.numpy())
        opt.step()
    # rank r's halves are global chunks 2r, 2r+1 of 2N equal chunks: the mean of their means
    same(model.module, reference(3, accumulate=2 * N))


@check
def unused_parameter():
    model = DDP(make(R, unused=True), find_unused_parameters=True)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    x, y = data()
    xb, yb = x.chunk(N)[R], y.chunk(N)[R]
    for _ in range(2):
        opt.zero_grad()
        nn.functional.mse_loss(model(xb), yb).backward()
        opt.step()
    assert model.module.extra.weight.grad is None
    same(model.module, reference(2, unused=True))


@check
def unused_without_detection_raises():
    model = DDP(make(R, unused=True))
    x, y = data()
    nn.functional.mse_loss(model(x), y).backward()
    try:
        model(x)
    except RuntimeError as e:
        assert "Expected to have finished reduction" in str(e), e
    else:
        raise AssertionError("no error")


def _train_with_hook(state, hook, steps=3):
    model = DDP(make(R), bucket_cap_mb=0.0002)
    model.register_comm_hook(state, hook)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    x, y = data()
    xb, yb = x.chunk(N)[R], y.chunk(N)[R]
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.mse_loss(model(xb), yb).backward()
        opt.step()
    return model


@check
def comm_hooks():
    from ember.distributed.algorithms.ddp_comm_hooks import default_hooks as H
    same(_train_with_hook(None, H.allreduce_hook).module, reference(3))
    same(_train_with_hook(None, H.fp16_compress_hook).module, reference(3), tol=2e-3)
    same(_train_with_hook(None, H.bf16_compress_wrapper(H.allreduce_hook)).module,
         reference(3), tol=3e-2)
    seen = []

    def custom(state, bucket):  # a hook sees the bucket and may return any Future
        seen.append((state, bucket.index(), len(bucket.parameters()), bucket.is_last()))
        assert sum(g.numel() for g in bucket.gradients()) == bucket.buffer().numel()
        return H.allreduce_hook(None, bucket)
    model = _train_with_hook("st", custom, steps=1)
    same(model.module, reference(1))
    assert seen and all(s[0] == "st" for s in seen) and seen[-1][3], seen
    try:
        model.register_comm_hook(None, custom)
    except RuntimeError as e:
        assert "only be called once" in str(e)
    else:
        raise AssertionError("a second comm hook was registered")


dist.barrier()
finish(R)
