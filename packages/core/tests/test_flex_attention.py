"""ember.nn.attention.flex_attention against PyTorch 2.13 on CPU: outputs and logsumexp against
torch's flex_attention, gradients against autograd through torch's own math path
(math_attention: torch's flex_attention has no backward on CPU), block masks (partial and full
blocks, by kv and by q) equal to torch's create_block_mask, and torch's errors."""
import importlib
import math
import warnings

import numpy as np
import pytest

import ember
from ember.nn.attention import flex_attention as EF

torch = pytest.importorskip("torch")
TF = importlib.import_module("torch.nn.attention.flex_attention")
_MATH = importlib.import_module("torch._higher_order_ops.flex_attention").math_attention

_BLOCKS = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
           "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices")


def _causal(b, h, q, k):
    return q >= k


def _window(b, h, q, k):
    return (q - k).abs() <= 3


def _head_even(b, h, q, k):
    return h % 2 == 0


def _first_rows(b, h, q, k):  # rows q >= 5 keep nothing: fully masked
    return q < 5


def _rel_bias(s, b, h, q, k):
    return s + (q - k) * 0.1


def _softcap(s, b, h, q, k):
    return 2.0 * (s / 2.0).tanh()


def _alibi(s, b, h, q, k):
    return s - (h + 1) * 0.25 * (q - k)


def _check(shapes, score=None, mask=None, gqa=False, scale=None, bs=128, B=None, H=None):
    rng = np.random.default_rng(len(shapes[0]) + shapes[0][2])
    arrs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    L, S = shapes[0][2], shapes[1][2]
    mask = mask or TF.noop_mask
    emask = {TF.noop_mask: EF.noop_mask}.get(mask, mask)
    tbm = TF.create_block_mask(mask, B, H, L, S, device="cpu", BLOCK_SIZE=bs)
    ebm = EF.create_block_mask(emask, B, H, L, S, device="cpu", BLOCK_SIZE=bs)
    for name in _BLOCKS:
        assert getattr(ebm, name).tolist() == getattr(tbm, name).tolist(), name
    assert ebm.shape == tuple(tbm.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, ref_lse = TF.flex_attention(*[torch.tensor(a) for a in arrs], score_mod=score,
                                         block_mask=tbm, scale=scale, enable_gqa=gqa,
                                         return_lse=True)
    tq = [torch.tensor(a, requires_grad=True) for a in arrs]
    eq = [ember.tensor(a, requires_grad=True) for a in arrs]
    out, lse = EF.flex_attention(*eq, score_mod=score, block_mask=ebm, scale=scale,
                                 enable_gqa=gqa, return_lse=True)
    assert out.dtype == ember.float32 and tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_allclose(out.detach().numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lse.detach().numpy(), ref_lse.numpy(), rtol=1e-5, atol=1e-5)
    # gradients: torch's math path (the one its eager flex_attention runs) under autograd
    k, v = tq[1], tq[2]
    if gqa:
        g = shapes[0][1] // shapes[1][1]
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    t_out, t_lse2, *_ = _MATH(tq[0], k, v, score or (lambda s, b, h, q, k: s), tbm.as_tuple(),
                              1 / math.sqrt(shapes[0][-1]) if scale is None else scale, {})
    go = rng.standard_normal(ref.shape).astype(np.float32)
    gl = rng.standard_normal(ref_lse.shape).astype(np.float32)
    live = np.isfinite(ref_lse.numpy())
    gl[~live] = 0.0
    ((t_out * torch.tensor(go)).sum() + (torch.where(torch.tensor(live), t_lse2 * math.log(2), 0)
                                         * torch.tensor(gl)).sum()).backward()
    ((out * ember.tensor(go)).sum() + (ember.where(ember.tensor(live), lse, 0.0)
                                       * ember.tensor(gl)).sum()).backward()
    for e, t in zip(eq, tq):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_plain_attention():
    _check([(2, 2, 16, 8)] * 3)


def test_causal_block_mask_partial_and_full_blocks():
    _check([(2, 2, 40, 8)] * 3, mask=_causal, bs=16)


def test_score_mods_scale_and_lengths():
    _check([(1, 2, 12, 8), (1, 2, 20, 8), (1, 2, 20, 4)], score=_rel_bias, scale=0.3)
    _check([(1, 4, 9, 8)] * 3, score=_alibi, mask=_window, bs=4)
    _check([(1, 2, 6, 8)] * 3, score=_softcap)


def test_grouped_query_attention():
    _check([(2, 4, 8, 8), (2, 2, 8, 8), (2, 2, 8, 8)], gqa=True, mask=_causal, bs=4)


def test_fully_masked_rows_give_zeros_and_minus_inf_lse():
    _check([(1, 1, 8, 4)] * 3, mask=_first_rows, bs=4)


def test_masks_per_head_and_combinators():
    _check([(2, 2, 8, 4)] * 3, mask=_head_even, bs=4, B=2, H=2)
    both = EF.and_masks(_causal, _window)
    either = EF.or_masks(_head_even, _first_rows)
    assert EF.create_mask(both, 1, 1, 8, 8, "cpu").tolist() == \
        TF.create_mask(TF.and_masks(_causal, _window), 1, 1, 8, 8, "cpu").tolist()
    assert EF.create_mask(either, 1, 2, 8, 8, "cpu").tolist() == \
        TF.create_mask(TF.or_masks(_head_even, _first_rows), 1, 2, 8, 8, "cpu").tolist()
    bm = EF.create_block_mask(_causal, None, None, 256, 256, device="cpu")
    tbm = TF.create_block_mask(_causal, None, None, 256, 256, device="cpu")
    assert bm.to_dense().tolist() == tbm.to_dense().tolist()
    assert abs(bm.sparsity() - tbm.sparsity()) < 1e-9


def test_errors_as_torch():
    q = ember.randn(1, 2, 4, 8)
    for args, kw, exc in [((q, ember.randn(1, 1, 4, 8), ember.randn(1, 1, 4, 8)), {},
                           ValueError),
                          ((q, ember.randn(1, 3, 4, 8), ember.randn(1, 3, 4, 8)),
                           {"enable_gqa": True}, ValueError),
                          ((q, ember.randn(1, 2, 4, 6), ember.randn(1, 2, 4, 6)), {},
                           ValueError),
                          ((q[0], q[0], q[0]), {}, NotImplementedError)]:
        with pytest.raises(exc):
            EF.flex_attention(*args, **kw)
        targs = [torch.tensor(a.numpy()) for a in args]
        with pytest.raises(exc), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            TF.flex_attention(*targs, **kw)
    bm = EF.create_block_mask(_causal, None, None, 8, 8, device="cpu")
    with pytest.raises(ValueError, match="block_mask was created for"):
        EF.flex_attention(q, q, q, block_mask=bm)
