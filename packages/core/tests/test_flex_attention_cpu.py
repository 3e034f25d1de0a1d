"""FlexAttention's fused C++ kernels (forward and backward, block-sparse, online softmax):
outputs and logsumexp equal torch's flex_attention on CPU, gradients of q, k and v (through out
and lse) equal the eager reference's (itself checked against torch's math path in
test_flex_attention.py); mods the tracer cannot express give NotImplemented."""
import importlib
import math
import warnings

import numpy as np
import pytest

import ember
from ember.nn.attention import _flex_cpu as FC
from ember.nn.attention import flex_attention as EF

torch = pytest.importorskip("torch")
TF = importlib.import_module("torch.nn.attention.flex_attention")


def _causal(b, h, q, k):
    return q >= k


def _document(b, h, q, k):   # documents of 12 tokens, causal inside each
    return (q // 12 == k // 12) & (q >= k)


def _check(shapes, score=None, mask=None, gqa=False, bs=16, B=None, dt=np.float32, sparse=None):
    rng = np.random.default_rng(shapes[0][2])
    arrs = [rng.standard_normal(s).astype(dt) for s in shapes]
    L, S = shapes[0][2], shapes[1][2]
    bm = EF.create_block_mask(mask, B, None, L, S, device="cpu", BLOCK_SIZE=bs) if mask else None
    scale = 1 / math.sqrt(shapes[0][-1])
    n0, s0 = FC.calls["backward"], FC.calls["sparse"]
    res = []
    for fused in (True, False):
        xs = [ember.tensor(a, requires_grad=True) for a in arrs]
        if fused:
            o, lse = FC.flex_attention_cpu(*xs, score, bm, scale, True)
        else:
            o, lse = EF.flex_attention(*xs, score_mod=score, block_mask=bm, enable_gqa=gqa,
                                       return_lse=True)
        go = ember.tensor(np.sin(np.arange(o.numel())).reshape(o.shape).astype(dt))
        gl = ember.tensor(np.cos(np.arange(lse.numel())).reshape(lse.shape).astype(dt))
        (o * go).sum().add(ember.where(lse == -math.inf, 0.0, lse * gl).sum()).backward()
        res.append([o.detach().numpy(), lse.detach().numpy()] + [x.grad.numpy() for x in xs])
    assert FC.calls["backward"] == n0 + 1
    assert FC.calls["sparse"] == s0 + (mask is not None if sparse is None else sparse)
    tol = 1e-10 if dt == np.float64 else 1e-4
    for a, b, name in zip(*res, ("out", "lse", "dq", "dk", "dv")):
        assert a.dtype == b.dtype, name
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=name)
    tbm = TF.create_block_mask(mask, B, None, L, S, device="cpu", BLOCK_SIZE=bs) if mask else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        to, tl = TF.flex_attention(*[torch.tensor(a) for a in arrs], score_mod=score,
                                   block_mask=tbm, enable_gqa=gqa, return_lse=True)
    np.testing.assert_allclose(res[0][0], to.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(res[0][1], tl.numpy(), rtol=tol, atol=tol)


def test_relative_bias_causal_block_sparse():
    _check([(1, 2, 40, 8), (1, 2, 24, 8), (1, 2, 24, 4)],
           score=lambda s, b, h, q, k: s + (q - k) * 0.1, mask=_causal)


def test_softcap_gqa_and_alibi_document_mask():
    _check([(2, 4, 8, 8), (2, 2, 8, 8), (2, 2, 8, 8)], gqa=True,
           score=lambda s, b, h, q, k: 2.0 * (s / 2.0).tanh())
    _check([(1, 2, 36, 8)] * 3, mask=_document, bs=(8, 16),
           score=lambda s, b, h, q, k: s - (h + 1) * 0.25 * (q - k).abs())


def test_fully_masked_rows_broadcast_kv_batch_float64():
    _check([(2, 1, 8, 4), (1, 1, 8, 4), (1, 1, 8, 4)], mask=lambda b, h, q, k: q < 5, bs=4,
           B=2, dt=np.float64)


_IDS = np.repeat([0, 1, 2], [10, 15, 7]).astype(np.int32)   # three documents
_DOC = ember.tensor(_IDS)
_BIAS = ember.tensor([0.5, -1.0])


def _doc_ids(b, h, q, k):  # reads captured tensors: the kernels read them too
    doc = _DOC if isinstance(q, (ember.Tensor, FC.mx.Expr)) else torch.tensor(_IDS)
    return (doc[q] == doc[k]) & (q >= k)


def _head_bias(s, b, h, q, k):
    bias = _BIAS if isinstance(h, (ember.Tensor, FC.mx.Expr)) else torch.tensor([0.5, -1.0])
    return s + bias[h]


def test_captured_tensors_document_ids_and_head_bias():
    _check([(1, 2, 32, 8)] * 3, mask=_doc_ids, score=_head_bias)


def test_captured_tensor_needing_gradients_is_declined():
    bias = ember.tensor([0.5, -1.0], requires_grad=True)
    q = ember.randn(1, 2, 4, 8)
    assert FC.flex_attention_cpu(q, q, q, lambda s, b, h, qi, ki: s + bias[h], None, 0.3,
                                 False) is NotImplemented
