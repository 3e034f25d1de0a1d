"""F.multi_head_attention_forward and its mask helpers (_canonical_mask, _none_or_dtype), with
PyTorch's signatures: nn.MultiheadAttention and the transformer layers call them.

Layout is sequence-first, (L, N, E), as in PyTorch's functional. The attention itself is
scaled_dot_product_attention when no weights are wanted, else an explicit softmax(QK^T)V.
"""
from __future__ import annotations

import math
import warnings

from .._ops import OPS as _OPS

__all__ = ["multi_head_attention_forward", "_canonical_mask", "_none_or_dtype"]


def _e():
    import ember
    return ember


def _none_or_dtype(input):  # noqa: A002
    if input is None:
        return None
    if isinstance(input, _e().Tensor):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or torch.Tensor")


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """A bool mask becomes a float one (-inf where True); float masks pass through."""
    if mask is None:
        return None
    e = _e()
    if mask.dtype == e.bool:
        if check_other and other_type is not None and other_type != e.bool:
            warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. "
                          f"Use same type for both instead.", UserWarning, stacklevel=3)
        zero = e.zeros(mask.shape, dtype=target_type, device=mask.device)
        return e.where(mask, float("-inf"), zero)
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    return mask


def _linear(x, w, b):
    return _OPS["linear"](x, w, b)


def _in_projection(q, k, v, w, b, separate, wq, wk, wv, E):
    if not separate:
        wq, wk, wv = w.chunk(3)
    bq = bk = bv = None
    if b is not None:
        bq, bk, bv = b.chunk(3)
    return _linear(q, wq, bq), _linear(k, wk, bk), _linear(v, wv, bv)


def _pad_last(t):
    return None if t is None else _OPS["constant_pad_nd"](t, [0, 1], 0)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight,
                                 in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
                                 out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    e = _e()
    is_batched = query.dim() == 3
    if not is_batched:   # unbatched (L, E): add the batch dim at 1
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got "
                             f"{embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       _none_or_dtype(attn_mask), "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to create "
                           "this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None     # sdpa builds the causal mask itself
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, False)
        if key_padding_mask is not None:
            is_causal = False

    q, k, v = _in_projection(query, key, value, in_proj_weight, in_proj_bias,
                             use_separate_proj_weight, q_proj_weight, k_proj_weight,
                             v_proj_weight, embed_dim)
    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but "
                                   f"should be {(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but "
                                   f"should be {(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")
    if bias_k is not None and bias_v is not None:
        k = e.cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = e.cat([v, bias_v.expand(1, bsz, embed_dim)])
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)

    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)       # (B*H, L, hd)
    k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_k is None \
        else static_k
    v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_v is None \
        else static_v
    if add_zero_attn:
        z = e.zeros((bsz * num_heads, 1, head_dim), dtype=q.dtype, device=q.device)
        k, v = e.cat([k, z], dim=1), e.cat([v, z], dim=1)
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
    src_len = k.shape[1]
    if key_padding_mask is not None:
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len)
        kpm = kpm.reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0

    if need_weights:
        scores = _OPS["matmul"](q * math.sqrt(1.0 / head_dim), k.transpose(-2, -1))
        if attn_mask is not None:
            scores = scores + attn_mask
        w = _OPS["softmax"](scores, -1)                                    # (B*H, L, S)
        if dropout_p > 0.0:
            w = _OPS["dropout"](w, dropout_p, True)
        out = _OPS["matmul"](w, v)                                         # (B*H, L, hd)
        out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = _linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, embed_dim)
        w = w.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            w = w.mean(1)
        if not is_batched:
            out, w = out.squeeze(1), w.squeeze(0)
        return out, w

    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = _OPS["scaled_dot_product_attention"](q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = _linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, embed_dim)
    if not is_batched:
        out = out.squeeze(1)
    return out, None
