"""ember.nn.functional vs torch: normalization, losses, dropout and activation wrappers."""
import numpy as np
import pytest
from harness import check, check_error

import ember

rng = np.random.default_rng(0)


def F(t):
    return t.nn.functional


# ---- normalization -------------------------------------------------------------------------------
def test_layer_norm():
    check(lambda t, x, w, b: F(t).layer_norm(x, (4,), w, b), shapes=[(2, 3, 4), (4,), (4,)],
          grad=True)
    check(lambda t, x: F(t).layer_norm(x, [3, 4], eps=1e-3), shapes=[(2, 3, 4)], grad=True)
    check(lambda t, x, w: F(t).layer_norm(x, (4,), w), shapes=[(3, 4), (4,)], grad=True,
          dtypes=("float32", "bfloat16"))
    check_error(lambda t: F(t).layer_norm(t.zeros(2, 3), (4,)))


def test_group_norm():
    check(lambda t, x, w, b: F(t).group_norm(x, 2, w, b), shapes=[(2, 4, 3, 2), (4,), (4,)],
          grad=True)
    check(lambda t, x: F(t).group_norm(x, 3), shapes=[(2, 6, 5)], grad=True)
    check_error(lambda t: F(t).group_norm(t.zeros(2, 5, 3), 2))


def _bn_case(t, x, w, b, training, shape_c):
    rm = t.tensor(np.linspace(-1, 1, shape_c), dtype=x.dtype)
    rv = t.tensor(np.linspace(0.5, 2, shape_c), dtype=x.dtype)
    y = F(t).batch_norm(x, rm, rv, w, b, training=training, momentum=0.3)
    return y, rm, rv


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm(training):
    check(lambda t, x, w, b: _bn_case(t, x, w, b, training, 3), shapes=[(4, 3, 2, 2), (3,), (3,)],
          grad=True)
    check(lambda t, x: _bn_case(t, x, None, None, training, 3)[0], shapes=[(5, 3)], grad=True)


def test_batch_norm_no_running_stats_and_errors():
    check(lambda t, x: F(t).batch_norm(x, None, None, training=True), shapes=[(4, 3, 5)],
          grad=True)
    check_error(lambda t: F(t).batch_norm(t.zeros(1, 3), t.zeros(3), t.ones(3), training=True))
    check_error(lambda t: F(t).batch_norm(t.zeros(2, 3), t.zeros(4), t.ones(4)))


def test_instance_norm():
    check(lambda t, x, w, b: F(t).instance_norm(x, weight=w, bias=b), shapes=[(2, 3, 4, 5), (3,),
                                                                               (3,)], grad=True)

    def with_stats(t, x):
        rm, rv = t.zeros(3, dtype=x.dtype), t.ones(3, dtype=x.dtype)
        return F(t).instance_norm(x, rm, rv, momentum=0.2), rm, rv
    check(with_stats, shapes=[(2, 3, 6)], grad=True)


def test_rms_norm_and_lrn():
    check(lambda t, x, w: F(t).rms_norm(x, (4,), w), shapes=[(2, 3, 4), (4,)], grad=True)
    check(lambda t, x: F(t).rms_norm(x, [3, 4], eps=1e-3), shapes=[(2, 3, 4)], grad=True)
    check(lambda t, x: F(t).local_response_norm(x, 3), shapes=[(2, 5, 4, 3)], grad=True)
    check(lambda t, x: F(t).local_response_norm(x, 2, k=2.0), shapes=[(2, 5, 4)], grad=True)


# ---- losses --------------------------------------------------------------------------------------
TGT = np.array([1, 0, 4])
TGT_K = np.array([[[1, 0], [2, 2], [0, 1]], [[2, 1], [-100, 0], [1, 1]]])      # (2, 3, 2)
W3 = np.array([0.5, 2.0, 1.25])     # class weights (torch gives them no gradient)


def cw(t, like, w=W3):
    return t.tensor(w, dtype=like.dtype)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_and_cross_entropy(reduction):
    check(lambda t, x: F(t).nll_loss(x, t.tensor(TGT), reduction=reduction), shapes=[(3, 5)],
          grad=True)
    check(lambda t, x: F(t).cross_entropy(x, t.tensor(TGT), reduction=reduction),
          shapes=[(3, 5)], grad=True)
    check(lambda t, x: F(t).cross_entropy(x, t.tensor(TGT_K), cw(t, x), reduction=reduction),
          shapes=[(2, 3, 3, 2)], grad=True)
    check(lambda t, x: F(t).nll_loss(x, t.tensor(TGT_K), cw(t, x), reduction=reduction),
          shapes=[(2, 3, 3, 2)], grad=True)
    check(lambda t, x: F(t).cross_entropy(x, t.tensor(TGT), reduction=reduction,
                                          label_smoothing=0.2, ignore_index=0), shapes=[(3, 5)],
          grad=True)
    check(lambda t, x: F(t).cross_entropy(x, t.tensor(TGT_K), cw(t, x), reduction=reduction,
                                          label_smoothing=0.1), shapes=[(2, 3, 3, 2)], grad=True)


def test_cross_entropy_probabilities():
    check(lambda t, x, p: F(t).cross_entropy(x, p.softmax(1)), shapes=[(3, 5), (3, 5)],
          grad=True)
    check(lambda t, x, p: F(t).cross_entropy(x, p.softmax(1), cw(t, x, W3.tolist() + [0.7]),
                                             label_smoothing=0.3, reduction="sum"),
          shapes=[(2, 4, 3), (2, 4, 3)], grad=True)
    check(lambda t, x: F(t).cross_entropy(x, t.tensor(2)), shapes=[(5,)], grad=True)


def test_loss_errors():
    check_error(lambda t: F(t).cross_entropy(t.zeros(3, 5), t.tensor([1, 5, 2])),
                match=r"Target 5 is out of bounds\.")
    check_error(lambda t: F(t).cross_entropy(t.zeros(3, 5), t.tensor([1, 2])),
                match=r"Expected input batch_size \(3\) to match target batch_size \(2\)")
    check_error(lambda t: F(t).mse_loss(t.zeros(3), t.zeros(3), reduction="avg"))
    check_error(lambda t: F(t).binary_cross_entropy(t.tensor([1.5]), t.tensor([1.0])))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_pointwise_losses(reduction):
    r = reduction
    check(lambda t, x, y: F(t).mse_loss(x, y, reduction=r), shapes=[(3, 4), (3, 4)], grad=True)
    check(lambda t, x, y: F(t).l1_loss(x, y, reduction=r), shapes=[(3, 4), (3, 4)], grad=True)
    check(lambda t, x, y: F(t).smooth_l1_loss(x, y, reduction=r, beta=0.5),
          shapes=[(3, 4), (3, 4)], grad=True)
    check(lambda t, x, y: F(t).huber_loss(x, y, reduction=r, delta=1.5),
          shapes=[(3, 4), (3, 4)], grad=True)
    check(lambda t, x, y: F(t).binary_cross_entropy(x, y, cw(t, x, [0.5, 1, 2, 3]), reduction=r),
          shapes=[(3, 4), (3, 4)], low=0.05, high=0.95, grad=True)
    check(lambda t, x, y: F(t).binary_cross_entropy_with_logits(
        x, y, cw(t, x, [0.5, 1, 2, 3]), reduction=r, pos_weight=cw(t, x, [2, 0.5, 1, 3])),
        shapes=[(3, 4), (3, 4)], low=0.0, grad=True)
    check(lambda t, x, y: F(t).binary_cross_entropy_with_logits(x, y, reduction=r),
          shapes=[(3, 4), (3, 4)], low=0.0, grad=True)
    check(lambda t, x, y: F(t).soft_margin_loss(x, y.detach().sign(), reduction=r),
          shapes=[(3, 4), (3, 4)], grad=True)
    check(lambda t, x, y: F(t).poisson_nll_loss(x, y, reduction=r), shapes=[(3, 4), (3, 4)],
          low=0.1, grad=True)
    check(lambda t, x, y: F(t).poisson_nll_loss(x, y * 2, log_input=False, full=True,
                                                reduction=r),
          shapes=[(3, 4), (3, 4)], low=0.1, grad=True)
    check(lambda t, x, y, v: F(t).gaussian_nll_loss(x, y, v, reduction=r),
          shapes=[(3, 4), (3, 4), (3, 4)], low=0.1, grad=True)
    check(lambda t, x, y: F(t).multilabel_soft_margin_loss(x, (y > 0).to(x.dtype), reduction=r),
          shapes=[(3, 4), (3, 4)], grad=True)


def test_bce_clamps_log():
    check(lambda t: F(t).binary_cross_entropy(t.tensor([0.0, 1.0, 0.5]), t.tensor([1.0, 0.0, 1.0]),
                                              reduction="none"), shapes=[])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_kl_div(reduction):
    check(lambda t, x, y: F(t).kl_div(x.log_softmax(1), y.softmax(1), reduction=reduction),
          shapes=[(3, 4), (3, 4)], grad=True)
    check(lambda t, x, y: F(t).kl_div(x, y, reduction="batchmean", log_target=True),
          shapes=[(3, 4), (3, 4)], grad=True)


def test_kl_div_zero_target():
    check(lambda t, x: F(t).kl_div(x, t.tensor([[0.0, 0.5, 0.5]], dtype=x.dtype),
                                   reduction="sum"), shapes=[(1, 3)], grad=True)


def test_margin_losses():
    y = np.array([1.0, -1.0, 1.0])
    check(lambda t, a, b: F(t).cosine_embedding_loss(a, b, t.tensor(y, dtype=a.dtype), 0.2),
          shapes=[(3, 4), (3, 4)], grad=True)
    check(lambda t, a, b: F(t).margin_ranking_loss(a, b, t.tensor(y, dtype=a.dtype), 0.5,
                                                   reduction="none"),
          shapes=[(3,), (3,)], grad=True)
    check(lambda t, x: F(t).hinge_embedding_loss(x, t.tensor([[1.0, -1.0, -1.0]] * 2,
                                                             dtype=x.dtype)),
          shapes=[(2, 3)], grad=True)
    check(lambda t, a, p, n: F(t).triplet_margin_loss(a, p, n, swap=True),
          shapes=[(3, 4), (3, 4), (3, 4)], grad=True)


# ---- dropout -------------------------------------------------------------------------------------
def test_dropout_eval_identity_and_p_checks():
    x = ember.randn(2, 4, 5, 3)
    for fn in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
               "feature_alpha_dropout"):
        f = getattr(ember.nn.functional, fn)
        xi = x[0] if fn == "dropout1d" else x
        y = f(xi, 0.5, training=False)
        assert np.array_equal(y.numpy(), xi.numpy()), fn
    check_error(lambda t: F(t).dropout(t.ones(3), 1.5), match="between 0 and 1")


def test_dropout_mask_and_scale():
    ember.manual_seed(0)
    x = ember.ones(200, 100)
    y = ember.nn.functional.dropout(x, 0.3)
    v = y.numpy()
    assert np.all((v == 0) | np.isclose(v, 1 / 0.7))
    assert abs((v == 0).mean() - 0.3) < 0.02
    z = ember.nn.functional.dropout(x, 1.0)
    assert not z.numpy().any()


def test_dropout_gradient_is_mask_times_scale():
    x = ember.ones(50, 40, requires_grad=True)
    y = ember.nn.functional.dropout(x, 0.5)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.detach().numpy())


def test_feature_dropout_zeroes_whole_channels():
    x = ember.ones(8, 16, 5, 5)
    v = ember.nn.functional.dropout2d(x, 0.5).numpy()
    per_channel = v.reshape(8, 16, -1)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1))
    assert 0.3 < (per_channel == 0).all(-1).mean() < 0.7
    v1 = ember.nn.functional.dropout1d(ember.ones(16, 30), 0.5).numpy()    # unbatched (C, L)
    assert np.all((v1 == 0).all(-1) | (v1 == 2.0).all(-1))


def test_alpha_dropout_keeps_statistics():
    ember.manual_seed(1)
    x = ember.randn(400, 250)
    y = ember.nn.functional.alpha_dropout(x, 0.2, training=True).numpy()
    assert abs(y.mean()) < 0.05 and abs(y.std() - 1) < 0.05
    y = ember.nn.functional.feature_alpha_dropout(ember.randn(64, 32, 20), 0.2, True).numpy()
    assert abs(y.mean()) < 0.08 and abs(y.std() - 1) < 0.08


def test_dropout_inplace():
    x = ember.ones(10, 10)
    y = ember.nn.functional.dropout(x, 0.5, inplace=True)
    assert y is x and set(np.unique(x.numpy())) <= {0.0, 2.0}


# ---- activation wrappers -------------------------------------------------------------------------
def test_activation_wrappers():
    check(lambda t, x: F(t).relu(x), grad=True)
    check(lambda t, x: F(t).gelu(x, approximate="tanh"), grad=True)
    check(lambda t, x: F(t).silu(x), grad=True)
    check(lambda t, x: F(t).softmax(x, dim=0), grad=True)
    check(lambda t, x: F(t).log_softmax(x, 1), grad=True)
    check(lambda t, x: F(t).softmin(x, 1), grad=True)
    x = ember.tensor([-1.0, 2.0])
    assert ember.nn.functional.relu(x, inplace=True) is x and x.tolist() == [0.0, 2.0]


@pytest.mark.parametrize("which", ["layer", "group", "batch", "batch_eval"])
def test_norm_double_backward(which):
    from harness import torch  # skips here when torch is not installed
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (4, 6, 3))
    w = rng.uniform(0.5, 1.5, (6,) if which != "layer" else (3,))
    b = rng.uniform(-1, 1, w.shape)

    def run(t):
        X, W, B = (t.tensor(a, requires_grad=True) for a in (x, w, b))
        if which == "layer":
            y = F(t).layer_norm(X, (3,), W, B)
        elif which == "group":
            y = F(t).group_norm(X, 3, W, B)
        else:
            rm, rv = t.zeros(6, dtype=t.float64), t.ones(6, dtype=t.float64) * 1.5
            y = F(t).batch_norm(X, rm, rv, W, B, training=which == "batch")
        gx, gw, gb = t.autograd.grad((y * y * y).sum(), (X, W, B), create_graph=True)
        return t.autograd.grad((gx * gx).sum() + (gw * gx.sum()).sum() + (gb ** 2).sum(),
                               (X, W, B), allow_unused=True)
    for a, b_ in zip(run(ember), run(torch)):
        np.testing.assert_allclose(a.numpy(), b_.numpy(), rtol=1e-6, atol=1e-8)
