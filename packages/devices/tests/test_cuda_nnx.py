"""ember.cuda's nn kernels (kernels: norm, pool, sample, conv) against the CPU: convolution variants
(1-D/3-D, groups, dilation, transposed), batch/group norm, pools, interpolation and constant
padding, with gradients, non-contiguous inputs and float64; and none of them may run on host copies.

Without a GPU the script runs on the fake device (host memory + Triton's interpreter) in a
subprocess; with one it runs on the GPU."""
from cuda_script import run_script

SCRIPT = r"""
import numpy as np, ember
import ember.autograd
import ember.cuda
F = ember.nn.functional
rng = np.random.default_rng(0)

def t(*shape, dt="float32"):
    return ember.tensor(rng.standard_normal(shape).astype(dt))

def run(name, f, *inputs, tol=1e-4, grad=True):
    cpu = [x.detach().clone().requires_grad_(grad and x.dtype.is_floating_point) if
           isinstance(x, ember.Tensor) else x for x in inputs]
    gpu = [x.detach().cuda().requires_grad_(grad and x.dtype.is_floating_point) if
           isinstance(x, ember.Tensor) else x for x in inputs]
    a, b = f(*cpu), f(*gpu)
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    for u, v in zip(a, b):
        v = v.detach().cpu()
        assert u.dtype == v.dtype and tuple(u.shape) == tuple(v.shape), (name, u.shape, v.shape)
        assert np.allclose(u.detach().double().numpy(), v.double().numpy(), rtol=tol, atol=tol,
                           equal_nan=True), (name, u, v)
    if grad:
        w = ember.tensor(rng.standard_normal(tuple(a[0].shape)).astype("float64")).to(a[0].dtype)
        (a[0] * w).sum().backward()
        (b[0] * w.cuda()).sum().backward()
        for x, y in zip(cpu, gpu):
            if isinstance(x, ember.Tensor) and x.grad is not None:
                assert np.allclose(x.grad.double().numpy(), y.grad.cpu().double().numpy(),
                                   rtol=tol, atol=tol), (name, "grad", x.grad, y.grad)

# convolutions
run("conv2d groups/dilation/stride", lambda x, w, b: F.conv2d(x, w, b, 2, 1, 2, 2),
    t(2, 4, 7, 6), t(6, 2, 3, 2), t(6))
run("conv1d depthwise", lambda x, w: F.conv1d(x, w, None, 1, 2, 1, 3), t(2, 3, 9), t(3, 1, 3))
run("conv3d", lambda x, w, b: F.conv3d(x, w, b, 1, 1), t(1, 2, 4, 3, 4), t(3, 2, 2, 3, 2), t(3))
run("conv_transpose2d groups", lambda x, w, b: F.conv_transpose2d(x, w, b, 2, 1, 1, 2, 1),
    t(2, 4, 3, 3), t(4, 3, 3, 3), t(6))
run("conv_transpose1d dilation", lambda x, w: F.conv_transpose1d(x, w, None, 3, 0, 2, 1, 2),
    t(1, 2, 4), t(2, 3, 2))
run("conv_transpose3d", lambda x, w: F.conv_transpose3d(x, w, None, 2), t(1, 2, 2, 2, 3),
    t(2, 2, 2, 2, 2))
run("conv2d float64 strided", lambda x, w: F.conv2d(x.transpose(2, 3), w, None, 1, 1),
    t(2, 3, 5, 4, dt="float64"), t(2, 3, 3, 3, dt="float64"), tol=1e-9)
# normalization
def bn(train):
    def f(x, w, b):
        rm, rv = ember.zeros(x.shape[1], device=x.device), ember.ones(x.shape[1], device=x.device)
        y = F.batch_norm(x, rm, rv, w, b, train, 0.3, 1e-5)
        return y, rm, rv
    return f
run("batch_norm train 4d", bn(True), t(3, 4, 5, 2), t(4), t(4))
run("batch_norm train 2d", bn(True), t(6, 3), t(3), t(3))
run("batch_norm eval 3d", bn(False), t(2, 3, 5), t(3), t(3))
run("batch_norm train float64", bn(True), t(4, 2, 3, dt="float64"), t(2, dt="float64"),
    t(2, dt="float64"), tol=1e-9)
run("batch_norm no affine", lambda x: F.batch_norm(x, None, None, None, None, True),
    t(3, 2, 4).transpose(0, 2))
# few channels of many values: each channel split over several programs (partials)
run("batch_norm train split", bn(True), t(4, 2, 48, 48), t(2), t(2))
run("batch_norm eval split", bn(False), t(3, 3, 2100), t(3), t(3))
run("batch_norm split float64 no affine", lambda x: F.batch_norm(x, None, None, None, None, True),
    t(5000, 2, dt="float64"), tol=1e-9)
run("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b), t(3, 4, 5), t(4), t(4))
run("group_norm 4d no affine", lambda x: F.group_norm(x, 3, eps=1e-3), t(2, 6, 2, 3))
# pooling
run("avg_pool2d ceil/pad/exclude", lambda x: F.avg_pool2d(x, 3, 2, 1, True, False), t(2, 3, 7, 6))
run("avg_pool2d divisor", lambda x: F.avg_pool2d(x, (2, 3), (1, 2), (1, 1), False, True, 5),
    t(1, 2, 5, 6))
run("avg_pool1d", lambda x: F.avg_pool1d(x, 3, 2, 1, True), t(2, 3, 8))
run("avg_pool3d", lambda x: F.avg_pool3d(x, 2, (1, 2, 2), 1, False, False), t(1, 2, 3, 4, 5))
run("max_pool1d", lambda x: F.max_pool1d(x, 3, 2, 1, 2, True, True), t(2, 3, 11))
run("max_pool3d", lambda x: F.max_pool3d(x, 2, 2, 1, 1, False, True), t(1, 2, 5, 4, 5))
run("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (3, 4)), t(2, 3, 7, 5))
run("adaptive_avg_pool1d", lambda x: F.adaptive_avg_pool1d(x, 4), t(2, 9))
run("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 1, 3)), t(1, 2, 3, 4, 5))
run("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (2, 3), True), t(2, 3, 5, 7))
run("adaptive_max_pool1d", lambda x: F.adaptive_max_pool1d(x, 3), t(1, 2, 8))
# interpolation
run("nearest", lambda x: F.interpolate(x, size=(5, 7)), t(1, 2, 3, 4))
run("nearest-exact", lambda x: F.interpolate(x, scale_factor=1.7, mode="nearest-exact"),
    t(1, 2, 3, 4))
run("bilinear", lambda x: F.interpolate(x, size=(5, 3), mode="bilinear"), t(2, 2, 3, 4))
run("bilinear align", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear",
                                              align_corners=True), t(1, 2, 3, 4))
run("bicubic", lambda x: F.interpolate(x, size=(6, 5), mode="bicubic"), t(1, 2, 4, 3))
run("trilinear", lambda x: F.interpolate(x, scale_factor=(2, 1.5, 1), mode="trilinear"),
    t(1, 1, 2, 2, 3))
run("linear float64", lambda x: F.interpolate(x, scale_factor=1.3, mode="linear"),
    t(2, 3, 5, dt="float64"), tol=1e-9)
run("unfold", lambda x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
    t(2, 3, 5, 6))
run("fold strided cols", lambda x: F.fold(x.transpose(1, 2), (4, 5), 2, padding=(0, 1)),
    t(2, 18, 20))
run("conv2d bias groups strided weight", lambda x, w, b: F.conv2d(x, w.transpose(2, 3), b, 1, 1,
                                                                  1, 2), t(2, 4, 5, 6),
    t(6, 2, 2, 3), t(6))
run("conv3d stride/dilation", lambda x, w, b: F.conv3d(x, w, b, (2, 1, 1), (1, 0, 2), (1, 2, 1)),
    t(2, 3, 5, 6, 4), t(2, 3, 3, 2, 3), t(2))
run("conv2d float16", lambda x, w, b: F.conv2d(x, w, b, padding=1), t(2, 3, 5, 4, dt="float16"),
    t(4, 3, 3, 3, dt="float16"), t(4, dt="float16"), tol=2e-2)
run("fold", lambda x: F.fold(x, (5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
    t(2, 18, 12))
# padding
run("pad", lambda x: F.pad(x, (1, 2, -1, 0, 0, 1), value=0.5), t(2, 3, 4))
run("pad int", lambda x: F.pad(x, (2, -1), value=3), ember.tensor([[1, 2, 3]]), grad=False)
# cdist: direct kernel (any p), matmul path (p=2, > 25 rows or compute_mode 1)
for pv in (0.0, 1.0, 2.0, 1.5, 3.0, float("inf")):
    run(f"cdist p={pv}", lambda a, b: ember.cdist(a, b, p=pv), t(2, 5, 3), t(2, 4, 3),
        grad=pv != 0.0)
run("cdist mm", lambda a, b: ember.cdist(a, b), t(30, 4), t(7, 4), tol=1e-3)
run("cdist mm batch broadcast", lambda a, b: ember.cdist(a, b, compute_mode=1),
    t(2, 1, 6, 3), t(3, 5, 3), tol=1e-3)
run("cdist no mm float64", lambda a, b: ember.cdist(a, b, 2.5, 2), t(40, 3, dt="float64"),
    t(6, 3, dt="float64"), tol=1e-9)
run("cdist float16", lambda a, b: ember.cdist(a, b, 1.0), t(3, 4, dt="float16"),
    t(2, 4, dt="float16"), tol=1e-2, grad=False)
# grid_sample (2-D): bilinear/nearest, zeros/border, align_corners; gradients of input and grid
for mode in ("bilinear", "nearest"):
    for pad in ("zeros", "border"):
        for ac in (False, True):
            run(f"grid_sample {mode} {pad} {ac}",
                lambda x, g: F.grid_sample(x, g * 1.2, mode, pad, ac), t(2, 3, 5, 4),
                t(2, 3, 6, 2), grad=mode == "bilinear")
            run(f"grid_sample {mode} {pad} {ac} x grad",
                lambda x, g: F.grid_sample(x, g.detach() * 1.2, mode, pad, ac), t(2, 3, 5, 4),
                t(2, 3, 6, 2))
run("grid_sample float64", lambda x, g: F.grid_sample(x, g, align_corners=False),
    t(1, 2, 4, 6, dt="float64"), t(1, 5, 5, 2, dt="float64"), tol=1e-9)
for bad in (lambda: F.grid_sample(ember.ones(1, 1, 2, 2, device="cuda"),
                                  ember.zeros(1, 2, 2, 2, device="cuda"),
                                  padding_mode="reflection", align_corners=False),
            lambda: F.grid_sample(ember.ones(1, 1, 2, 2, device="cuda"),
                                  ember.zeros(2, 2, 2, 2, device="cuda"), align_corners=False)):
    try:
        bad()
        raise AssertionError("no error")
    except (NotImplementedError, RuntimeError):
        pass
FAMILY = ("conv", "norm", "pool", "upsample", "pad", "im2col", "col2im", "cdist", "grid")
bad = {k: v for k, v in ember.cuda.host_memory_fallbacks().items()
       if any(s in k for s in FAMILY)}
assert not bad, bad
print("ok")
"""


def test_nnx_kernels():
    run_script(SCRIPT, "test_cuda_nnx", timeout=900)
