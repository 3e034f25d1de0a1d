"""The C++ CPU train-step kernels (_cpu_conv, _cpu_norm) against torch: values and gradients.

Each case runs with the C++ kernels (asserted to be the ones that ran where a compiler is
present) and again with them turned off (the numpy kernels), both against PyTorch 2.13.
"""
import numpy as np
import pytest
from harness import check, check_error, torch

import ember
from ember import _blas, _flags
from ember._ops import _cpu_conv, _cpu_norm, _cpujit


def F(t):
    return t.nn.functional


def _two_threads(monkeypatch):
    """Every C++ kernel call splits over two threads (per-thread sums, concurrent BLAS calls)."""
    monkeypatch.setattr(_cpu_conv, "_FLOPS_PER_THREAD", 1)
    monkeypatch.setattr(_cpu_norm, "_ELEMS_PER_THREAD", 1)
    monkeypatch.setattr(_flags, "_threads", 2)
    monkeypatch.setattr(_blas, "free_cores", lambda: 2)


@pytest.fixture(params=["cpp", "cpp-2-threads", "numpy"])
def kernels(request, monkeypatch):
    """Run a test with the C++ kernels (one thread, two threads), then with numpy's."""
    if request.param == "numpy":
        monkeypatch.setattr(_cpu_conv, "_lib", False)
    else:
        if request.param == "cpp-2-threads":
            _two_threads(monkeypatch)
        _cpu_conv._fn("emconv_fwd", np.float32)   # load it
        if _cpujit.available():
            assert _cpu_conv._lib, "a C++ compiler is here but the conv kernels did not build"
    return request.param


CONV2D = [
    ((2, 3, 9, 10), (6, 3, 3, 3), {}),
    ((2, 4, 9, 10), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2)),
    ((3, 4, 5, 5), (8, 4, 1, 1), {}),                       # 1x1: the input is its own columns
    ((2, 4, 6, 6), (4, 1, 3, 3), dict(padding=1, groups=4)),  # depthwise
    ((1, 2, 7, 5), (3, 2, 2, 3), dict(stride=3, padding=(0, 1))),
]


@pytest.mark.parametrize("xs,ws,kw", CONV2D)
def test_conv2d(kernels, xs, ws, kw):
    check(lambda t, x, w, b: F(t).conv2d(x, w, b, **kw), shapes=[xs, ws, (ws[0],)], grad=True,
          atol=1e-4, rtol=1e-5)


def test_conv2d_no_bias_and_strided_input(kernels):
    check(lambda t, x, w: F(t).conv2d(x.transpose(2, 3), w, padding=1),
          shapes=[(2, 3, 8, 7), (5, 3, 3, 3)], grad=True, atol=1e-4, rtol=1e-5)
    check(lambda t, x, w: F(t).conv2d(x[:, ::2], w, stride=2),
          shapes=[(2, 6, 8, 7), (4, 3, 2, 2)], grad=True, atol=1e-4, rtol=1e-5)


def test_conv1d_conv3d(kernels):
    check(lambda t, x, w, b: F(t).conv1d(x, w, b, stride=2, padding=2, dilation=2),
          shapes=[(2, 3, 11), (4, 3, 3), (4,)], grad=True, atol=1e-4, rtol=1e-5)
    check(lambda t, x, w, b: F(t).conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 0, 1),
                                         dilation=(1, 1, 2)),
          shapes=[(2, 2, 5, 6, 7), (4, 2, 2, 3, 3), (4,)], grad=True, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("xs,ws,kw", [
    ((2, 4, 5, 6), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((2, 4, 5, 6), (4, 2, 3, 2), dict(stride=(2, 3), padding=(1, 0), groups=2, dilation=(1, 2))),
])
def test_conv_transpose2d(kernels, xs, ws, kw):
    cout = ws[1] * kw.get("groups", 1)
    check(lambda t, x, w, b: F(t).conv_transpose2d(x, w, b, **kw), shapes=[xs, ws, (cout,)],
          grad=True, atol=1e-4, rtol=1e-5)


def test_conv_transpose1d(kernels):
    check(lambda t, x, w: F(t).conv_transpose1d(x, w, stride=3, output_padding=2),
          shapes=[(2, 4, 5), (4, 3, 3)], grad=True, atol=1e-4, rtol=1e-5)


def test_conv_transpose_output_padding_past_stride(kernels):
    # output_padding < dilation but >= stride: the output has a position the input maps past
    check(lambda t, x, w: F(t).conv_transpose2d(x, w, stride=1, dilation=2, output_padding=1),
          shapes=[(2, 2, 5, 4), (2, 3, 3, 2)], grad=True, atol=1e-4, rtol=1e-5)


def test_conv_lowp_and_errors(kernels):
    check(lambda t, x, w: F(t).conv2d(x, w, padding=1), shapes=[(1, 2, 5, 5), (3, 2, 3, 3)],
          dtypes=("bfloat16",))
    check_error(lambda t: F(t).conv2d(t.zeros(2, 3, 8, 8), t.zeros(8, 4, 3, 3)))
    check_error(lambda t: F(t).conv2d(t.zeros(2, 4, 2, 2), t.zeros(8, 4, 3, 3)))


def test_conv_double_backward(kernels):
    def fn(t, x, w):
        y = F(t).conv2d(x, w, padding=1)
        gx, = t.autograd.grad(y.pow(2).sum(), x, create_graph=True)
        return gx
    check(fn, shapes=[(2, 2, 5, 5), (3, 2, 3, 3)], grad=True, atol=1e-3, rtol=1e-5)


POOL = [
    ((2, 3, 9, 10), dict(kernel_size=2)),
    ((2, 3, 9, 10), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((2, 3, 9, 10), dict(kernel_size=(3, 2), stride=1, padding=(1, 0), dilation=(2, 1))),
    ((3, 9, 10), dict(kernel_size=3, stride=(2, 3))),          # unbatched
]


@pytest.mark.parametrize("xs,kw", POOL)
def test_max_pool2d(kernels, xs, kw):
    check(lambda t, x: F(t).max_pool2d(x, return_indices=True, **kw), shapes=[xs], grad=True)


def test_max_pool1d_3d_and_strided(kernels):
    check(lambda t, x: F(t).max_pool1d(x, 3, 2, return_indices=True), shapes=[(2, 3, 11)],
          grad=True)
    check(lambda t, x: F(t).max_pool3d(x, 2, (1, 2, 2), 1, return_indices=True),
          shapes=[(1, 2, 5, 6, 7)], grad=True)
    check(lambda t, x: F(t).max_pool2d(x.transpose(2, 3), 2), shapes=[(2, 3, 8, 6)], grad=True)


def test_max_pool_nan_and_ties(kernels):
    x = np.zeros((1, 2, 4, 4), np.float32)      # all ties: the first index of each window
    x[0, 1, 1, 2] = np.nan                      # NaN wins its window
    x[0, 1, 3, 3] = -np.inf
    check(lambda t, a: F(t).max_pool2d(a, 2, return_indices=True), args=[x])
    check(lambda t, a: F(t).max_pool2d(a, 2, 1, return_indices=True), args=[x.copy()],
          dtypes=("float64",))
    check_error(lambda t: F(t).max_pool2d(t.zeros(1, 1, 4, 4), 2, padding=2))


# ---- rows: softmax / log_softmax / layer_norm / cross_entropy ----------------------------------
@pytest.fixture(params=["cpp", "cpp-2-threads", "numpy"])
def rows(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setattr(_cpu_norm, "_lib", False)
    else:
        if request.param == "cpp-2-threads":
            _two_threads(monkeypatch)
        _cpu_norm._fn("emrow_softmax", np.float32)
        if _cpujit.available():
            assert _cpu_norm._lib, "a C++ compiler is here but the row kernels did not build"
    return request.param


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", [((4, 7, 33), -1), ((3, 130), 1), ((2, 5, 6), 1),
                                       ((9,), 0)])
def test_softmax(rows, name, shape, dim):
    check(lambda t, x: getattr(F(t), name)(x, dim), shapes=[shape], grad=True)
    check(lambda t, x: getattr(F(t), name)(x.transpose(0, -1), -1), shapes=[shape], grad=True)


def test_softmax_inf_nan_rows(rows):
    x = np.array([[1, np.nan, 2], [-np.inf] * 3, [np.inf, 1, 2], [-np.inf, 0, 1]], np.float32)
    for name in ("softmax", "log_softmax"):
        check(lambda t, a, n=name: getattr(F(t), n)(a, -1), args=[x])
        check(lambda t, a, n=name: getattr(F(t), n)(a, -1, dtype=t.float64), args=[x.copy()])


def test_softmax_causal_mask(rows):
    """A causal mask's -inf (and finite values far below the row's max: the C++ kernel clamps
    exp's argument there) in rows long enough for the vector loops, forward and backward."""
    mask = np.triu(np.ones((40, 40), bool), 1)
    x = np.random.default_rng(0).standard_normal((2, 3, 40, 40)).astype(np.float32)
    x[..., 1:, 0] = -100.0   # below exp's normal range (not masked: x - max < -87)
    for name in ("softmax", "log_softmax"):
        check(lambda t, a, n=name: getattr(F(t), n)(
            a.masked_fill(t.tensor(mask), float("-inf")), -1), args=[x.copy()], grad=True)


@pytest.mark.parametrize("shape,ns", [((4, 7, 33), (33,)), ((3, 5, 4), (5, 4)), ((6, 200), (200,))])
def test_layer_norm(rows, shape, ns):
    check(lambda t, x, w, b: F(t).layer_norm(x, ns, w, b, 1e-5), shapes=[shape, ns, ns],
          grad=True)
    check(lambda t, x, w: F(t).layer_norm(x, ns, w, eps=1e-2), shapes=[shape, ns], grad=True)
    check(lambda t, x: F(t).layer_norm(x.transpose(0, 1).contiguous().transpose(0, 1), ns),
          shapes=[shape], grad=True)


def test_layer_norm_lowp_and_errors(rows):
    check(lambda t, x, w: F(t).layer_norm(x, (4,), w), shapes=[(3, 4), (4,)],
          dtypes=("bfloat16",))
    check_error(lambda t: F(t).layer_norm(t.zeros(2, 3), (4,)))
    check_error(lambda t: F(t).layer_norm(t.zeros(2, 4), (4,), t.ones(3)))


@pytest.mark.parametrize("kw", [{}, dict(reduction="sum"), dict(reduction="none"),
                                dict(ignore_index=2), dict(label_smoothing=0.1),
                                dict(label_smoothing=0.2, reduction="sum", ignore_index=0)])
def test_cross_entropy(rows, kw):
    tgt = np.array([0, 2, 1, 4, 2, 3], np.int64)

    def fn(t, x):
        y = t.tensor(tgt) if t is ember else torch.from_numpy(tgt)
        return F(t).cross_entropy(x, y, **kw)
    check(fn, shapes=[(6, 5)], grad=True)
    w = np.linspace(0.5, 2, 5).astype(np.float32)

    def weighted(t, x):
        y = t.tensor(tgt) if t is ember else torch.from_numpy(tgt)
        return F(t).cross_entropy(x, y, weight=t.tensor(w, dtype=x.dtype), **kw)
    check(weighted, shapes=[(6, 5)], grad=True)
    check_error(lambda t: F(t).cross_entropy(t.zeros(6, 5), t.zeros(5, dtype=t.int64)))


def test_malloc_tune_applies_and_opts_out():
    import os
    import subprocess
    import sys
    code = "import ember, ember._malloc as m; print(m.tuned)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")
           and k != "GLIBC_TUNABLES"}
    on = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    off = subprocess.run([sys.executable, "-c", code], env={**env, "EMBER_MALLOC_TUNE": "0"},
                         capture_output=True, text=True)
    import platform
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert on.stdout.strip() == str(glibc), on.stderr
    assert off.stdout.strip() == "False", off.stderr
