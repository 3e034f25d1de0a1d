"""A small Llama-style transformer for the tensor-parallel examples (the module names PyTorch's
TP examples plan against: tok_embeddings, layers.N.{attention_norm, attention.{wq,wk,wv,wo},
ffn_norm, feed_forward.{w1,w2,w3}}, norm, output). Rotary embeddings are applied with cos/sin
tables (real arithmetic)."""
from dataclasses import dataclass

import ember as torch
import ember.nn as nn
import ember.nn.functional as F


@dataclass
class ModelArgs:
    dim: int = 16
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    vocab_size: int = 32
    multiple_of: int = 8
    norm_eps: float = 1e-5
    max_seq_len: int = 16


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary_tables(head_dim, seq_len, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(seq_len).float(), freqs)  # (T, hs/2)
    return torch.stack([angles.cos(), angles.sin()])  # (2, T, hs/2)


def apply_rotary(x, tables):
    """x: (B, T, nh, hs); rotate each (even, odd) pair by the position's angle."""
    cos, sin = tables[0][None, :, None, :], tables[1][None, :, None, :]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


def repeat_kv(x, n_rep):
    """(B, T, n_kv, hs) -> (B, T, n_kv * n_rep, hs)"""
    if n_rep == 1:
        return x
    b, t, n_kv, hs = x.shape
    return x[:, :, :, None, :].expand(b, t, n_kv, n_rep, hs).reshape(b, t, n_kv * n_rep, hs)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads, self.n_kv_heads = args.n_heads, args.n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)

    def forward(self, x, tables):
        bsz, seqlen, _ = x.shape
        # n_heads / n_kv_heads are the local head counts (a TP plan divides them)
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xq, xk = apply_rotary(xq, tables), apply_rotary(xk, tables)
        rep = self.n_heads // self.n_kv_heads
        keys, values = repeat_kv(xk, rep), repeat_kv(xv, rep)
        q, k, v = (t.transpose(1, 2) for t in (xq, keys, values))  # (B, nh, T, hs)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).contiguous().view(bsz, seqlen, -1))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim, multiple_of):
        super().__init__()
        hidden_dim = multiple_of * ((int(2 * hidden_dim / 3) + multiple_of - 1) // multiple_of)
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.attention = Attention(args)
        self.feed_forward = FeedForward(args.dim, 4 * args.dim, args.multiple_of)
        self.attention_norm = RMSNorm(args.dim, args.norm_eps)
        self.ffn_norm = RMSNorm(args.dim, args.norm_eps)

    def forward(self, x, tables):
        h = x + self.attention(self.attention_norm(x), tables)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(TransformerBlock(args) for _ in range(args.n_layers))
        self.norm = RMSNorm(args.dim, args.norm_eps)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)
        self.register_buffer("rotary", rotary_tables(args.dim // args.n_heads,
                                                     args.max_seq_len), persistent=False)

    def forward(self, tokens):
        _, seqlen = tokens.shape
        h = self.tok_embeddings(tokens)
        tables = self.rotary[:, :seqlen]
        for layer in self.layers:
            h = layer(h, tables)
        return self.output(self.norm(h)).float()
