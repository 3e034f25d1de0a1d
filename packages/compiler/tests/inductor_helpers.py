"""Helpers shared by the inductor tests and by the scripts they run on a cuda device
(cuda_helpers.run_script: its subprocess's path holds this folder): a backend keeping inductor's
compiled graphs, a recorder of the Triton kernels inductor generates, value comparison on the
host, and the workloads' GPT (benchmarks/workloads.py), tiny."""
import math

import numpy as np

import ember
from ember._dynamo.aot import aot_module
from ember._inductor import compile_graph

nn, F = ember.nn, ember.nn.functional


class Recorder:
    """backend="inductor" (AOT autograd, then inductor), keeping the graphs dynamo hands it
    (`captured`) and each compiled forward and backward graph (`graphs`: their kernel and extern
    counts, their generated source)."""

    def __init__(self, options=None):
        self.captured, self.graphs = [], []
        self.options = options

    def __call__(self, gm, example_inputs):
        self.captured.append(gm)
        def rec(g, ex=None):
            c = compile_graph(g, ex, self.options)
            self.graphs.append(c)
            return c
        return aot_module(gm, example_inputs, fw_compiler=rec, bw_compiler=rec)

    def counts(self) -> list:
        """(kernels, externs) of each graph that ran as kernels; one that ran as captured (an
        inductor fallback) fails the test."""
        ran = [g for g in self.graphs if g.variants]
        assert all(g.last is not None for g in ran), "a graph ran as captured"
        return [(g.last.n_kernels, g.last.n_extern) for g in self.graphs if g.last is not None]

    def last(self, i=0):
        return self.graphs[i].last


def record_triton_kernels() -> dict:
    """{kernel name: source} of every Triton kernel inductor builds from now on (clear it
    between cases)."""
    from ember._inductor import graph as G
    srcs: dict = {}
    orig = G._triton_kernels

    def record(sources):
        for s in sources:
            srcs[s.split("def ", 1)[1].split("(", 1)[0]] = s
        return orig(sources)
    G._triton_kernels = record
    return srcs


def close(a, b, tol=1e-4):
    """Values equal (tensors on any device, compared on the host)."""
    np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().cpu().numpy(), rtol=tol,
                               atol=tol)


C, H, V, T = 16, 2, 32, 8   # channels, heads, vocabulary, context


class Block(nn.Module):
    """The workloads' GPT block (q, k, v split by a generator expression, as there)."""

    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.out = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))  # (B, H, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = ember.tril(ember.ones(T, T, device=x.device)) == 0
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """n_layer blocks; forward(idx, targets) is the cross-entropy loss."""

    def __init__(self, n_layer=1):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
        self.ln, self.head = nn.LayerNorm(C), nn.Linear(C, V, bias=False)

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(ember.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
