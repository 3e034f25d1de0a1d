"""ember.nn modules that no other test named, vs torch.nn: RReLU (eval and sampled train slopes),
LPPool, MaxUnpool, the margin/CTC/triplet-with-distance losses, and the remaining pads, pools,
norms and containers. Same constructor in both, torch's weights copied, forward, gradients, repr."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from harness import check_error, compare
from test_nn_layers import run

import ember

torch = pytest.importorskip("torch")


# ---- RReLU ---------------------------------------------------------------------------------
RRELU_X = np.array([[-2.0, -0.5, 0.0, 0.5], [1.5, -1e-3, 3.0, -4.0]])


@pytest.mark.parametrize("args", [(), (0.1, 0.3), (0.2, 0.2)])
def test_rrelu_eval_is_leaky_relu_with_mean_slope(args):
    em, tm = ember.nn.RReLU(*args).eval(), torch.nn.RReLU(*args).eval()
    assert repr(em) == repr(tm)
    for dtype in ("float32", "float64"):
        ex = ember.tensor(RRELU_X, dtype=getattr(ember, dtype), requires_grad=True)
        tx = torch.tensor(RRELU_X, dtype=getattr(torch, dtype), requires_grad=True)
        eo, to = em(ex), tm(tx)
        compare(eo, to, dtype)
        w = np.random.default_rng(1).uniform(-1, 1, RRELU_X.shape)
        (eo * ember.tensor(w, dtype=eo.dtype)).sum().backward()
        (to * torch.tensor(w, dtype=to.dtype)).sum().backward()
        compare(ex.grad, tx.grad, dtype, path="grad")  # includes x == 0 (slope side in torch)
    for dtype in ("float16", "bfloat16"):
        out = em(ember.tensor(RRELU_X).to(getattr(ember, dtype)))
        compare(out, tm(torch.tensor(RRELU_X).to(getattr(torch, dtype))), dtype)
    lower, upper = args or (1 / 8, 1 / 3)
    np.testing.assert_allclose(em(ember.tensor([-2.0])).numpy(), [-2.0 * (lower + upper) / 2],
                               rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rrelu_train_samples_slopes_and_gradient_uses_them(dtype):
    lower, upper = 0.1, 0.4
    m = ember.nn.RReLU(lower, upper)
    assert m.training
    x = ember.randn(60, 50, dtype=getattr(ember, dtype)).requires_grad_(True)
    y = m(x)
    assert y.dtype == x.dtype and tuple(y.shape) == (60, 50)
    xn, yn = x.detach().numpy(), y.detach().numpy()
    neg = xn < 0
    assert np.array_equal(yn[~neg], xn[~neg])
    slope = yn[neg] / xn[neg]
    assert slope.min() >= lower - 1e-6 and slope.max() <= upper + 1e-6
    assert slope.std() > 0.05  # sampled per element, not one slope
    y.backward(ember.ones_like(y))
    g = x.grad.numpy()
    np.testing.assert_allclose(g[neg], slope, rtol=1e-5)
    assert np.all(g[~neg] == 1)
    # a second call draws new slopes
    assert not np.array_equal(m(x).detach().numpy(), yn)
    z = ember.zeros(200, dtype=x.dtype, requires_grad=True)
    m(z).sum().backward()  # x == 0 lies on the slope side, as in torch
    assert z.grad.numpy().min() >= lower - 1e-6 and z.grad.numpy().max() <= upper + 1e-6


def test_rrelu_inplace_and_functional_module_agree():
    em, tm = ember.nn.RReLU(0.1, 0.3, inplace=True), torch.nn.RReLU(0.1, 0.3, inplace=True)
    assert repr(em) == repr(tm)
    ex = ember.tensor(RRELU_X)
    out = em.eval()(ex)
    tx = torch.tensor(RRELU_X)
    tm.eval()(tx)
    assert out is ex
    compare(ex, tx, "float64")
    ex = ember.tensor(RRELU_X)
    em.train()(ex)
    xn = ex.numpy()
    assert np.all(xn[RRELU_X >= 0] == RRELU_X[RRELU_X >= 0])
    s = xn[RRELU_X < 0] / RRELU_X[RRELU_X < 0]
    assert s.min() >= 0.1 - 1e-9 and s.max() <= 0.3 + 1e-9


# ---- pools ---------------------------------------------------------------------------------
POOLS = {
    "LPPool1d": (lambda t: t.nn.LPPool1d(2, 3), [(2, 3, 9)]),
    "LPPool1d-stride-ceil": (lambda t: t.nn.LPPool1d(3.0, 3, stride=2, ceil_mode=True),
                             [(2, 2, 8)]),
    "LPPool2d": (lambda t: t.nn.LPPool2d(2, 2), [(2, 3, 4, 6)]),
    "LPPool2d-rect": (lambda t: t.nn.LPPool2d(1.5, (2, 3), stride=(1, 2)), [(1, 2, 5, 7)]),
    "LPPool2d-unbatched": (lambda t: t.nn.LPPool2d(2, 2, ceil_mode=True), [(2, 5, 5)]),
    "LPPool3d": (lambda t: t.nn.LPPool3d(2, 2), [(1, 2, 4, 4, 4)]),
    "LPPool3d-stride": (lambda t: t.nn.LPPool3d(3, (2, 1, 2), stride=1), [(1, 1, 3, 3, 4)]),
    "AdaptiveMaxPool3d": (lambda t: t.nn.AdaptiveMaxPool3d((2, 3, None)), [(1, 2, 4, 5, 3)]),
    "AdaptiveMaxPool3d-indices": (lambda t: t.nn.AdaptiveMaxPool3d(2, return_indices=True),
                                  [(2, 3, 5, 4)]),
}


F32 = dict(dtype="float32", rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(POOLS))
def test_pool(name, dtype):
    ctor, specs = POOLS[name]
    # LPPool's gradient at an all-zero window is nan in torch; random normals never give one
    run(ctor, specs, **(F32 if dtype == "float32" else {}))


def _pool_indices(dim, shape, kernel, stride=None, padding=0, seed=0):
    """A max pool's values and indices, from torch, as numpy arrays."""
    x = torch.tensor(np.random.default_rng(seed).standard_normal(shape))
    pool = getattr(torch.nn.functional, f"max_pool{dim}d")
    out, idx = pool(x, kernel, stride, padding, return_indices=True)
    return out.numpy(), idx.numpy()


UNPOOLS = {
    "MaxUnpool1d": (1, lambda t: t.nn.MaxUnpool1d(2), (2, 3, 8), (2,)),
    "MaxUnpool1d-stride-pad": (1, lambda t: t.nn.MaxUnpool1d(3, 2, 1), (2, 2, 9), (3, 2, 1)),
    "MaxUnpool2d": (2, lambda t: t.nn.MaxUnpool2d(2), (1, 3, 4, 6), (2,)),
    "MaxUnpool2d-rect": (2, lambda t: t.nn.MaxUnpool2d((2, 3), stride=(2, 1), padding=(1, 0)),
                         (2, 2, 4, 6), ((2, 3), (2, 1), (1, 0))),
    "MaxUnpool2d-unbatched": (2, lambda t: t.nn.MaxUnpool2d(2, 2), (3, 4, 4), (2, 2)),
    "MaxUnpool3d": (3, lambda t: t.nn.MaxUnpool3d(2), (1, 2, 4, 4, 6), (2,)),
    "MaxUnpool3d-stride": (3, lambda t: t.nn.MaxUnpool3d(2, stride=1), (1, 1, 3, 3, 3), (2, 1)),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(UNPOOLS))
def test_max_unpool(name, dtype):
    dim, ctor, shape, pool_args = UNPOOLS[name]
    out, idx = _pool_indices(dim, shape, *pool_args)
    run(ctor, [out, idx], **(F32 if dtype == "float32" else {}))


@pytest.mark.parametrize("dim", [1, 2, 3])
def test_max_unpool_output_size_and_round_trip(dim):
    shape = {1: (2, 3, 7), 2: (1, 2, 5, 7), 3: (1, 1, 3, 5, 5)}[dim]
    out, idx = _pool_indices(dim, shape, 2)
    em, tm = (getattr(t.nn, f"MaxUnpool{dim}d")(2) for t in (ember, torch))
    for size in (shape, shape[-dim:]):  # full size or spatial only
        compare(em(ember.tensor(out), ember.tensor(idx), output_size=size),
                tm(torch.tensor(out), torch.tensor(idx), output_size=size), "float64")
    for bad in (tuple(s + 3 for s in shape), shape[-dim - 1:], (4,) * dim):
        check_error(lambda t: getattr(t.nn, f"MaxUnpool{dim}d")(2)(  # noqa: B023
            t.tensor(out), t.tensor(idx), output_size=bad), match="output_size")  # noqa: B023


# ---- losses --------------------------------------------------------------------------------
MT = np.array([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 2, 3]])  # multilabel targets, -1 ends a row
LOSSES = {
    "MultiMarginLoss": (lambda t: t.nn.MultiMarginLoss(), [(3, 4), np.array([0, 3, 1])]),
    "MultiMarginLoss-p2-weight": (
        lambda t: t.nn.MultiMarginLoss(p=2, margin=0.5, weight=t.tensor([1.0, 2.0, 0.5, 1.5]),
                                       reduction="sum"), [(3, 4), np.array([0, 3, 1])]),
    "MultiMarginLoss-none-1d": (lambda t: t.nn.MultiMarginLoss(reduction="none"),
                                [(5,), np.array(2)]),
    "MultiLabelMarginLoss": (lambda t: t.nn.MultiLabelMarginLoss(), [(3, 4), MT]),
    "MultiLabelMarginLoss-none": (lambda t: t.nn.MultiLabelMarginLoss(reduction="none"),
                                  [(3, 4), MT]),
    "MultiLabelMarginLoss-1d": (lambda t: t.nn.MultiLabelMarginLoss(reduction="sum"),
                                [(4,), np.array([2, 0, -1, 3])]),
    "TripletMarginWithDistanceLoss": (lambda t: t.nn.TripletMarginWithDistanceLoss(),
                                      [(3, 4)] * 3),
    "TripletMarginWithDistanceLoss-fn-swap": (
        lambda t: t.nn.TripletMarginWithDistanceLoss(
            distance_function=lambda u, v: (u - v).abs().sum(-1), margin=2.0, swap=True,
            reduction="none"), [(3, 4)] * 3),
    "TripletMarginWithDistanceLoss-cos": (
        lambda t: t.nn.TripletMarginWithDistanceLoss(
            distance_function=t.nn.CosineSimilarity(), reduction="sum"), [(3, 4)] * 3),
    "NLLLoss2d": (lambda t: t.nn.NLLLoss2d(), [(2, 3, 2, 2), ("int", (2, 2, 2), 3)]),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss(name, dtype):
    ctor, specs = LOSSES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NLLLoss2d is deprecated in both
        run(ctor, specs, grad_args=range(3 if "Triplet" in name else 1),
            **(F32 if dtype == "float32" else {}))


@pytest.mark.parametrize("ctor", [
    lambda t: t.nn.MultiMarginLoss(p=3),
    lambda t: t.nn.TripletMarginWithDistanceLoss(margin=0.0),
    lambda t: t.nn.TripletMarginWithDistanceLoss(margin=-1.0)(*[t.zeros(2, 3)] * 3),
    lambda t: t.nn.MultiMarginLoss()(t.zeros(2, 3), t.tensor([0, 3])),
    lambda t: t.nn.MultiMarginLoss()(t.zeros(2, 3), t.tensor([0, 1, 1])),
    lambda t: t.nn.MultiMarginLoss()(t.zeros(2, 3), t.tensor([[0], [1]])),
    lambda t: t.nn.MultiMarginLoss(weight=t.ones(2))(t.zeros(2, 3), t.tensor([0, 1])),
    lambda t: t.nn.functional.multi_margin_loss(t.zeros(2, 3), t.tensor([0, 1]),
                                                weight=t.ones(1, 3)),
    lambda t: t.nn.MultiMarginLoss()(t.zeros(2, 3, 1), t.tensor([0, 1])),
    lambda t: t.nn.MultiLabelMarginLoss()(t.zeros(2, 3), t.tensor([0, 1])),
    lambda t: t.nn.MultiLabelMarginLoss()(t.zeros(3), t.tensor([[0, 1, 2]])),
    lambda t: t.nn.MultiLabelMarginLoss()(t.zeros(2, 3), t.tensor([[0, -2, 1], [0, 1, 2]])),
    lambda t: t.nn.MultiLabelMarginLoss()(t.zeros(2, 3), t.tensor([[3, -1, 1], [0, 1, 2]])),
    lambda t: t.nn.MultiLabelMarginLoss()(t.zeros(2, 3, 1), t.zeros(2, 3, 1, dtype=t.long)),
    lambda t: t.nn.CTCLoss(reduction="avg")(t.zeros(3, 1, 2), t.tensor([[1]]), [3], [1]),
    lambda t: t.nn.RReLU(0.5, 0.1)(t.zeros(3)),
    lambda t: t.nn.RReLU(0.5, 0.1).eval()(t.zeros(3)),
    lambda t: t.nn.MaxUnpool2d(2)(t.zeros(1, 1, 2, 2), t.zeros(1, 1, 2, 2)),
    lambda t: t.nn.MaxUnpool1d(2)(t.zeros(1, 1, 2), t.tensor([[[0, 9]]])),
])
def test_constructor_and_input_errors(ctor):
    check_error(ctor)


def _ctc_call(lp_shape, targets, il, tl, blank=0):
    return lambda t: t.nn.CTCLoss(blank=blank)(t.zeros(lp_shape), t.tensor(targets), il, tl)


@pytest.mark.parametrize("call", [
    _ctc_call((3, 2, 4), [[1], [2]], [3], [1, 1]),            # input_lengths not of size N
    _ctc_call((3, 2, 4), [[1], [2]], [3, 3], [1]),            # target_lengths not of size N
    _ctc_call((3, 2, 4), [[1], [2]], [3, 5], [1, 1]),         # input length > T
    _ctc_call((3, 2, 4), [[1], [2]], [3, -1], [1, 1]),
    _ctc_call((3, 2, 4), [[1], [2]], [3, 3], [1, -1]),
    _ctc_call((3, 2, 4), [[1, 2], [2, 1]], [3, 3], [1, 3]),   # padded targets too short
    _ctc_call((3, 2, 4), [[1], [2], [3]], [3, 3], [1, 1]),    # more rows than samples
    _ctc_call((3, 2, 4), [1, 2, 3], [3, 3], [2, 2]),          # concatenated: not sum(tl) long
    _ctc_call((3, 4), [1, 2], [3], [3]),                      # unbatched, concatenated
    _ctc_call((3, 2, 4), [[1], [2]], [3, 3], [1, 1], blank=4),
    _ctc_call((3, 2, 4), [[1], [2]], [3, 3], [1, 1], blank=-1),
])
def test_ctc_loss_errors(call):
    with pytest.raises(RuntimeError) as te:
        call(torch)
    with pytest.raises(RuntimeError) as ee:
        call(ember)
    assert str(ee.value) == str(te.value)  # the same check fires, with torch's message


def test_multi_margin_loss_edge_shapes():
    """Unbatched 'none' takes the target's shape (0-d or (1,)); 0-d input; an empty batch."""
    for x, tg in (((), 0), ((), [0]), ((3,), [2]), ((3,), 1), ((0, 3), np.zeros(0, "int64"))):
        xa = np.random.default_rng(0).standard_normal(x)
        outs = [t.nn.MultiMarginLoss(reduction="none")(t.tensor(xa), t.tensor(tg))
                for t in (ember, torch)]
        compare(outs[0], outs[1], "float64")


def test_multilabel_margin_loss_edge_shapes():
    """0-d input (one class), repeated targets, an empty batch: values as torch's."""
    for x, tg in (((), [0]), ((3,), [1, 1, 1]), ((0, 3), np.zeros((0, 3), "int64"))):
        xa = np.random.default_rng(0).standard_normal(x)
        outs = [t.nn.MultiLabelMarginLoss(reduction="none")(t.tensor(xa), t.tensor(tg))
                for t in (ember, torch)]
        compare(outs[0], outs[1], "float64")


def _log_probs(T, N, C, seed=0):
    x = np.random.default_rng(seed).standard_normal((T, N, C))
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


CTC_T, CTC_N, CTC_C = 6, 3, 5
CTC = {
    "mean": (dict(), np.array([[1, 2, 2], [3, 1, 0], [4, 0, 0]]), [6, 5, 4], [3, 2, 1]),
    "sum-blank": (dict(blank=4, reduction="sum"), np.array([[1, 2, 2], [3, 1, 0], [0, 0, 0]]),
                  [6, 6, 3], [3, 2, 1]),
    "none-flat": (dict(reduction="none"), np.array([1, 2, 2, 3, 1, 4]), [6, 5, 4], [3, 2, 1]),
    "impossible-zero-inf": (dict(zero_infinity=True), np.array([[1, 1, 1], [2, 3, 2],
                                                                 [1, 0, 0]]),
                            [4, 2, 3], [3, 3, 1]),
    "impossible-inf": (dict(reduction="sum"), np.array([[1, 1, 1], [1, 2, 0], [1, 0, 0]]),
                       [4, 6, 3], [3, 2, 1]),
}


@pytest.mark.parametrize("name", sorted(CTC))
def test_ctc_loss_module(name):
    kw, targets, in_lens, tgt_lens = CTC[name]
    em, tm = ember.nn.CTCLoss(**kw), torch.nn.CTCLoss(**kw)
    assert repr(em) == repr(tm) and em.blank == tm.blank
    assert em.zero_infinity == tm.zero_infinity and em.reduction == tm.reduction
    for dtype in ("float32", "float64"):
        lp = _log_probs(CTC_T, CTC_N, CTC_C).astype(dtype)
        ex = ember.tensor(lp, requires_grad=True)
        tx = torch.tensor(lp, requires_grad=True)
        args = [targets, in_lens, tgt_lens]
        eo = em(ex, *(ember.tensor(a) for a in args))
        to = tm(tx, *(torch.tensor(a) for a in args))
        compare(eo, to, dtype, rtol=1e-5, atol=1e-6)
        w = np.random.default_rng(2).uniform(0.5, 1, tuple(to.shape)).astype(dtype)
        (eo * ember.tensor(w)).sum().backward()
        (to * torch.tensor(w)).sum().backward()
        compare(ex.grad, tx.grad, dtype, rtol=1e-5, atol=1e-6, path="grad")


def test_ctc_loss_unbatched_and_int32_lengths():
    lp = _log_probs(CTC_T, 1, CTC_C)[:, 0]  # (T, C)
    res = []
    for t in (ember, torch):
        x = t.tensor(lp, requires_grad=True)
        out = t.nn.CTCLoss(reduction="sum")(x, t.tensor([1, 2, 3], dtype=t.int32),
                                             t.tensor(6, dtype=t.int32), t.tensor(3))
        out.backward()
        res.append((out, x.grad))
    compare(res[0], res[1], "float64", rtol=1e-6, atol=1e-8)


# ---- pads, upsampling, norms, containers ---------------------------------------------------
OTHERS = {
    "CircularPad1d": (lambda t: t.nn.CircularPad1d((2, 1)), [(2, 3, 4)]),
    "CircularPad1d-unbatched": (lambda t: t.nn.CircularPad1d(1), [(3, 4)]),
    "CircularPad3d": (lambda t: t.nn.CircularPad3d((1, 0, 0, 2, 1, 1)), [(1, 2, 2, 3, 3)]),
    "ConstantPad3d": (lambda t: t.nn.ConstantPad3d((1, 0, 2, 0, 0, 1), -1.5), [(1, 2, 2, 2, 3)]),
    "ConstantPad3d-int": (lambda t: t.nn.ConstantPad3d(1, 2.0), [(2, 2, 2, 2)]),
    "ReplicationPad2d": (lambda t: t.nn.ReplicationPad2d((1, 2, 0, 3)), [(1, 2, 3, 3)]),
    "ReplicationPad3d": (lambda t: t.nn.ReplicationPad3d(1), [(1, 1, 2, 3, 2)]),
    "ZeroPad3d": (lambda t: t.nn.ZeroPad3d((0, 1, 1, 0, 2, 1)), [(1, 1, 2, 2, 3)]),
    "UpsamplingNearest2d": (lambda t: t.nn.UpsamplingNearest2d(scale_factor=2),
                            [(1, 2, 2, 3)]),
    "UpsamplingNearest2d-size": (lambda t: t.nn.UpsamplingNearest2d(size=(5, 4)),
                                 [(1, 2, 2, 3)]),
    "SyncBatchNorm-eval": (lambda t: t.nn.SyncBatchNorm(3), [(4, 3, 2)]),
    "SyncBatchNorm-train": (lambda t: t.nn.SyncBatchNorm(3, momentum=0.3), [(4, 3, 2, 2)],
                            True),
    "NonDynamicallyQuantizableLinear": (
        lambda t: t.nn.modules.linear.NonDynamicallyQuantizableLinear(4, 3), [(2, 4)]),
}


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_other(name):
    ctor, specs, *train = OTHERS[name]
    run(ctor, specs, train=bool(train))


def _decoder(t):
    t.manual_seed(0)
    layer = t.nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                         batch_first=True)
    return t.nn.TransformerDecoder(layer, 2, norm=t.nn.LayerNorm(8))


def test_transformer_decoder():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # enable_nested_tensor-like notes in either
        run(_decoder, [(2, 5, 8), (2, 4, 8)], rtol=1e-6, atol=1e-7)


def test_transformer_decoder_masks():
    tm = _decoder(torch).double()
    em = _decoder(ember).double()
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(0)
    tgt, mem = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 4, 8))
    pad = np.array([[False, False, False, True], [False, False, False, False]])
    outs = []
    for t, m in ((ember, em), (torch, tm)):
        mask = t.nn.Transformer.generate_square_subsequent_mask(5, dtype=t.float64)
        outs.append(m(t.tensor(tgt), t.tensor(mem), tgt_mask=mask,
                      memory_key_padding_mask=t.tensor(pad), tgt_is_causal=True))
    compare(outs[0], outs[1], "float64", rtol=1e-6, atol=1e-7)


def test_container_is_deprecated_module():
    outs = []
    for t in (ember, torch):
        with pytest.warns(FutureWarning, match="Container.* is deprecated"):
            c = t.nn.Container(a=t.nn.ReLU(), b=t.nn.Tanh())
        outs.append(c)
    assert repr(outs[0]) == repr(outs[1])
    assert [n for n, _ in outs[0].named_children()] == [n for n, _ in outs[1].named_children()]
