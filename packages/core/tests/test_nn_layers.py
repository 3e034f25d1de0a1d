"""ember.nn layers vs torch.nn: the same layer in both, torch's state dict copied into ember's;
state-dict keys and shapes, forward values, gradients of inputs and parameters, and repr."""
from __future__ import annotations

import numpy as np
import pytest
from harness import compare

import ember

torch = pytest.importorskip("torch")


def _inputs(specs, rng):
    """specs: shape tuples (float64 N(0,1)), ("int", shape, high), ("bool", shape), or arrays."""
    out = []
    for s in specs:
        if isinstance(s, np.ndarray):
            out.append(s)
        elif isinstance(s, tuple) and s and s[0] == "int":
            out.append(rng.integers(0, s[2], size=s[1]).astype("int64"))
        elif isinstance(s, tuple) and s and s[0] == "bool":
            out.append(rng.random(s[1]) > 0.7)
        elif isinstance(s, tuple) and s and s[0] == "prob":
            out.append(rng.uniform(0.05, 0.95, size=s[1]))
        else:
            out.append(rng.standard_normal(s))
    return out


def _copy_state(em, tm):
    sd = {k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()}
    em.load_state_dict(sd)


def run(ctor, specs, train=False, grad=True, rtol=1e-7, atol=1e-8, out=lambda o: o,
        dtype="float64", seed=0, grad_args=None):
    """Build ctor(torch) and ctor(ember), copy weights, compare forward and backward."""
    tm, em = ctor(torch), ctor(ember)
    tsd, esd = tm.state_dict(), em.state_dict()
    assert list(esd) == list(tsd), f"state_dict keys {list(esd)} != {list(tsd)}"
    for k in tsd:
        assert tuple(esd[k].shape) == tuple(tsd[k].shape), k
        assert str(esd[k].dtype).split(".")[-1] == str(tsd[k].dtype).split(".")[-1], k
    assert repr(em).replace("ember.", "torch.") == repr(tm)
    if dtype == "float64":
        tm.double()
        em.double()
    _copy_state(em, tm)
    tm.train(train)
    em.train(train)
    arrays = _inputs(specs, np.random.default_rng(seed))
    tin = [torch.tensor(a) if a.dtype.kind != "f" else torch.tensor(a.astype(dtype))
           for a in arrays]
    ein = [ember.tensor(a) if a.dtype.kind != "f" else ember.tensor(a.astype(dtype))
           for a in arrays]
    if grad:
        for i, (x, y) in enumerate(zip(tin, ein)):
            if x.dtype.is_floating_point and (grad_args is None or i in grad_args):
                x.requires_grad_(True)
                y.requires_grad_(True)
    to, eo = out(tm(*tin)), out(em(*ein))
    compare(eo, to, dtype, rtol, atol)
    for (k, tv), (_, ev) in zip(tm.state_dict().items(), em.state_dict().items()):
        compare(ev, tv, dtype, rtol, atol, path=f"state {k}")  # running stats after forward
    if not grad:
        return
    touts = [o for o in (to if isinstance(to, (tuple, list)) else [to]) if o.requires_grad]
    eouts = [o for o in (eo if isinstance(eo, (tuple, list)) else [eo]) if o.requires_grad]
    rng = np.random.default_rng(seed + 1)
    ws = [rng.uniform(-1, 1, tuple(o.shape)) for o in touts]
    sum(((o * torch.tensor(w, dtype=o.dtype)).sum() for o, w in zip(touts, ws))).backward()
    sum(((o * ember.tensor(w, dtype=o.dtype)).sum() for o, w in zip(eouts, ws))).backward()
    for i, (a, b) in enumerate(zip(ein, tin)):
        if b.requires_grad:
            compare(a.grad, b.grad, dtype, rtol * 10, atol * 10, path=f"input grad {i}")
    tp, ep = dict(tm.named_parameters()), dict(em.named_parameters())
    assert list(tp) == list(ep)
    for k in tp:
        if tp[k].grad is None:
            assert ep[k].grad is None or not ep[k].grad.detach().numpy().any(), k
        else:
            compare(ep[k].grad, tp[k].grad, dtype, rtol * 10, atol * 10, path=f"grad {k}")


LAYERS = {
    "Identity": (lambda t: t.nn.Identity(3, foo=1), [(2, 3)]),
    "Linear": (lambda t: t.nn.Linear(4, 3), [(2, 5, 4)]),
    "Linear-nobias": (lambda t: t.nn.Linear(4, 3, bias=False), [(2, 4)]),
    "Bilinear": (lambda t: t.nn.Bilinear(3, 4, 2), [(5, 3), (5, 4)]),
    "Conv1d": (lambda t: t.nn.Conv1d(2, 4, 3, stride=2, padding=1), [(2, 2, 9)]),
    "Conv2d": (lambda t: t.nn.Conv2d(2, 4, (3, 2), padding=1, dilation=(1, 2)), [(2, 2, 6, 7)]),
    "Conv2d-groups-same": (lambda t: t.nn.Conv2d(4, 4, 3, groups=2, padding="same",
                                                 bias=False), [(1, 4, 5, 5)]),
    "Conv2d-reflect": (lambda t: t.nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"),
                       [(1, 2, 5, 5)]),
    "Conv2d-circular": (lambda t: t.nn.Conv2d(2, 3, 3, padding=(1, 2),
                                              padding_mode="circular"), [(1, 2, 5, 5)]),
    "Conv2d-unbatched": (lambda t: t.nn.Conv2d(2, 3, 3), [(2, 5, 5)]),
    "Conv3d": (lambda t: t.nn.Conv3d(2, 2, 2), [(1, 2, 3, 4, 3)]),
    "ConvTranspose1d": (lambda t: t.nn.ConvTranspose1d(3, 2, 3, stride=2, output_padding=1),
                        [(2, 3, 4)]),
    "ConvTranspose2d": (lambda t: t.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, groups=2),
                        [(1, 4, 3, 3)]),
    "BatchNorm1d": (lambda t: t.nn.BatchNorm1d(3), [(4, 3)]),
    "BatchNorm1d-3d-eval": (lambda t: t.nn.BatchNorm1d(3, affine=False), [(4, 3, 5)]),
    "BatchNorm2d-train": (lambda t: t.nn.BatchNorm2d(3, momentum=None), [(2, 3, 4, 4)], True),
    "BatchNorm2d-notrack": (lambda t: t.nn.BatchNorm2d(3, track_running_stats=False),
                            [(2, 3, 2, 2)]),
    "BatchNorm3d-train": (lambda t: t.nn.BatchNorm3d(2), [(2, 2, 2, 3, 2)], True),
    "InstanceNorm1d": (lambda t: t.nn.InstanceNorm1d(3, affine=True), [(2, 3, 6)]),
    "InstanceNorm2d-track": (lambda t: t.nn.InstanceNorm2d(3, track_running_stats=True),
                             [(2, 3, 4, 4)], True),
    "LayerNorm": (lambda t: t.nn.LayerNorm((3, 4)), [(2, 3, 4)]),
    "LayerNorm-nobias": (lambda t: t.nn.LayerNorm(4, bias=False, eps=1e-3), [(2, 4)]),
    "GroupNorm": (lambda t: t.nn.GroupNorm(2, 4), [(2, 4, 3)]),
    "RMSNorm": (lambda t: t.nn.RMSNorm(4), [(3, 4)]),
    "RMSNorm-eps": (lambda t: t.nn.RMSNorm([2, 4], eps=1e-3, elementwise_affine=False),
                    [(3, 2, 4)]),
    "LocalResponseNorm": (lambda t: t.nn.LocalResponseNorm(2), [(2, 4, 3, 3)]),
    "Embedding": (lambda t: t.nn.Embedding(10, 3, padding_idx=1), [("int", (2, 5), 10)]),
    "EmbeddingBag": (lambda t: t.nn.EmbeddingBag(10, 3, mode="sum"), [("int", (2, 4), 10)]),
    "Dropout-eval": (lambda t: t.nn.Dropout(0.3), [(3, 4)]),
    "MaxPool1d": (lambda t: t.nn.MaxPool1d(2), [(2, 3, 8)]),
    "MaxPool2d": (lambda t: t.nn.MaxPool2d(3, stride=2, padding=1), [(1, 2, 7, 7)]),
    "MaxPool2d-indices": (lambda t: t.nn.MaxPool2d(2, return_indices=True), [(1, 2, 4, 4)]),
    "AvgPool1d": (lambda t: t.nn.AvgPool1d(3, stride=2), [(2, 3, 9)]),
    "AvgPool2d": (lambda t: t.nn.AvgPool2d(2, ceil_mode=True, count_include_pad=False),
                  [(1, 2, 5, 5)]),
    "AdaptiveAvgPool1d": (lambda t: t.nn.AdaptiveAvgPool1d(3), [(2, 3, 7)]),
    "AdaptiveAvgPool2d": (lambda t: t.nn.AdaptiveAvgPool2d((2, None)), [(1, 2, 5, 4)]),
    "AdaptiveMaxPool2d": (lambda t: t.nn.AdaptiveMaxPool2d(2), [(1, 2, 5, 5)]),
    "MaxPool3d": (lambda t: t.nn.MaxPool3d(2, padding=1), [(1, 1, 3, 4, 4)]),
    "AvgPool3d": (lambda t: t.nn.AvgPool3d(2, divisor_override=3), [(1, 1, 2, 4, 4)]),
    "AdaptiveMaxPool1d": (lambda t: t.nn.AdaptiveMaxPool1d(3), [(2, 2, 7)]),
    "AdaptiveAvgPool3d": (lambda t: t.nn.AdaptiveAvgPool3d(2), [(1, 1, 3, 4, 5)]),
    "ConvTranspose3d": (lambda t: t.nn.ConvTranspose3d(2, 2, 2, stride=2), [(1, 2, 2, 2, 2)]),
    "InstanceNorm3d": (lambda t: t.nn.InstanceNorm3d(2, affine=True), [(2, 2, 2, 3, 2)]),
    "InstanceNorm1d-unbatched": (lambda t: t.nn.InstanceNorm1d(3), [(3, 5)]),
    "GroupNorm-noaffine": (lambda t: t.nn.GroupNorm(1, 3, affine=False), [(2, 3, 4)]),
    "ZeroPad1d": (lambda t: t.nn.ZeroPad1d(2), [(2, 3)]),
    "ReflectionPad3d": (lambda t: t.nn.ReflectionPad3d(1), [(1, 1, 2, 3, 3)]),
    "Flatten": (lambda t: t.nn.Flatten(), [(2, 3, 4)]),
    "Unflatten": (lambda t: t.nn.Unflatten(1, (2, 3)), [(4, 6)]),
    "Upsample-nearest": (lambda t: t.nn.Upsample(scale_factor=2), [(1, 2, 3, 3)]),
    "Upsample-bilinear": (lambda t: t.nn.Upsample(size=(5, 4), mode="bilinear",
                                                  align_corners=False), [(1, 2, 3, 3)]),
    "UpsamplingBilinear2d": (lambda t: t.nn.UpsamplingBilinear2d(scale_factor=2),
                             [(1, 1, 2, 3)]),
    "PixelShuffle": (lambda t: t.nn.PixelShuffle(2), [(1, 8, 2, 3)]),
    "PixelUnshuffle": (lambda t: t.nn.PixelUnshuffle(2), [(1, 2, 4, 6)]),
    "ZeroPad2d": (lambda t: t.nn.ZeroPad2d((1, 0, 2, 1)), [(1, 2, 3, 3)]),
    "ConstantPad1d": (lambda t: t.nn.ConstantPad1d(2, 3.5), [(2, 3, 4)]),
    "ReflectionPad2d": (lambda t: t.nn.ReflectionPad2d(1), [(1, 2, 3, 3)]),
    "ReplicationPad1d": (lambda t: t.nn.ReplicationPad1d((2, 1)), [(1, 2, 4)]),
    "CircularPad2d": (lambda t: t.nn.CircularPad2d(1), [(1, 1, 3, 3)]),
    "CosineSimilarity": (lambda t: t.nn.CosineSimilarity(dim=1), [(3, 4), (3, 4)]),
    "PairwiseDistance": (lambda t: t.nn.PairwiseDistance(p=3.0, keepdim=True), [(3, 4),
                                                                               (3, 4)]),
}

ACTIVATIONS = {
    "ReLU": lambda t: t.nn.ReLU(), "GELU": lambda t: t.nn.GELU(),
    "GELU-tanh": lambda t: t.nn.GELU(approximate="tanh"), "SiLU": lambda t: t.nn.SiLU(),
    "Mish": lambda t: t.nn.Mish(), "Softplus": lambda t: t.nn.Softplus(beta=2, threshold=1),
    "ELU": lambda t: t.nn.ELU(alpha=0.5), "LeakyReLU": lambda t: t.nn.LeakyReLU(0.2),
    "Hardtanh": lambda t: t.nn.Hardtanh(-0.5, 0.7), "Hardsigmoid": lambda t: t.nn.Hardsigmoid(),
    "Hardswish": lambda t: t.nn.Hardswish(), "ReLU6": lambda t: t.nn.ReLU6(),
    "SELU": lambda t: t.nn.SELU(), "CELU": lambda t: t.nn.CELU(alpha=1.5),
    "Sigmoid": lambda t: t.nn.Sigmoid(), "Tanh": lambda t: t.nn.Tanh(),
    "Softmax": lambda t: t.nn.Softmax(dim=1), "LogSoftmax": lambda t: t.nn.LogSoftmax(dim=-1),
    "Softmin": lambda t: t.nn.Softmin(dim=0), "Softmax2d": lambda t: t.nn.Softmax2d(),
    "Softsign": lambda t: t.nn.Softsign(), "Tanhshrink": lambda t: t.nn.Tanhshrink(),
    "Threshold": lambda t: t.nn.Threshold(0.1, 20.0), "GLU": lambda t: t.nn.GLU(dim=1),
    "PReLU": lambda t: t.nn.PReLU(), "PReLU-channels": lambda t: t.nn.PReLU(4, init=0.1),
    "LogSigmoid": lambda t: t.nn.LogSigmoid(), "Hardshrink": lambda t: t.nn.Hardshrink(0.3),
    "Softshrink": lambda t: t.nn.Softshrink(), "ReLU-inplace": lambda t: t.nn.ReLU(inplace=True),
}

LOSSES = {
    "CrossEntropyLoss": (lambda t: t.nn.CrossEntropyLoss(), [(4, 5), ("int", (4,), 5)]),
    "CrossEntropyLoss-smooth-weight": (
        lambda t: t.nn.CrossEntropyLoss(weight=t.arange(1.0, 6.0), label_smoothing=0.1,
                                        ignore_index=2), [(4, 5), ("int", (4,), 5)]),
    "CrossEntropyLoss-probs": (lambda t: t.nn.CrossEntropyLoss(reduction="sum"),
                               [(3, 4, 2), ("prob", (3, 4, 2))]),
    "NLLLoss": (lambda t: t.nn.NLLLoss(reduction="none"), [(4, 3), ("int", (4,), 3)]),
    "MSELoss": (lambda t: t.nn.MSELoss(), [(3, 4), (3, 4)]),
    "L1Loss": (lambda t: t.nn.L1Loss(reduction="sum"), [(3, 4), (3, 4)]),
    "SmoothL1Loss": (lambda t: t.nn.SmoothL1Loss(beta=0.5), [(3, 4), (3, 4)]),
    "HuberLoss": (lambda t: t.nn.HuberLoss(delta=0.7), [(3, 4), (3, 4)]),
    "BCELoss": (lambda t: t.nn.BCELoss(), [("prob", (3, 4)), ("prob", (3, 4))]),
    "BCEWithLogitsLoss": (lambda t: t.nn.BCEWithLogitsLoss(pos_weight=t.ones(4) * 2),
                          [(3, 4), ("prob", (3, 4))]),
    "KLDivLoss": (lambda t: t.nn.KLDivLoss(reduction="batchmean"), [(3, 4), ("prob", (3, 4))]),
    "CosineEmbeddingLoss": (lambda t: t.nn.CosineEmbeddingLoss(margin=0.2),
                            [(3, 4), (3, 4), np.array([1.0, -1.0, 1.0])]),
    "MarginRankingLoss": (lambda t: t.nn.MarginRankingLoss(margin=0.1),
                          [(5,), (5,), np.array([1.0, -1.0, 1.0, 1.0, -1.0])]),
    "HingeEmbeddingLoss": (lambda t: t.nn.HingeEmbeddingLoss(),
                           [(4,), np.array([1.0, -1.0, -1.0, 1.0])]),
    "SoftMarginLoss": (lambda t: t.nn.SoftMarginLoss(), [(4,), np.array([1.0, -1, -1, 1])]),
    "MultiLabelSoftMarginLoss": (lambda t: t.nn.MultiLabelSoftMarginLoss(),
                                 [(3, 4), ("int", (3, 4), 2)]),
    "TripletMarginLoss": (lambda t: t.nn.TripletMarginLoss(margin=0.5), [(3, 4)] * 3),
    "PoissonNLLLoss": (lambda t: t.nn.PoissonNLLLoss(), [(3, 4), ("prob", (3, 4))]),
    "GaussianNLLLoss": (lambda t: t.nn.GaussianNLLLoss(), [(3, 4), (3, 4), ("prob", (3, 4))]),
}


def _case(spec):
    ctor, shapes, *rest = spec
    return ctor, shapes, bool(rest and rest[0])


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer(name):
    ctor, shapes, train = _case(LAYERS[name])
    run(ctor, shapes, train=train)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation(name):
    shape = (2, 4, 3, 3) if "2d" in name else (3, 4)
    grad = "inplace" not in name  # in-place on a leaf that requires grad is an error
    run(ACTIVATIONS[name], [shape], grad=grad)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss(name):
    ctor, shapes, _ = _case(LOSSES[name])
    # gradients w.r.t. predictions; targets that are labels or signs get none
    n_pred = 3 if name.startswith(("Triplet", "GaussianNLL")) else \
        2 if name.startswith(("CosineEmbedding", "MarginRanking")) else 1
    run(ctor, shapes, grad_args=range(n_pred))


def test_default_init_distributions():
    """Default inits follow PyTorch's reset_parameters: bounds and fills."""
    lin = ember.nn.Linear(16, 8)
    bound = 1 / 4  # kaiming_uniform_(a=sqrt(5)) on fan_in 16 -> U(-1/sqrt(16), 1/sqrt(16))
    w = lin.weight.detach().numpy()
    assert np.abs(w).max() <= bound and w.std() > bound / 4
    assert np.abs(lin.bias.detach().numpy()).max() <= bound
    conv = ember.nn.Conv2d(2, 3, 3)
    assert np.abs(conv.weight.detach().numpy()).max() <= 1 / np.sqrt(18)
    emb = ember.nn.Embedding(50, 20, padding_idx=3)
    e = emb.weight.detach().numpy()
    assert not e[3].any() and 0.7 < e.std() < 1.3
    ln = ember.nn.LayerNorm(3)
    assert ln.weight.tolist() == [1.0] * 3 and ln.bias.tolist() == [0.0] * 3
    bn = ember.nn.BatchNorm1d(2)
    assert bn.running_var.tolist() == [1.0, 1.0] and bn.num_batches_tracked.item() == 0
    prelu = ember.nn.PReLU(3)
    assert prelu.weight.tolist() == pytest.approx([0.25] * 3)
    mha = ember.nn.MultiheadAttention(4, 2)
    assert not mha.in_proj_bias.detach().numpy().any()
    lstm = ember.nn.LSTM(3, 5)
    assert all(np.abs(p.detach().numpy()).max() <= 1 / np.sqrt(5) for p in lstm.parameters())


def test_batchnorm_running_stats_and_modes():
    tm, em = torch.nn.BatchNorm1d(3, momentum=None), ember.nn.BatchNorm1d(3, momentum=None)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.standard_normal((5, 3)).astype("float32")
        compare(em(ember.tensor(x)), tm(torch.tensor(x)), atol=1e-5)
    compare(em.running_mean, tm.running_mean, atol=1e-6)
    compare(em.running_var, tm.running_var, atol=1e-6)
    assert em.num_batches_tracked.item() == 3
    em.eval()
    tm.eval()
    x = rng.standard_normal((2, 3)).astype("float32")
    compare(em(ember.tensor(x)), tm(torch.tensor(x)), atol=1e-5)
    assert em.num_batches_tracked.item() == 3  # not counted in eval


def test_batchnorm_old_checkpoint_without_num_batches_tracked():
    bn = ember.nn.BatchNorm1d(2)
    sd = bn.state_dict()
    del sd["num_batches_tracked"]
    sd._metadata[""]["version"] = 1
    assert bn.load_state_dict(sd).missing_keys == []


def test_dropout_train_eval():
    d = ember.nn.Dropout(0.5)
    x = ember.ones(1000)
    y = d(x).detach().numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 300 < (y == 0).sum() < 700
    d.eval()
    assert d(x) is x or (d(x).detach().numpy() == 1).all()
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        ember.nn.Dropout(1.5)


@pytest.mark.parametrize("name,shape", [("Dropout1d", (4, 50, 10)), ("Dropout2d", (4, 50, 3, 3)),
                                        ("Dropout3d", (4, 50, 2, 2, 2))])
def test_channel_dropout_zeroes_whole_channels(name, shape):
    m = getattr(ember.nn, name)(0.5)
    y = m(ember.ones(shape)).detach().numpy().reshape(shape[0], shape[1], -1)
    per_channel = y.min(-1) == y.max(-1)  # each channel is all 0 or all 2
    assert per_channel.all() and set(np.unique(y)) <= {0.0, 2.0}
    m.eval()
    assert (m(ember.ones(shape)).detach().numpy() == 1).all()


def test_alpha_dropout_eval_is_identity_and_train_keeps_stats():
    x = ember.randn(20000)
    for cls in (ember.nn.AlphaDropout, ember.nn.FeatureAlphaDropout):
        m = cls(0.2)
        y = m(x.view(100, 200, 1)).detach().numpy()
        assert abs(y.mean()) < 0.05 and abs(y.std() - 1) < 0.05
        m.eval()
        np.testing.assert_array_equal(m(x).detach().numpy(), x.numpy())


def test_embedding_from_pretrained_and_padding_grad():
    w = ember.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    e = ember.nn.Embedding.from_pretrained(w)
    assert not e.weight.requires_grad and e(ember.tensor([2, 0])).tolist() == [[5, 6], [1, 2]]
    e2 = ember.nn.Embedding.from_pretrained(w, freeze=False, padding_idx=0)
    e2(ember.tensor([0, 1, 0])).sum().backward()
    assert e2.weight.grad.tolist() == [[0, 0], [1, 1], [0, 0]]


def test_conv_transpose_output_size():
    def f(t):
        m = t.nn.ConvTranspose2d(2, 3, 3, stride=2)
        with t.no_grad():
            m.weight.fill_(0.1)
            m.bias.fill_(0.0)
        return m(t.ones(1, 2, 4, 4), output_size=[10, 10])

    compare(f(ember), f(torch))
    with pytest.raises(ValueError, match="requested an output size of"):
        ember.nn.ConvTranspose2d(2, 3, 3, stride=2)(ember.ones(1, 2, 4, 4), output_size=[20, 20])


@pytest.mark.parametrize("ctor", [
    lambda t: t.nn.Conv2d(4, 3, 3, groups=3), lambda t: t.nn.Conv2d(2, 3, 3, padding="full"),
    lambda t: t.nn.Conv2d(2, 3, 3, stride=2, padding="same"),
    lambda t: t.nn.Conv2d(2, 3, 3, padding_mode="mirror"),
    lambda t: t.nn.ConvTranspose2d(2, 3, 3, padding_mode="reflect"),
    lambda t: t.nn.GroupNorm(3, 4), lambda t: t.nn.MultiheadAttention(5, 2),
    lambda t: t.nn.Embedding(3, 2, padding_idx=5), lambda t: t.nn.Hardtanh(1.0, 0.0),
    lambda t: t.nn.LSTM(3, 4, proj_size=4), lambda t: t.nn.GRU(3, 4, proj_size=2),
    lambda t: t.nn.RNN(3, 4, nonlinearity="sigmoid"), lambda t: t.nn.Unflatten(1, 3),
])
def test_constructor_errors(ctor):
    with pytest.raises(Exception) as te:
        ctor(torch)
    with pytest.raises(Exception) as ee:
        ctor(ember)
    assert type(ee.value) is type(te.value)
    assert _sets_sorted(str(ee.value)) == _sets_sorted(str(te.value))


def _sets_sorted(msg: str) -> str:
    # a set's repr depends on the process's hash seed (in torch's messages too): sort it
    import re
    return re.sub(r"\{([^{}]*)\}", lambda m: "{" + ", ".join(sorted(m.group(1).split(", ")))
                  + "}", msg)


REPRS = [
    lambda t: t.nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False, padding_mode="reflect"),
    lambda t: t.nn.ConvTranspose2d(3, 8, (3, 2), output_padding=1, stride=2, dilation=2),
    lambda t: t.nn.Conv1d(2, 4, 3, padding="same", groups=2),
    lambda t: t.nn.BatchNorm2d(4, momentum=None, affine=False),
    lambda t: t.nn.LayerNorm([2, 3], elementwise_affine=False), lambda t: t.nn.RMSNorm(3),
    lambda t: t.nn.Embedding(5, 2, padding_idx=0, max_norm=1.0),
    lambda t: t.nn.EmbeddingBag(5, 2, mode="max"), lambda t: t.nn.GELU(approximate="tanh"),
    lambda t: t.nn.Dropout(0.2, inplace=True), lambda t: t.nn.LeakyReLU(0.1, inplace=True),
    lambda t: t.nn.MaxPool2d(2), lambda t: t.nn.AvgPool2d(3, 1, 1),
    lambda t: t.nn.AdaptiveAvgPool2d((1, 1)), lambda t: t.nn.Upsample(scale_factor=2.0),
    lambda t: t.nn.LSTM(3, 4, num_layers=2, batch_first=True, bidirectional=True,
                        dropout=0.1),
    lambda t: t.nn.GRUCell(3, 4, bias=False), lambda t: t.nn.RNNCell(2, 3, nonlinearity="relu"),
    lambda t: t.nn.MultiheadAttention(8, 2, kdim=3, vdim=5),
    lambda t: t.nn.TransformerEncoder(t.nn.TransformerEncoderLayer(8, 2, 16), 2,
                                      enable_nested_tensor=False),
    lambda t: t.nn.CrossEntropyLoss(), lambda t: t.nn.InstanceNorm2d(3),
    lambda t: t.nn.GroupNorm(2, 4), lambda t: t.nn.Softmax(dim=-1),
    lambda t: t.nn.Threshold(0.1, 2),
    lambda t: t.nn.ZeroPad2d(2), lambda t: t.nn.ReflectionPad1d((1, 2)),
    lambda t: t.nn.ConstantPad2d(1, 0.5), lambda t: t.nn.Flatten(0),
    lambda t: t.nn.Bilinear(2, 3, 4, bias=False), lambda t: t.nn.PixelShuffle(3),
]


@pytest.mark.parametrize("i", range(len(REPRS)))
def test_repr(i):
    assert repr(REPRS[i](ember)) == repr(REPRS[i](torch))
