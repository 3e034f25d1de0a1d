"""Kernels without a GPU: the Triton code generator in Triton's interpreter on host memory, and
the whole backend on the fake device (EMBER_CUDA_FAKE=1: host memory + interpreter), each in a
subprocess so the environment variables take effect before triton is imported."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ember

triton = pytest.importorskip("triton")  # the interpreter tests need triton (not in CI's lock yet)

ENV = dict(os.environ, EMBER_CUDA_FAKE="1", TRITON_INTERPRET="1",
           PYTHONPATH=os.pathsep.join(p for p in sys.path if p))

FAKE_SCRIPT = r"""
import numpy as np, ember
import ember.autograd
F = ember.nn.functional
rng = np.random.default_rng(0)
def close(a, b, tol=1e-5):
    a, b = a.detach().cpu(), b.detach().cpu()
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), (a, b)
    assert np.allclose(a.float().numpy(), b.float().numpy(), rtol=tol, atol=tol,
                       equal_nan=True), (a, b)
x = ember.tensor(rng.standard_normal((5, 6)).astype("float32"))
y = ember.tensor(rng.standard_normal((6,)).astype("float32"))
i = ember.tensor(rng.integers(-9, 9, (5, 6)))
g, gy, gi = x.cuda(), y.cuda(), i.cuda()
assert g.device == ember.device("cuda:0")
cases = [lambda a, b, c: a + b, lambda a, b, c: a.t() * 2 - 1, lambda a, b, c: a[1:, ::2].exp(),
         lambda a, b, c: ember.where(a > b, a, 0.5), lambda a, b, c: F.gelu(a),
         lambda a, b, c: ember.clamp(a, max=0.1), lambda a, b, c: ember.clamp(a, min=0.1),
         lambda a, b, c: c // 4, lambda a, b, c: c % 3, lambda a, b, c: (c > 0) & (a < 0),
         lambda a, b, c: a.add(b, alpha=3), lambda a, b, c: c.to(ember.float32) / 7,
         lambda a, b, c: a.sum(1), lambda a, b, c: a.amax(0), lambda a, b, c: a.mean(),
         lambda a, b, c: a.softmax(1), lambda a, b, c: a.log_softmax(0),
         lambda a, b, c: a.argmax(1), lambda a, b, c: c.sum(), lambda a, b, c: a.tril(1),
         lambda a, b, c: c.triu(-1),
         lambda a, b, c: ember.slice_scatter(a, b[:5].reshape(5, 1) * 1.0, 1, 2, 3)]
for f in cases:
    close(f(x, y, i), f(g, gy, gi))
for _ in range(2):  # the second run takes the cached launch plans
    close(x * 3 + y, g * 3 + gy)
z = ember.zeros(4, device="cuda"); z[1:3] = 2; z.add_(1)
assert z.cpu().tolist() == [1.0, 3.0, 3.0, 1.0]
emb, ln, lin = ember.nn.Embedding(20, 8), ember.nn.LayerNorm(8), ember.nn.Linear(8, 20)
idx = ember.tensor(rng.integers(0, 20, (3, 4)))
def loss(dev):
    ms = [m.to(dev) for m in (emb, ln, lin)]
    return F.cross_entropy(ms[2](ms[1](ms[0](idx.to(dev)))).view(-1, 20), idx.to(dev).view(-1))
lc = loss("cpu"); lc.backward(); gc = emb.weight.grad.clone(); emb.weight.grad = None
lg = loss("cuda"); lg.backward()
close(lc, lg, 1e-4); close(gc, emb.weight.grad, 1e-4)
import ember.cuda as C
s = C.Stream()
with C.stream(s):
    assert C.current_stream() == s
    w = g + 1
C.synchronize()
assert C.memory_allocated() > 0 and "Allocated memory" in C.memory_summary()
xp = ember.tensor(rng.standard_normal((2, 3, 7, 6)).astype("float32"))
for dev in ("cpu", "cuda"):
    t = xp.to(dev).detach().requires_grad_()
    y, ind = F.max_pool2d(t, 3, 2, 1, return_indices=True)
    (y * y).sum().backward()
    if dev == "cpu":
        ref = (y, ind, t.grad)
    else:
        close(ref[0], y); close(ref[1], ind); close(ref[2], t.grad)
    c = F.conv2d(t, ember.ones(2, 3, 3, 3, device=dev), padding=1)
    ref_c = c if dev == "cpu" else close(ref_c, c, 1e-4)
print("fallbacks", sorted(C.host_memory_fallbacks()))
print("FAKE OK")
"""


def _interpreter_loops_ok() -> bool:
    # Triton < 3.8's interpreter breaks loops over runtime ints with numpy >= 2.4 (gpu.md)
    major_minor = tuple(int(v) for v in triton.__version__.split(".")[:2])
    np_mm = tuple(int(v) for v in np.__version__.split(".")[:2])
    return major_minor >= (3, 8) or np_mm < (2, 4)


@pytest.mark.skipif(not _interpreter_loops_ok(), reason="Triton<3.8 interpreter with numpy>=2.4")
def test_backend_on_the_fake_device():
    out = subprocess.run([sys.executable, "-c", FAKE_SCRIPT], env=ENV, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0 and "FAKE OK" in out.stdout, out.stdout + out.stderr[-3000:]


def test_codegen_layouts_and_dtypes_in_interpreter():
    code = r"""
import numpy as np, ember
from ember._ops import OPS
from ember._dispatch import pointwise_dtypes
from ember.cuda.kernels.pointwise import PointwiseCache, Operand, HostPtr, run_op
keep = []
def launch(fn, grid, call, key, const):
    fn[grid](*[c.ptr if isinstance(c, Operand) else c for c in call], **const)
cache = PointwiseCache(launch)
def operand_of(t):
    keep.append(t)
    return Operand(HostPtr(t._storage.data, t.dtype, t._offset * t.dtype.itemsize), 0,
                   tuple(t.shape), t.stride(), t.dtype)
def new_out(shape, dt):
    t = ember.empty(shape, dtype=dt)
    return t, operand_of(t)
def run(name, *args, **kw):
    op = OPS[name]
    a = op.bind(args, kw)
    _, rdt, cdt = pointwise_dtypes(op, [a[i] for i in op.pw_idx], a)
    got = run_op(cache, op, a, rdt, cdt, operand_of, new_out, "cpu")
    exp = op(*args, **kw)
    assert got.dtype == exp.dtype and tuple(got.shape) == tuple(exp.shape), name
    assert np.allclose(got.numpy().astype("float64"), exp.numpy().astype("float64"),
                       rtol=1e-5, atol=1e-6, equal_nan=True), (name, got, exp)
rng = np.random.default_rng(0)
x = ember.tensor(rng.standard_normal((3, 4)).astype("float32"))
y = ember.tensor(rng.standard_normal((4,)).astype("float32"))
i = ember.tensor(rng.integers(-9, 9, (3, 4)).astype("int32"))
j = ember.tensor(rng.integers(1, 5, (4,)).astype("int64"))
run("add", x, y, alpha=2); run("add", x, x.t().t()); run("mul", x.t(), 3.0)
run("sub", x[:, ::2], y[::2]); run("where", x > 0, x, y); run("maximum", x, y)
run("floor_divide", i, j); run("remainder", i, j); run("div", i, j)
run("div", i, j, rounding_mode="floor"); run("div", i, j, rounding_mode="trunc")
run("clamp", x, -0.5, 0.5); run("exp", i); run("abs", i); run("neg", x.expand(2, 3, 4))
run("eq", i, j); run("bitwise_and", i, j); run("sigmoid", x); run("relu", x)
run("gelu", x); run("logical_not", i); run("isnan", x); run("sign", i)
x64 = x.double(); run("mul", x64, 0.1); run("add", x64, 1e-9)
print("CODEGEN OK")
"""
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0 and "CODEGEN OK" in out.stdout, out.stdout + out.stderr[-3000:]




@pytest.mark.skipif(not _interpreter_loops_ok(), reason="Triton<3.8 interpreter with numpy>=2.4")
def test_fused_optimizer_steps_in_interpreter():
    # AdamW / Adam (L2) / SGD momentum (nesterov, maximize) on the fake device take the fused
    # kernels (ember.cuda.kernels.optim_tl): parameters match the CPU's op-by-op steps
    code = r"""
import numpy as np, ember
import ember.autograd
rng = np.random.default_rng(0)
w0 = rng.standard_normal((3, 5)).astype("float32")
x = ember.tensor(rng.standard_normal((4, 5)).astype("float32"))
calls = []
import ember.cuda.kernels.optim as O
orig = O.fused_optim
def spy(*a):
    done = orig(*a)
    if done:
        calls.append(a[1])
    return done
O.fused_optim = spy
def run(dev, make):
    w = ember.nn.Parameter(ember.tensor(w0, device=dev))
    opt = make([w])
    for _ in range(3):
        opt.zero_grad()
        ((x.to(dev) @ w.t()) ** 2).sum().backward()
        w.grad = w.grad.t().contiguous().t() if dev == "cuda" else w.grad  # a strided grad
        opt.step()
    return w.detach().cpu().numpy()
# (foreach=False: the per-parameter kernels; the multi-tensor default has its own tests,
# test_cuda_foreach_optim.py)
for make in (lambda p: ember.optim.AdamW(p, lr=0.1, foreach=False),
             lambda p: ember.optim.Adam(p, lr=0.1, weight_decay=0.1, maximize=True,
                                        foreach=False),
             lambda p: ember.optim.SGD(p, lr=0.01, momentum=0.9, nesterov=True, foreach=False),
             lambda p: ember.optim.SGD(p, lr=0.01, momentum=0.9, weight_decay=0.1,
                                       dampening=0.1, maximize=True, foreach=False)):
    a, b = run("cpu", make), run("cuda", make)
    assert np.allclose(a, b, rtol=1e-5, atol=1e-5), (a, b)
assert calls.count("adam") == 6 and calls.count("sgd") == 4, calls
print("OPTIM OK")
"""
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0 and "OPTIM OK" in out.stdout, out.stdout + out.stderr[-3000:]


def test_arange_kernel_in_interpreter():
    code = r"""
import ember, ember.cuda, numpy as np
for a in [(5,), (2, 9), (1, 10, 3), (10, 0, -2), (0,), (3, 7.5), (0.5, 3)]:
    for dt in (None, ember.float32, ember.bfloat16, ember.int32):
        c = ember.arange(*a, dtype=dt)
        g = ember.arange(*a, dtype=dt, device="cuda")
        assert c.dtype == g.dtype and c.shape == g.shape, (a, dt)
        assert np.array_equal(c.float().numpy(), g.cpu().float().numpy()), (a, dt, c, g)
assert ember.cuda.host_memory_fallbacks() == {"arange": 4}, ember.cuda.host_memory_fallbacks()
print("ARANGE OK")
"""
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0 and "ARANGE OK" in out.stdout, out.stdout + out.stderr[-3000:]


@pytest.mark.skipif(not _interpreter_loops_ok(), reason="Triton<3.8 interpreter with numpy>=2.4")
def test_column_sums_and_layer_norm_backward_in_interpreter():
    # sums over leading dims (col_reduce: one launch, or partials + one) and the layer_norm
    # backward kernel (registered over core's decomposition) against the CPU
    code = r"""
import numpy as np, ember, ember.autograd, ember.cuda
rng = np.random.default_rng(0)
def close(a, b, tol):
    a = a.detach().float().cpu().numpy(); b = b.detach().float().cpu().numpy()
    assert a.shape == b.shape, (a.shape, b.shape)
    assert np.allclose(a, b, rtol=tol, atol=tol), np.abs(a - b).max()
for shape, dims in [((7, 5), 0), ((3, 4, 5), (0, 1)), ((300, 40, 100), 0), ((5000, 300), 0)]:
    x = ember.tensor(rng.standard_normal(shape).astype("float32"))
    close(x.sum(dims), x.cuda().sum(dims), 1e-3)
    close(x.mean(dims), x.cuda().mean(dims), 1e-4)
    close(x.sum(dims, keepdim=True), x.cuda().sum(dims, keepdim=True), 1e-3)
xi = ember.tensor(rng.integers(-5, 5, (6, 7)))
assert xi.sum(0).tolist() == xi.cuda().sum(0).cpu().tolist()
assert "cuda" in ember._ops.OPS["native_layer_norm_backward"].kernels
for shape, n in [((4, 6, 10), 10), ((700, 33), 33)]:
    x0 = rng.standard_normal(shape).astype("float32")
    w0 = rng.standard_normal(n).astype("float32")
    res = []
    for dev in ("cpu", "cuda"):
        ln = ember.nn.LayerNorm(n).to(dev)
        with ember.no_grad():
            ln.weight.copy_(ember.tensor(w0))
        x = ember.tensor(x0, device=dev).requires_grad_()
        y = ln(x)
        (y * y.detach()).sum().backward()
        res.append((x.grad, ln.weight.grad, ln.bias.grad))
    for a, b in zip(*res):
        close(a, b, 1e-4)
assert ember.cuda.host_memory_fallbacks() == {}, ember.cuda.host_memory_fallbacks()
print("COLSUM LN OK")
"""
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0 and "COLSUM LN OK" in out.stdout, out.stdout + out.stderr[-3000:]


@pytest.mark.skipif(ember.cuda.is_available(), reason="a real GPU runs test_cuda_opdb.py itself")
def test_op_database_on_the_fake_device():
    """test_cuda_opdb.py (every op of core's database, forward and backward, vs the CPU) on the
    fake device: the GPU kernels' logic in Triton's interpreter, in CI."""
    here = os.path.dirname(os.path.abspath(__file__))
    core_tests = os.path.join(here, "..", "..", "core", "tests")
    env = dict(ENV, PYTHONPATH=os.pathsep.join([core_tests, ENV["PYTHONPATH"]]))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                          os.path.join(here, "test_cuda_opdb.py")],
                         env=env, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    last = out.stdout.splitlines()[-1]
    assert " passed" in last and "skipped" not in last, out.stdout[-500:]
