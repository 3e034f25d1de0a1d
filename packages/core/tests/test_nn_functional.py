"""ember.nn.functional vs torch: linear, convolutions, pooling, padding, embedding, attention,
resampling and misc ops (values and gradients). Norms, losses and dropout: test_nn_losses_norms.py.
"""
import numpy as np
import pytest
from harness import check, check_error, torch

import ember

F32 = ("float32",)
rng = np.random.default_rng(0)


def F(t):
    return t.nn.functional


# ---- linear ----------------------------------------------------------------------------------
def test_linear():
    check(lambda t, x, w, b: F(t).linear(x, w, b), shapes=[(2, 3, 5), (4, 5), (4,)], grad=True)
    check(lambda t, x, w: F(t).linear(x, w), shapes=[(3, 5), (4, 5)], grad=True)


def test_bilinear():
    check(lambda t, a, b, w, bias: F(t).bilinear(a, b, w, bias),
          shapes=[(3, 4), (3, 5), (2, 4, 5), (2,)], grad=True)


# ---- convolution --------------------------------------------------------------------------------
@pytest.mark.parametrize("xs,ws,kw", [
    ((2, 4, 7, 6), (6, 4, 3, 3), {}),
    ((2, 4, 9, 8), (6, 2, 3, 2), dict(groups=2, stride=2, padding=1, dilation=2)),
    ((4, 7, 6), (6, 4, 3, 3), dict(padding=(1, 0))),          # unbatched
    ((2, 4, 9, 8), (4, 4, 4, 3), dict(padding="same")),       # even kernel: extra pad right
    ((2, 4, 9, 8), (4, 4, 3, 3), dict(padding="valid")),
])
def test_conv2d(xs, ws, kw):
    check(lambda t, x, w, b: F(t).conv2d(x, w, b, **kw), shapes=[xs, ws, (ws[0],)], grad=True,
          rtol=1e-4, atol=1e-4)


def test_conv1d_conv3d():
    check(lambda t, x, w, b: F(t).conv1d(x, w, b, stride=2, padding=2, dilation=2),
          shapes=[(2, 3, 11), (4, 3, 3), (4,)], grad=True, rtol=1e-4, atol=1e-4)
    check(lambda t, x, w: F(t).conv1d(x, w, padding="same", groups=3),
          shapes=[(2, 3, 8), (6, 1, 4)], grad=True, rtol=1e-4, atol=1e-4)
    check(lambda t, x, w, b: F(t).conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 0, 1)),
          shapes=[(1, 2, 4, 5, 4), (3, 2, 2, 3, 2), (3,)], grad=True, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,ws,kw", [
    ((2, 4, 5, 6), (4, 3, 3, 3), {}),
    ((2, 4, 5, 6), (4, 3, 3, 2), dict(groups=2, stride=2, padding=1, dilation=2,
                                      output_padding=1)),
    ((4, 5, 6), (4, 2, 2, 2), dict(stride=2)),
])
def test_conv_transpose2d(xs, ws, kw):
    cout = ws[1] * kw.get("groups", 1)
    check(lambda t, x, w, b: F(t).conv_transpose2d(x, w, b, **kw), shapes=[xs, ws, (cout,)],
          grad=True, rtol=1e-4, atol=1e-4)


def test_conv_transpose1d():
    check(lambda t, x, w, b: F(t).conv_transpose1d(x, w, b, stride=3, output_padding=2),
          shapes=[(2, 4, 7), (4, 3, 3), (3,)], grad=True, rtol=1e-4, atol=1e-4)


def test_conv_lowp_and_meta():
    check(lambda t, x, w: F(t).conv2d(x, w, padding=1), shapes=[(1, 2, 5, 5), (3, 2, 3, 3)],
          dtypes=("bfloat16", "float16"))
    x = ember.empty(2, 4, 9, 8, device="meta")
    w = ember.empty(6, 2, 3, 2, device="meta")
    assert tuple(ember.nn.functional.conv2d(x, w, stride=2, groups=2).shape) == (2, 6, 4, 4)


def test_conv_errors():
    check_error(lambda t: F(t).conv2d(t.zeros(2, 3, 8, 8), t.zeros(8, 4, 3, 3)),
                match=r"Given groups=1, weight of size \[8, 4, 3, 3\], expected "
                      r"input\[2, 3, 8, 8\] to have 4 channels, but got 3 channels instead")
    check_error(lambda t: F(t).conv2d(t.zeros(2, 4, 2, 2), t.zeros(8, 4, 3, 3)),
                match="Kernel size can't be greater than actual input size")
    check_error(lambda t: F(t).conv2d(t.zeros(2, 4), t.zeros(8, 4, 3, 3)))
    check_error(lambda t: F(t).conv2d(t.zeros(2, 4, 5, 5), t.zeros(8, 4, 3, 3), stride=2,
                                      padding="same"), match="strided")
    check_error(lambda t: F(t).conv_transpose2d(t.zeros(2, 3, 5, 5), t.zeros(4, 2, 3, 3)),
                match="transposed=1")


def test_unfold_fold():
    check(lambda t, x: F(t).unfold(x, (2, 3), padding=1, stride=2, dilation=(1, 2)),
          shapes=[(2, 3, 8, 8)], grad=True)
    check(lambda t, x: F(t).unfold(x, 3), shapes=[(3, 5, 5)], grad=True)
    check(lambda t, c: F(t).fold(c, (5, 6), 2, stride=(1, 2)), shapes=[(2, 12, 12)], grad=True)


# ---- pooling -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=(2, 3), stride=1, dilation=2),
                                dict(kernel_size=3, stride=2, ceil_mode=True)])
def test_max_pool2d(kw):
    check(lambda t, x: F(t).max_pool2d(x, return_indices=True, **kw), shapes=[(2, 3, 7, 8)],
          grad=True)


def test_max_pool1d_3d():
    check(lambda t, x: F(t).max_pool1d(x, 3, 2, 1, return_indices=True), shapes=[(2, 3, 9)],
          grad=True)
    check(lambda t, x: F(t).max_pool3d(x, 2), shapes=[(1, 2, 4, 5, 4)], grad=True)
    check(lambda t, x: F(t).max_pool2d(x, 2), shapes=[(3, 6, 6)], grad=True)   # unbatched


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1,
                                     count_include_pad=False),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                dict(kernel_size=3, stride=2, ceil_mode=True,
                                     count_include_pad=False),
                                dict(kernel_size=2, divisor_override=3)])
def test_avg_pool2d(kw):
    check(lambda t, x: F(t).avg_pool2d(x, **kw), shapes=[(2, 3, 7, 8)], grad=True)


def test_avg_pool1d():
    check(lambda t, x: F(t).avg_pool1d(x, 3, 2, 1, ceil_mode=True), shapes=[(2, 3, 8)],
          grad=True)


@pytest.mark.parametrize("out", [(3, 4), 1, (5, None), (7, 9)])
def test_adaptive_pools(out):
    check(lambda t, x: F(t).adaptive_avg_pool2d(x, out), shapes=[(2, 3, 7, 8)], grad=True)
    check(lambda t, x: F(t).adaptive_max_pool2d(x, out, return_indices=True),
          shapes=[(2, 3, 7, 8)], grad=True)


def test_adaptive_pool1d():
    check(lambda t, x: F(t).adaptive_avg_pool1d(x, 4), shapes=[(2, 3, 10)], grad=True)
    check(lambda t, x: F(t).adaptive_max_pool1d(x, 3), shapes=[(2, 3, 10)], grad=True)


def test_pool_errors():
    check_error(lambda t: F(t).max_pool2d(t.zeros(1, 1, 4, 4), 3, padding=2),
                match="pad should be at most half")
    check_error(lambda t: F(t).max_pool2d(t.zeros(1, 1, 2, 2), 3), match="too small")


# ---- padding -------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad(mode):
    check(lambda t, x: F(t).pad(x, (1, 2, 2, 1), mode=mode), shapes=[(2, 3, 4, 5)], grad=True)
    check(lambda t, x: F(t).pad(x, (2, 1), mode=mode), shapes=[(2, 3, 4)], grad=True)


def test_pad_constant_value_and_negative():
    check(lambda t, x: F(t).pad(x, (1, -1, 0, 2), value=3.5), shapes=[(3, 4)], grad=True)
    check(lambda t, x: F(t).pad(x, (1, 1, 1, 1, 1, 1)), shapes=[(2, 2, 3)], grad=True)
    check_error(lambda t: F(t).pad(t.zeros(1, 2, 3), (3, 3), mode="reflect"))
    check_error(lambda t: F(t).pad(t.zeros(1, 2, 3), (1, 1, 1)))


# ---- embedding -----------------------------------------------------------------------------------
IDX = np.array([[1, 2, 0, 4], [4, 3, 2, 9]])


def test_embedding():
    check(lambda t, w: F(t).embedding(t.tensor(IDX), w), shapes=[(10, 3)], grad=True)
    check(lambda t, w: F(t).embedding(t.tensor(IDX), w, padding_idx=2), shapes=[(10, 3)],
          grad=True)
    check(lambda t, w: F(t).embedding(t.tensor(IDX), w, padding_idx=-1,
                                      scale_grad_by_freq=True), shapes=[(10, 3)], grad=True)
    check_error(lambda t: F(t).embedding(t.tensor([10]), t.zeros(10, 3)), match="index out of")


def test_embedding_max_norm_renormalizes_in_place():
    w = rng.uniform(-3, 3, (10, 4)).astype("float32")
    ew, tw = ember.tensor(w), torch.tensor(w)
    eo = ember.nn.functional.embedding(ember.tensor(IDX), ew, max_norm=1.0)
    to = torch.nn.functional.embedding(torch.tensor(IDX), tw, max_norm=1.0)
    np.testing.assert_allclose(eo.numpy(), to.numpy(), rtol=1e-5)
    np.testing.assert_allclose(ew.numpy(), tw.numpy(), rtol=1e-5)


def test_one_hot():
    check(lambda t: F(t).one_hot(t.tensor([[0, 3], [2, 1]])), shapes=[])
    check(lambda t: F(t).one_hot(t.tensor([0, 3]), 6), shapes=[])
    check_error(lambda t: F(t).one_hot(t.tensor([5]), 3), match="smaller than num_classes")
    check_error(lambda t: F(t).one_hot(t.tensor([-1]), 3))


# ---- shuffles, glu, attention, distances -----------------------------------------------------
def test_pixel_shuffle():
    check(lambda t, x: F(t).pixel_shuffle(x, 2), shapes=[(2, 8, 3, 4)], grad=True)
    check(lambda t, x: F(t).pixel_unshuffle(x, 2), shapes=[(2, 2, 4, 6)], grad=True)
    check_error(lambda t: F(t).pixel_shuffle(t.zeros(1, 3, 2, 2), 2))


def test_glu():
    check(lambda t, x: F(t).glu(x), shapes=[(3, 6)], grad=True)
    check(lambda t, x: F(t).glu(x, 0), shapes=[(4, 3)], grad=True)
    check_error(lambda t: F(t).glu(t.zeros(3, 5)), match="Halving dimension must be even")


@pytest.mark.parametrize("kw", [{}, dict(is_causal=True), dict(scale=0.3)])
def test_sdpa(kw):
    check(lambda t, q, k, v: F(t).scaled_dot_product_attention(q, k, v, **kw),
          shapes=[(2, 3, 4, 5), (2, 3, 4, 5), (2, 3, 4, 6)], grad=True)


def test_sdpa_masks_and_gqa():
    bmask = rng.random((4, 6)) > 0.3
    bmask[:, 0] = True
    check(lambda t, q, k, v: F(t).scaled_dot_product_attention(q, k, v, t.tensor(bmask)),
          shapes=[(2, 4, 5), (2, 6, 5), (2, 6, 5)], grad=True)
    check(lambda t, q, k, v, m: F(t).scaled_dot_product_attention(q, k, v, attn_mask=m),
          shapes=[(2, 4, 5), (2, 6, 5), (2, 6, 5), (4, 6)], grad=True)
    check(lambda t, q, k, v: F(t).scaled_dot_product_attention(q, k, v, enable_gqa=True),
          shapes=[(1, 4, 3, 5), (1, 2, 3, 5), (1, 2, 3, 5)], grad=True)


def test_normalize_and_distances():
    check(lambda t, x: F(t).normalize(x), shapes=[(3, 4)], grad=True)
    check(lambda t, x: F(t).normalize(x, p=1.0, dim=0), shapes=[(3, 4)], grad=True)
    check(lambda t, a, b: F(t).cosine_similarity(a, b), shapes=[(3, 4), (3, 4)], grad=True)
    check(lambda t, a, b: F(t).cosine_similarity(a, b, dim=-1), shapes=[(2, 3, 4), (3, 4)],
          grad=True)
    check(lambda t, a, b: F(t).pairwise_distance(a, b), shapes=[(3, 4), (3, 4)], grad=True)
    check(lambda t, a, b: F(t).pairwise_distance(a, b, p=1.0, keepdim=True),
          shapes=[(3, 4), (3, 4)], grad=True)


# ---- resampling ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [
    dict(scale_factor=2), dict(size=(5, 7)), dict(size=(3, 3)),
    dict(size=(5, 7), mode="nearest-exact"),
    dict(scale_factor=2, mode="bilinear"), dict(size=(5, 7), mode="bilinear"),
    dict(size=(5, 7), mode="bilinear", align_corners=True),
    dict(scale_factor=1.7, mode="bilinear"),
    dict(size=(5, 7), mode="bicubic"), dict(size=(6, 3), mode="bicubic", align_corners=True),
    dict(size=(2, 3), mode="area"),
])
def test_interpolate_2d(kw):
    check(lambda t, x: F(t).interpolate(x, **kw), shapes=[(2, 3, 4, 5)], grad=True,
          rtol=1e-5, atol=1e-5)


def test_interpolate_1d_3d():
    check(lambda t, x: F(t).interpolate(x, size=7, mode="linear"), shapes=[(2, 3, 4)], grad=True)
    check(lambda t, x: F(t).interpolate(x, scale_factor=2, mode="trilinear"),
          shapes=[(1, 2, 2, 3, 2)], grad=True)
    check(lambda t, x: F(t).interpolate(x, scale_factor=3), shapes=[(1, 2, 2, 3, 2)], grad=True)
    check_error(lambda t: F(t).interpolate(t.zeros(1, 2, 3), size=4, mode="bilinear"))
    check_error(lambda t: F(t).interpolate(t.zeros(1, 2, 3), size=4, align_corners=True))


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample(mode, padding_mode, align_corners):
    check(lambda t, x, g: F(t).grid_sample(x, g, mode=mode, padding_mode=padding_mode,
                                           align_corners=align_corners),
          shapes=[(2, 3, 4, 5), (2, 3, 6, 2)], low=-1.2, high=1.2, grad=True, rtol=1e-5,
          atol=1e-5)


@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid(align_corners):
    check(lambda t, th: F(t).affine_grid(th, (2, 3, 4, 5), align_corners=align_corners),
          shapes=[(2, 2, 3)], grad=True)
    check(lambda t, th: F(t).affine_grid(th, (1, 1, 2, 3, 4), align_corners=align_corners),
          shapes=[(1, 3, 4)], grad=True)


BAG_IDX = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0, 0])
BAG_OFF = np.array([0, 3, 3, 7])      # bag 1 is empty


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(mode):
    check(lambda t, w: F(t).embedding_bag(t.tensor(BAG_IDX), w, t.tensor(BAG_OFF), mode=mode),
          shapes=[(10, 3)], grad=True)
    check(lambda t, w: F(t).embedding_bag(t.tensor(IDX), w, mode=mode, padding_idx=2),
          shapes=[(10, 3)], grad=True)
    check(lambda t, w: F(t).embedding_bag(t.tensor(BAG_IDX), w, t.tensor([0, 3, 3, 7, 10]),
                                          mode=mode, include_last_offset=True),
          shapes=[(10, 3)], grad=True)


def test_embedding_bag_per_sample_weights():
    check(lambda t, w, p: F(t).embedding_bag(t.tensor(BAG_IDX), w, t.tensor(BAG_OFF),
                                             mode="sum", per_sample_weights=p),
          shapes=[(10, 3), (10,)], grad=True)
    check_error(lambda t: F(t).embedding_bag(t.tensor(IDX), t.zeros(10, 3),
                                             t.tensor([0, 1])), match="offsets has to be None")


@pytest.mark.parametrize("need_weights", [True, False])
def test_multi_head_attention_forward(need_weights):
    kpm = np.array([[False, False, True, False, False], [False, True, False, False, False]])
    causal = np.triu(np.ones((3, 5), bool), 1)

    def mha(t, q, k, v, w, b, ow, ob):
        return F(t).multi_head_attention_forward(
            q, k, v, 4, 2, w, b, None, None, False, 0.0, ow, ob, training=False,
            key_padding_mask=t.tensor(kpm), need_weights=need_weights,
            attn_mask=t.tensor(causal))
    check(mha, shapes=[(3, 2, 4), (5, 2, 4), (5, 2, 4), (12, 4), (12,), (4, 4), (4,)],
          low=-1, high=1, grad=True, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("transposed", [False, True])
def test_conv_double_backward(transposed):
    x = rng.uniform(-1, 1, (2, 4, 6, 5))
    w = rng.uniform(-1, 1, (4, 2, 3, 2))
    b = rng.uniform(-1, 1, (2 * 2 if transposed else 4,))

    def run(t):
        X, W, B = (t.tensor(a, requires_grad=True) for a in (x, w, b))
        f = F(t).conv_transpose2d if transposed else F(t).conv2d
        y = f(X, W, B, stride=2, padding=1, groups=2)
        gx, gw, gb = t.autograd.grad((y * y).sum(), (X, W, B), create_graph=True)
        return t.autograd.grad((gx * gx).sum() + (gw ** 3).sum() + (gb * gb).sum(), (X, W, B))
    for a, b_ in zip(run(ember), run(torch)):
        np.testing.assert_allclose(a.numpy(), b_.numpy(), rtol=1e-7, atol=1e-9)
