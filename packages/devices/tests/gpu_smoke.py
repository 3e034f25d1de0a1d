"""GPU smoke run: each step of the CUDA backend in order, printing OK/FAIL with the error, so one
device call shows every broken piece. `python packages/devices/tests/gpu_smoke.py` on a GPU."""
import sys
import time
import traceback

import numpy as np

import ember

STEPS = []


def step(fn):
    STEPS.append(fn)
    return fn


@step
def runtime():
    import ember.cuda as c
    print("  devices", c.device_count(), c.get_device_name(0), c.get_device_capability(0))
    print("  ", c.get_device_properties(0))
    c.synchronize()


@step
def copies():
    x = ember.arange(12.0).reshape(3, 4)
    g = x.cuda()
    assert g.device == ember.device("cuda:0"), g.device
    assert np.array_equal(g.cpu().numpy(), x.numpy())
    assert np.array_equal(g.t().cpu().numpy(), x.t().numpy())
    h = ember.empty(3, 4, device="cuda")
    h.copy_(x)
    assert np.array_equal(h.cpu().numpy(), x.numpy())


@step
def pointwise():
    x = ember.randn(300, 257)
    y = ember.randn(257)
    gx, gy = x.cuda(), y.cuda()
    for f in (lambda a, b: a + b, lambda a, b: a * 2 - b, lambda a, b: (a > b).float(),
              lambda a, b: ember.nn.functional.gelu(a), lambda a, b: a.t().exp(),
              lambda a, b: ember.where(a > 0, a, b), lambda a, b: a.to(ember.bfloat16) + 1):
        r, e = f(gx, gy).cpu(), f(x, y)
        assert np.allclose(r.float().numpy(), e.float().numpy(), rtol=1e-2, atol=1e-5), f
    i = ember.randint(-9, 9, (100,))
    assert np.array_equal((i.cuda() // 4).cpu().numpy(), (i // 4).numpy())


@step
def inplace_and_fill():
    g = ember.zeros(5, device="cuda")
    g.add_(1).mul_(3)
    assert g.cpu().tolist() == [3.0] * 5
    g.fill_(2.5)
    assert g.cpu().tolist() == [2.5] * 5
    g[1:3] = 7
    assert g.cpu().tolist() == [2.5, 7, 7, 2.5, 2.5], g.cpu().tolist()


@step
def reductions():
    x = ember.randn(64, 1000)
    g = x.cuda()
    for f in (lambda a: a.sum(), lambda a: a.sum(1), lambda a: a.mean(0), lambda a: a.amax(1),
              lambda a: a.softmax(-1), lambda a: a.log_softmax(0), lambda a: a.argmax(1)):
        r, e = f(g).cpu(), f(x)
        assert np.allclose(r.numpy(), e.numpy(), rtol=1e-4, atol=1e-4), f


@step
def matmul():
    for dt in (ember.float32, ember.float16, ember.bfloat16):
        a, b = ember.randn(65, 33), ember.randn(33, 17)
        r = (a.cuda().to(dt) @ b.cuda().to(dt)).float().cpu()
        e = a.to(dt).float() @ b.to(dt).float()
        err = float((r - e).norm() / e.norm())
        assert err < 1e-2, (dt, err)
        rt = (b.t().cuda().to(dt).t().t() @ a.t().cuda().to(dt).t().t()).float().cpu()
        err = float((rt - (b.t().to(dt).float() @ a.t().to(dt).float())).norm() / e.norm())
        assert err < 1e-2, ("transposed", dt, err)
    a, b = ember.randn(4, 5, 6), ember.randn(4, 6, 3)
    r = (a.cuda() @ b.cuda()).cpu()
    assert np.allclose(r.numpy(), (a @ b).numpy(), rtol=1e-2, atol=1e-2)


@step
def fallback_ops():
    w = ember.randn(10, 8)
    idx = ember.tensor([1, 3, 5])
    r = ember.nn.functional.embedding(idx.cuda(), w.cuda()).cpu()
    assert np.allclose(r.numpy(), w[idx].numpy())
    print("  host fallbacks:", ember.cuda.host_memory_fallbacks())


@step
def mlp_train():
    import ember.autograd  # noqa: F401
    nn = ember.nn
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
    mg = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
    mg.load_state_dict(m.state_dict())
    mg = mg.cuda()
    x, y = ember.randn(16, 20), ember.randint(0, 5, (16,))
    loss = nn.functional.cross_entropy(m(x), y)
    loss.backward()
    lg = nn.functional.cross_entropy(mg(x.cuda()), y.cuda())
    lg.backward()
    assert abs(loss.item() - lg.item()) < 1e-3, (loss.item(), lg.item())
    g1, g2 = m[0].weight.grad, mg[0].weight.grad.cpu()
    assert np.allclose(g1.numpy(), g2.numpy(), atol=1e-3), "grad"


@step
def allocator():
    import ember.cuda as c
    c.empty_cache()
    base = c.memory_allocated()
    x = ember.empty(1000, device="cuda")
    assert c.memory_allocated() == base + 4096, c.memory_allocated()
    p = x.data_ptr()
    del x
    y = ember.empty(1000, device="cuda")
    assert y.data_ptr() == p
    s = c.Stream()
    with c.stream(s):
        z = ember.empty(1000, device="cuda")
    assert z.data_ptr() != p
    print(c.memory_summary())
    try:
        ember.empty(1 << 45, dtype=ember.uint8, device="cuda")
    except c.OutOfMemoryError as e:
        print("  OOM:", e)
    else:
        raise AssertionError("no OOM")


@step
def streams_events():
    import ember.cuda as c
    s = c.Stream()
    e0, e1 = c.Event(enable_timing=True), c.Event(enable_timing=True)
    x = ember.randn(1 << 22, device="cuda")
    with c.stream(s):
        e0.record()
        for _ in range(10):
            x = x * 1.0001
        e1.record()
    e1.synchronize()
    print("  10 muls on a side stream:", e0.elapsed_time(e1), "ms")
    c.current_stream().wait_stream(s)


@step
def launch_cost():
    x = ember.ones(16, device="cuda")
    for _ in range(100):
        y = x + x
    ember.cuda.synchronize()
    n = 5000
    t = time.perf_counter()
    for _ in range(n):
        y = x + x
    ember.cuda.synchronize()
    print(f"  x + x: {(time.perf_counter() - t) / n * 1e6:.1f} us/op")
    import cProfile
    import pstats
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(2000):
        y = x + x
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(12)
    del y


def main():
    bad = 0
    for f in STEPS:
        t = time.perf_counter()
        try:
            f()
            print(f"OK   {f.__name__} ({time.perf_counter() - t:.1f}s)", flush=True)
        except Exception:
            bad += 1
            print(f"FAIL {f.__name__}", flush=True)
            traceback.print_exc(limit=6)
    print("fallbacks:", ember.cuda.host_memory_fallbacks())
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
