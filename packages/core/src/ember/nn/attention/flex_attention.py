"""FlexAttention (torch.nn.attention.flex_attention): attention whose scores pass through a user
`score_mod(score, b, h, q_idx, kv_idx)` and whose mask is a `mask_mod(b, h, q_idx, kv_idx)`,
with the mask summarized per block (`BlockMask`, from `create_block_mask`).

This is the eager reference, written in ember ops (so autograd differentiates it): the mods are
called once on broadcast index tensors, b (B,1,1,1), h (1,H,1,1), q_idx (1,1,L,1) and kv_idx
(1,1,1,S), instead of PyTorch's vmap over scalars; any mod made of elementwise ops and indexing
of captured tensors gives the same values. Scores are computed in float32 (float64 for float64
inputs), fully masked rows give zeros (their logsumexp is -inf), as PyTorch's math path.

>>> import ember
>>> from ember.nn.attention.flex_attention import flex_attention, create_block_mask
>>> q = k = v = ember.ones(1, 2, 4, 8)
>>> causal = lambda b, h, q_idx, kv_idx: q_idx >= kv_idx
>>> bm = create_block_mask(causal, None, None, 4, 4, device="cpu")
>>> tuple(flex_attention(q, k, v, block_mask=bm).shape)
(1, 2, 4, 8)
"""
from __future__ import annotations

import math

import ember
from ember import Tensor
from ember._state import state

__all__ = ["flex_attention", "create_block_mask", "create_mask", "BlockMask", "and_masks",
           "or_masks", "noop_mask", "_DEFAULT_SPARSE_BLOCK_SIZE"]

_DEFAULT_SPARSE_BLOCK_SIZE = 128


def noop_mask(batch, head, token_q, token_kv):
    """The mask_mod that keeps every score."""
    return batch.new_ones(size=(), dtype=ember.bool, device=batch.device)


def _identity(score, batch, head, token_q, token_kv):
    return score


def and_masks(*mask_mods):
    """A mask_mod keeping a score where every one of mask_mods keeps it."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def and_mask(b, h, q_idx, kv_idx):
        result = b.new_ones((), dtype=ember.bool)
        for m in mask_mods:
            result = result & m(b, h, q_idx, kv_idx)
        return result
    return and_mask


def or_masks(*mask_mods):
    """A mask_mod keeping a score where any one of mask_mods keeps it."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def or_mask(b, h, q_idx, kv_idx):
        result = b.new_zeros((), dtype=ember.bool)
        for m in mask_mods:
            result = result | m(b, h, q_idx, kv_idx)
        return result
    return or_mask


def _indices(B, H, L, S, device):
    """The broadcast index tensors b, h, q_idx, kv_idx (int32, as PyTorch's)."""
    def ar(n, dim):
        shape = [1, 1, 1, 1]
        shape[dim] = n
        return ember.arange(n, dtype=ember.int32, device=device).reshape(shape)
    return ar(B, 0), ar(H, 1), ar(L, 2), ar(S, 3)


def create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device="cuda"):
    """The dense boolean mask (B, H, Q_LEN, KV_LEN) of a mask_mod (B or H None: 1)."""
    B, H = B or 1, H or 1
    b, h, m, n = _indices(B, H, Q_LEN, KV_LEN, device)
    mask = mod_fn(b, h, m, n)
    if not isinstance(mask, Tensor):
        mask = ember.tensor(bool(mask), device=device)
    return mask.to(ember.bool).expand(B, H, Q_LEN, KV_LEN).contiguous()


def _dense_to_ordered(dense):
    """(number of blocks per row, block indices: kept ones first, stable) as int32."""
    dense = dense.to(ember.int32)
    num = dense.sum(dim=-1).to(ember.int32).contiguous()
    idx = ember.argsort(dense, dim=-1, descending=True, stable=True).to(ember.int32)
    return num, idx.contiguous()


def _ordered_to_dense(num, idx):
    """The (…, rows, cols) 0/1 int32 matrix of an ordered (num, idx) pair."""
    cols = idx.shape[-1]
    keep = ember.arange(cols, device=idx.device).reshape(*([1] * num.ndim), cols) < \
        num.unsqueeze(-1).to(ember.int64)
    dense = ember.zeros(*idx.shape[:-1], cols + 1, dtype=ember.int32, device=idx.device)
    target = ember.where(keep, idx.to(ember.int64), ember.full_like(idx, cols, dtype=ember.int64))
    dense = dense.scatter(-1, target, ember.ones_like(target, dtype=ember.int32))
    return dense[..., :cols]


def _transposed(num, idx):
    if num is None:
        return None, None
    return _dense_to_ordered(_ordered_to_dense(num, idx).transpose(-2, -1))


class BlockMask:
    """Which (query block, key block) pairs a mask keeps: `kv_num_blocks`/`kv_indices` for the
    partly kept blocks, `full_kv_num_blocks`/`full_kv_indices` for the wholly kept ones (and
    the same by query block), the block size and the mask_mod itself."""

    def __init__(self, seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks,
                 full_kv_indices, q_num_blocks, q_indices, full_q_num_blocks, full_q_indices,
                 BLOCK_SIZE, mask_mod):
        self.seq_lengths = tuple(seq_lengths)
        self.kv_num_blocks, self.kv_indices = kv_num_blocks, kv_indices
        self.full_kv_num_blocks, self.full_kv_indices = full_kv_num_blocks, full_kv_indices
        self.q_num_blocks, self.q_indices = q_num_blocks, q_indices
        self.full_q_num_blocks, self.full_q_indices = full_q_num_blocks, full_q_indices
        self.BLOCK_SIZE = BLOCK_SIZE
        self.mask_mod = mask_mod

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks, kv_indices, full_kv_num_blocks=None,
                       full_kv_indices=None, BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE,
                       mask_mod=None, seq_lengths=None):
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise RuntimeError("full_kv_num_blocks and full_kv_indices must be both provided "
                               "or omitted")
        q_num, q_idx = _transposed(kv_num_blocks, kv_indices)
        fq_num, fq_idx = _transposed(full_kv_num_blocks, full_kv_indices)
        if isinstance(BLOCK_SIZE, int):
            BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * BLOCK_SIZE[0],
                           kv_indices.shape[-1] * BLOCK_SIZE[1])
        return cls(seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices,
                   q_num, q_idx, fq_num, fq_idx, BLOCK_SIZE, mask_mod or noop_mask)

    @property
    def shape(self):
        return (*self.kv_indices.shape[:-2], *self.seq_lengths)

    def as_tuple(self, flatten: bool = True):
        bs = self.BLOCK_SIZE
        return (*self.seq_lengths, self.kv_num_blocks, self.kv_indices, self.full_kv_num_blocks,
                self.full_kv_indices, self.q_num_blocks, self.q_indices, self.full_q_num_blocks,
                self.full_q_indices, *(bs if flatten else (bs,)), self.mask_mod)

    def to_dense(self) -> Tensor:
        """(B, H, query blocks, key blocks) int32: 1 where a block is kept (partly or whole)."""
        dense = _ordered_to_dense(self.kv_num_blocks, self.kv_indices)
        if self.full_kv_num_blocks is not None:
            dense = dense | _ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices)
        return dense

    def sparsity(self) -> float:
        """Percent of blocks skipped."""
        dense = self.to_dense()
        return 100 * (1 - float(dense.sum()) / dense.numel())

    def to(self, device):
        def mv(t):
            return None if t is None else t.to(device)
        return BlockMask(self.seq_lengths, mv(self.kv_num_blocks), mv(self.kv_indices),
                         mv(self.full_kv_num_blocks), mv(self.full_kv_indices),
                         mv(self.q_num_blocks), mv(self.q_indices), mv(self.full_q_num_blocks),
                         mv(self.full_q_indices), self.BLOCK_SIZE, self.mask_mod)

    def __repr__(self):
        return (f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, "
                f"mask_mod={getattr(self.mask_mod, '__name__', self.mask_mod)})")


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device="cuda", BLOCK_SIZE=128,
                      _compile=False):
    """The BlockMask of mask_mod over (B, H, Q_LEN, KV_LEN) (B or H None: broadcast), blocks of
    BLOCK_SIZE (an int or (q, kv)); partial and full blocks are kept apart."""
    q_bs, kv_bs = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else BLOCK_SIZE
    mask = create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device)
    Bm, Hm = mask.shape[0], mask.shape[1]
    nq, nkv = -(-Q_LEN // q_bs), -(-KV_LEN // kv_bs)
    mask = ember.nn.functional.pad(mask, (0, nkv * kv_bs - KV_LEN, 0, nq * q_bs - Q_LEN))
    blocks = mask.reshape(Bm, Hm, nq, q_bs, nkv, kv_bs).permute(0, 1, 2, 4, 3, 5)
    count = blocks.to(ember.int32).sum(dim=(-2, -1))
    full = count == q_bs * kv_bs
    partial = (count > 0) & ~full
    kv_num, kv_idx = _dense_to_ordered(partial)
    fkv_num, fkv_idx = _dense_to_ordered(full)
    return BlockMask.from_kv_blocks(kv_num, kv_idx, fkv_num, fkv_idx, (q_bs, kv_bs), mask_mod,
                                    (Q_LEN, KV_LEN))


def _check(query, key, value, enable_gqa, block_mask):
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    if not (query.dtype == key.dtype == value.dtype):
        raise ValueError(f"Expected query, key, and value to have the same dtype, but got "
                         f"query.dtype: {query.dtype}, key.dtype: {key.dtype}, and value.dtype: "
                         f"{value.dtype} instead.")
    if query.size(-1) != key.size(-1):
        raise ValueError(f"Expect query and key/value to have the same embedding dimension but "
                         f"got E={query.size(-1)} and E={key.size(-1)}.")
    hq, hkv = query.size(1), key.size(1)
    if not enable_gqa and hq != hkv:
        raise ValueError(f"Expect query and key/value to have the same number of heads but got "
                         f"Hq={hq} and Hkv={hkv}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and hq % hkv:
        raise ValueError(f"Expect number of query heads to be a multiple of kv heads for GQA "
                         f"but got Hq={hq} and Hkv={hkv}.")
    if key.size(2) != value.size(2) or key.size(1) != value.size(1):
        raise ValueError(f"Expect key and value to have the same sequence length and heads but "
                         f"got key {tuple(key.shape)} and value {tuple(value.shape)}.")
    bq, bkv = query.size(0), key.size(0)
    if bq != bkv and block_mask is None:
        raise ValueError(f"Expect query and key/value to have the same batch size, or non-none "
                         f"block_mask, but got block_mask=None, Bq={bq}, and Bkv={bkv}.")
    if bq != bkv and block_mask.kv_num_blocks.size(0) != bq:
        raise ValueError(f"Expect query and key/value to have the same batch size, or "
                         f"block_mask and query to have the same batch size, but got Bq={bq}, "
                         f"Bkv={bkv}, B_block_mask={block_mask.kv_num_blocks.size(0)}.")
    if not (bq == bkv or bkv == 1):
        raise RuntimeError(f"Bq and Bkv must broadcast. Got Bq={bq} and Bkv={bkv}")
    if block_mask is not None:
        L, S = query.size(2), key.size(2)
        if tuple(block_mask.seq_lengths) != (L, S):
            raise ValueError(f"block_mask was created for block_mask.shape={block_mask.shape} "
                             f"but got q_len={L} and kv_len={S}. Create a new block_mask for "
                             f"these lengths.")


def _fused(query, key, value, score_mod, block_mask, scale, return_lse):
    """The device's fused kernels (an autograd node where gradients are wanted), or
    NotImplemented."""
    from ember._device import get_backend
    try:
        fn = getattr(get_backend(query.device.type), "flex_attention", None)
    except Exception:  # no such backend: the eager reference
        return NotImplemented
    if fn is None:
        return NotImplemented
    return fn(query, key, value, score_mod, block_mask, scale, return_lse)


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None,
                   enable_gqa=False, return_lse=False, kernel_options=None):
    """softmax(score_mod(q @ k^T * scale) masked by block_mask's mask_mod) @ v, per head.

    query (B, Hq, L, E), key (B, Hkv, S, E), value (B, Hkv, S, Ev) -> (B, Hq, L, Ev); with
    return_lse also the logsumexp of the scores (B, Hq, L). Hq may be a multiple of Hkv under
    enable_gqa."""
    _check(query, key, value, enable_gqa, block_mask)
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    if state.modes:   # traced (make_fx, ember.compile): one flex_attention node, not its ops
        hop = _traced()
        if hop is not None and hop.tracing():
            out, lse = hop.call(query, key, value, score_mod, block_mask, scale, enable_gqa)
            return (out, lse) if return_lse else out
    if query.device.type not in ("cpu", "meta") and not hasattr(query, "fake_mode"):
        # the device's fused kernels (forward and backward); fake tensors: the reference
        fused = _fused(query, key, value, score_mod, block_mask, scale, return_lse)
        if fused is not NotImplemented:
            return fused
    return _reference(query, key, value, score_mod, block_mask, scale, return_lse)


flex_attention._ember_allow_in_graph = True   # ember.compile records it whole (mods included)


def _traced():
    """ember-compiler's flex_attention higher-order op, None where it is not installed."""
    try:
        from ember._higher_order_ops import flex_attention as hop
    except ImportError:
        return None
    return hop


def _reference(query, key, value, score_mod, block_mask, scale, return_lse):
    """The eager reference: the (B, H, L, S) scores in ember ops."""
    B, Hq, L, E = query.shape
    S = key.size(2)
    if Hq != key.size(1):  # grouped-query attention: each kv head serves Hq // Hkv heads
        g = Hq // key.size(1)
        key = key.repeat_interleave(g, dim=1)
        value = value.repeat_interleave(g, dim=1)
    key = key.expand(B, *key.shape[1:])
    value = value.expand(B, *value.shape[1:])
    work = ember.float64 if query.dtype == ember.float64 else ember.float32
    scores = (query @ key.transpose(-2, -1)).to(work)                  # (B, H, L, S)
    scores = (scores * scale).to(work)
    b, h, m, n = _indices(B, Hq, L, S, query.device)
    if score_mod is not None:
        scores = score_mod(scores, b, h, m, n)
    mask_mod = noop_mask if block_mask is None else block_mask.mask_mod
    keep = mask_mod(b, h, m, n)
    if isinstance(keep, Tensor):
        scores = ember.where(keep, scores, ember.full((), -math.inf, dtype=work,
                                                      device=query.device))
    elif not keep:
        scores = ember.full_like(scores, -math.inf)
    dead = (scores == -math.inf).all(dim=-1, keepdim=True)             # fully masked rows
    lse = ember.where(dead.squeeze(-1),
                      ember.full((), -math.inf, dtype=work, device=query.device),
                      ember.where(dead, 0.0, scores).logsumexp(dim=-1))
    probs = ember.softmax(ember.where(dead, 0.0, scores), dim=-1)
    probs = ember.where(dead, 0.0, probs)
    out = probs.to(query.dtype) @ value
    return (out, lse) if return_lse else out
