"""ember.library.triton_op / wrap_triton: a user Triton kernel runs eagerly (a GPU, the fake
device, or CPU tensors under Triton's interpreter), is one node in make_fx and ember.compile
graphs, gets its fake outputs from the function itself, is differentiable through
register_autograd, and is captured by CUDA graphs; values and gradients against PyTorch."""
import pytest
from cuda_helpers import run_script

import ember
from ember.library import triton_op, wrap_triton

SCRIPT = r"""
import numpy as np
import torch
import triton
import triton.language as tl

import ember
from ember.fx.experimental.proxy_tensor import make_fx
from ember.library import triton_op, wrap_triton


@triton.jit
def muladd_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x * y + x, mask=m)


@triton_op("tt_test::muladd", mutates_args=())
def muladd(x: ember.Tensor, y: ember.Tensor) -> ember.Tensor:
    out = ember.empty_like(x)
    n = out.numel()
    wrap_triton(muladd_kernel)[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n,
                                                                            BLOCK=64)
    return out


def setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def backward(ctx, g):
    x, y = ctx.saved_tensors
    return g * (y + 1), g * x


muladd.register_autograd(backward, setup_context=setup)


def nodes(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function"
            and "triton_op" in getattr(n.target, "tags", ())]


rng = np.random.default_rng(0)
a, b = rng.standard_normal(100).astype(np.float32), rng.standard_normal(100).astype(np.float32)
ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
(ta * tb + ta).relu().sum().backward()
for dev in (("cuda",) if ON_GPU else ("cpu", "cuda")):
    x = ember.tensor(a, device=dev, requires_grad=True)
    y = ember.tensor(b, device=dev, requires_grad=True)
    out = muladd(x, y)                                      # eager
    assert out.device.type == dev
    np.testing.assert_allclose(out.detach().cpu().numpy(), a * b + a, rtol=1e-6, atol=1e-6)
    gm = make_fx(lambda p, q: muladd(p, q) * 2)(x.detach(), y.detach())
    assert [n.target for n in nodes(gm)] == [muladd._opdef], gm.code
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        from ember._dynamo.backends import lookup_backend
        return lookup_backend("aot_eager")(gm, example_inputs)

    f = ember.compile(lambda p, q: muladd(p, q).relu(), backend=backend)
    for _ in range(2):
        x.grad = y.grad = None
        r = f(x, y)
        r.sum().backward()
        np.testing.assert_allclose(r.detach().cpu().numpy(), np.maximum(a * b + a, 0),
                                   rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(x.grad.cpu().numpy(), ta.grad.numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(y.grad.cpu().numpy(), tb.grad.numpy(), rtol=1e-6, atol=1e-6)
    assert len(graphs) == 1 and len(nodes(graphs[0])) == 1, [g.code for g in graphs]

# a CUDA graph captures the user kernel's launch like any other
x = ember.tensor(a, device="cuda")
y = ember.tensor(b, device="cuda")
muladd(x, y)
g = ember.cuda.CUDAGraph()
with ember.cuda.graph(g):
    z = muladd(x, y)
x.copy_(ember.tensor(b, device="cuda"))
g.replay()
np.testing.assert_allclose(z.cpu().numpy(), b * b + b, rtol=1e-6, atol=1e-6)
"""


def test_triton_op_eager_traced_compiled_differentiable_and_captured():
    run_script(SCRIPT, "triton_op")


def test_fake_outputs_come_from_the_function_without_launching():
    from ember._subclasses.fake_tensor import FakeTensorMode

    class Kernel:  # stands in for a @triton.jit function: a launch here is a bug
        def run(self, *a, **k):
            raise AssertionError("launched")

        def __getitem__(self, grid):
            raise AssertionError("launched")

    k = Kernel()

    @triton_op("tt_test::fake_only", mutates_args=())
    def op(x: ember.Tensor) -> ember.Tensor:
        out = ember.empty(x.shape[0], 2, dtype=ember.float64, device=x.device)
        wrap_triton(k)[(1,)](x, out)
        return out

    mode = FakeTensorMode()
    x = mode.from_tensor(ember.ones(5, 3))
    with mode:
        y = op(x)
    assert tuple(y.shape) == (5, 2) and y.dtype == ember.float64


def test_wrap_triton_errors(monkeypatch):
    with pytest.raises(RuntimeError, match="triton.jit or triton.autotune"):
        wrap_triton(lambda x: x)

    class Kernel:
        def run(self, *a, **k):
            pass

        def __getitem__(self, grid):
            raise AssertionError("launched")

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(RuntimeError, match="CUDA tensors"):
        wrap_triton(Kernel())[(1,)](ember.ones(3))
