"""cross_entropy in compiled CUDA graphs (_dynamo/loss_decomp.py): loss and gradients equal
eager's for each reduction, ignored targets, float32 and bfloat16 logits; the forward reads
the logits in one reduction kernel and stores no (N, C) log-probabilities; the backward's
logits gradient is one pointwise kernel (no row-sum kernel over the classes). Runs on the fake
device (Triton's interpreter) where there is no GPU."""
from cuda_helpers import run_script

SCRIPT = r"""
import re
import numpy as np, ember
import ember._dynamo
import ember._inductor.graph as G
F = ember.nn.functional

launches = []
_launch = G._launch_triton
def record(fn, grid, bufs, ints, xblock, rblock, opts=None):
    launches.append((fn.__name__, [b.numel() for b in bufs]))
    return _launch(fn, grid, bufs, ints, xblock, rblock, opts)
G._launch_triton = record

def case(dtype, reduction, ignore, N=6, C=37, K=5):
    ember._dynamo.reset()   # (a fresh compile each case: its first call runs the wrapper)
    ember.manual_seed(0)
    w = (ember.randn(C, K, device="cuda") * 2).to(dtype).requires_grad_()
    h = ember.randn(N, K, device="cuda").to(dtype)
    t = ember.randint(0, C, (N,), device="cuda")
    if ignore:
        t[1] = -100
        t[4] = -100

    def f(h, w, t):
        return F.cross_entropy(h @ w.t(), t, reduction=reduction)
    g = ember.randn(N, device="cuda").to(dtype) if reduction == "none" else None
    out = {}
    for name, fn in (("eager", f), ("compiled", ember.compile(f))):
        w.grad = None
        launches.clear()
        loss = fn(h, w, t)
        loss.backward(g)
        out[name] = (loss.detach().float().cpu().numpy(), w.grad.float().cpu().numpy(),
                     list(launches))
    tol = dict(rtol=1e-5, atol=1e-5) if dtype is ember.float32 else dict(rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(out["compiled"][0], out["eager"][0], **tol)
    np.testing.assert_allclose(out["compiled"][1], out["eager"][1], **tol)
    ks = out["compiled"][2]
    full = [k for k in ks if N * C in k[1]]
    # forward: the row max + sum kernel reads (N, C) and writes no (N, C) buffer;
    # backward: one kernel writes the (N, C) gradient
    assert len(full) == 2, ks
    assert full[0][1].count(N * C) == 1, full
    return ks

for dtype in (ember.float32, ember.bfloat16):
    for reduction in ("mean", "sum", "none"):
        for ignore in (False, True):
            case(dtype, reduction, ignore)
G._launch_triton = _launch
print("ok")
"""

CPU = r"""
import numpy as np, ember
F = ember.nn.functional
ember.manual_seed(0)
x = ember.randn(6, 9, requires_grad=True)
t = ember.randint(0, 9, (6,))
f = ember.compile(lambda x, t: F.cross_entropy(x, t))
l1 = f(x, t); l1.backward(); g1 = x.grad.clone(); x.grad = None
l2 = F.cross_entropy(x, t); l2.backward()
np.testing.assert_allclose(l1.detach().numpy(), l2.detach().numpy(), rtol=1e-6)
np.testing.assert_allclose(g1.numpy(), x.grad.numpy(), rtol=1e-5, atol=1e-7)
print("ok")
"""


def test_cross_entropy_cuda_decomposition():
    run_script(SCRIPT, "inductor_cuda_loss")


def test_cross_entropy_cpu_keeps_core_decomposition():
    exec(compile(CPU, "cpu_loss", "exec"), {})


def test_flat_index_only_for_element_blocks():
    """A pointwise kernel addresses in-order elements by `xindex`; a scalar's offset 0 stays 0
    (as `xindex` it stored a whole block past a one-element buffer)."""
    import ember
    from ember._inductor.graph import build
    from ember._inductor.lowering import GraphLowering
    from ember.fx.experimental.proxy_tensor import make_fx

    def sources(fn, *shapes):
        gm = make_fx(fn)(*[ember.ones(*s) for s in shapes])
        meta = [ember.empty(s, device="meta") for s in shapes]
        g = GraphLowering(gm, meta, device="cuda").run()
        return build(g, compile_kernels=False).sources

    (scalar,) = sources(lambda a, b: a * 2 + b, (), ())
    assert "xindex)" not in scalar and "tl.load(p0 + (0))" in scalar, scalar
    (rows,) = sources(lambda a, b: a * 2 + b, (6, 5), (6, 5))
    assert "tl.load(p0 + (xindex)" in rows and "tl.store(p2 + (xindex)" in rows, rows
    (bcast,) = sources(lambda a, b: a * 2 + b, (6, 5), (5,))
    assert "tl.load(p1 + (xindex)" not in bcast, bcast   # the broadcast operand: by column
