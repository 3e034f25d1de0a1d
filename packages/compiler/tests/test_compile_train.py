"""ember.compile training through "aot_eager": the workloads' MLP, CNN and GPT and nanoGPT's
model train with eager's losses; the partitioner; dropout draws; checkpointing; breaks."""
import dataclasses
import math

import pytest
from compile_helpers import Counter, _reset, close, entries  # noqa: F401  (_reset: autouse)

import ember
import ember._dynamo as dynamo
import ember._logging
import ember.nn as nn
import ember.nn.functional as F

X = ember.randn(3, 4)
Y = ember.randn(3, 4)


# ---- training: aot_eager ------------------------------------------------------------------------
def _mlp():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 10))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor", "eager"])
def test_mlp_train_step_losses_equal_eager(backend):
    m1, m2 = _mlp(), _mlp()
    o1 = ember.optim.AdamW(m1.parameters(), lr=1e-3)
    o2 = ember.optim.AdamW(m2.parameters(), lr=1e-3)
    cm = ember.compile(m2, backend=backend)
    ember.manual_seed(1)
    xb, yb = ember.randn(32, 784), ember.randint(0, 10, (32,))
    for _ in range(5):
        o1.zero_grad()
        l1 = F.cross_entropy(m1(xb), yb)
        l1.backward()
        o1.step()
        o2.zero_grad()
        l2 = F.cross_entropy(cm(xb), yb)
        l2.backward()
        o2.step()
        assert l1.item() == pytest.approx(l2.item(), rel=1e-6, abs=1e-7)
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        close(p1, p2)
    assert len(entries(cm)) == 1 and entries(cm)[0].eager_reason is None


def test_aot_eager_grads_of_a_function_with_no_grad_and_buffers():
    bn = nn.BatchNorm1d(4)
    bn2 = nn.BatchNorm1d(4)
    bn2.load_state_dict(bn.state_dict())
    w1 = ember.randn(4, 4, requires_grad=True)
    w2 = w1.detach().clone().requires_grad_()

    def f(bn, x, w):
        h = bn(x @ w)
        with ember.no_grad():
            s = h.abs().max()
        return (h / s).tanh().sum()
    c = ember.compile(f, backend="aot_eager")
    x = ember.randn(6, 4)
    l1 = f(bn, x, w1)
    l2 = c(bn2, x, w2)
    l1.backward()
    l2.backward()
    close(l1, l2)
    close(w1.grad, w2.grad)
    close(bn.running_mean, bn2.running_mean)  # mutated buffers written back
    close(bn.weight.grad, bn2.weight.grad)


def test_workloads_mlp_train_step_compiled():
    """The workloads' mlp_train step (Sequential MLP, AdamW, cross_entropy), smaller batch."""
    def make():
        ember.manual_seed(0)
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                             nn.Linear(512, 10))
    ref, model = make(), make()
    cm = ember.compile(model, backend="aot_eager")
    opts = [ember.optim.AdamW(m.parameters(), lr=1e-3) for m in (ref, model)]
    xb, yb = ember.randn(16, 784), ember.randint(0, 10, (16,))
    for _ in range(3):
        losses = []
        for m, opt in zip((ref, cm), opts):
            opt.zero_grad()
            loss = F.cross_entropy(m(xb), yb)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[0] == pytest.approx(losses[1], rel=1e-6)


def _train_equal(make, batch, steps=3, opt=ember.optim.AdamW, **okw):
    ref, model = make(), make()
    cm = ember.compile(model, backend="aot_eager")
    opts = [opt(m.parameters(), **okw) for m in (ref, model)]
    for _ in range(steps):
        losses = []
        for m, o in zip((ref, cm), opts):
            o.zero_grad()
            loss = m(*batch) if len(batch) == 2 and batch[0] is batch[1] else \
                F.cross_entropy(m(batch[0]), batch[1])
            loss.backward()
            o.step()
            losses.append(loss.item())
        assert losses[0] == pytest.approx(losses[1], rel=1e-6)
    assert len(entries(cm)) == 1 and entries(cm)[0].eager_reason is None


def _gpt(vocab, block, n_layer, n_head, n_embd):
    """/work/shared/bench/workloads.py's nanoGPT-style model, as written there."""
    import math

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
            self.qkv, self.proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
            self.fc, self.out = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(n_embd, dim=2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = ember.tril(ember.ones(T, T, device=x.device)) == 0
            att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, n_embd), nn.Embedding(block, n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln, self.head = nn.LayerNorm(n_embd), nn.Linear(n_embd, vocab, bias=False)

        def forward(self, idx, targets):
            T = idx.shape[1]
            x = self.tok(idx) + self.pos(ember.arange(T, device=idx.device))
            for b in self.blocks:
                x = b(x)
            logits = self.head(self.ln(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
    return GPT()


def test_workloads_gpt_train_step_compiled():
    """The workloads' GPT (ModuleList loop, shape unpacking, math.sqrt of sizes, tril mask,
    masked_fill, split) at a small size: losses equal eager's."""
    def make():
        ember.manual_seed(0)
        return _gpt(vocab=65, block=16, n_layer=2, n_head=2, n_embd=32)
    idx = ember.randint(0, 65, (4, 16))
    _train_equal(make, (idx, idx), lr=3e-4)


def test_workloads_cnn_train_step_compiled():
    def make():
        ember.manual_seed(0)
        return nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Conv2d(4, 8, 3), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(200, 16), nn.ReLU(),
                             nn.Linear(16, 10))
    batch = (ember.randn(4, 1, 14, 14), ember.randint(0, 10, (4,)))
    _train_equal(make, batch, opt=ember.optim.SGD, lr=0.01, momentum=0.9)


def test_partitioner_recomputes_views_and_pointwise_in_backward():
    m = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
    cm = ember.compile(m, backend="aot_eager")
    x = ember.randn(4, 6)
    cm(x).sum().backward()
    run = entries(cm)[0].compiled
    fwd_ops = [n.target.name for n in run.forward_graph.graph.nodes if n.op == "call_function"]
    # the forward computes only what its output needs; the relu mask and the transposes the
    # backward uses are recomputed there from the saved relu output and weights
    assert "gt" not in fwd_ops and "transpose" not in fwd_ops
    assert run.n_saved <= 3
    g = [p.grad.clone() for p in m.parameters()]
    for p in m.parameters():
        p.grad = None
    m(x).sum().backward()
    for a, p in zip(g, m.parameters()):
        close(a, p.grad)


class Ckpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 3)

    def forward(self, x, log):
        from ember.utils.checkpoint import checkpoint
        h = checkpoint(self.inner, x, use_reentrant=False)
        log.append(1)                      # a break between two compiled graphs
        return self.b(h)

    def inner(self, t):
        return self.a(t).tanh()


def test_training_through_checkpoint_and_a_graph_break():
    ma, mb = Ckpt(), Ckpt()
    mb.load_state_dict(ma.state_dict())
    cm = ember.compile(mb, backend="aot_eager")
    la, lb = [], []
    for _ in range(2):
        ma(X, la).pow(2).sum().backward()
        cm(X, lb).pow(2).sum().backward()
    assert la == lb == [1, 1]
    for p, q in zip(ma.parameters(), mb.parameters()):
        close(p.grad, q.grad)
    ex = dynamo.explain(mb)(X, [])
    assert ex.graph_count == 2 and ex.graph_break_count == 1


def test_reading_grad_of_an_input():
    w = ember.randn(4, requires_grad=True)
    (w * 2).sum().backward()
    c = ember.compile(lambda w: w - 0.1 * w.grad, backend="eager", fullgraph=True)
    close(c(w), w - 0.1 * w.grad)


def test_dropout_training_draws_what_eager_draws():
    def make():
        ember.manual_seed(0)
        return nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.5), nn.ReLU(), nn.Linear(8, 2))
    m1, m2 = make(), make()
    cm = ember.compile(m2, backend="aot_eager")
    x = ember.randn(5, 6)
    for _ in range(3):
        ember.manual_seed(7)
        l1 = m1(x).pow(2).sum()
        l1.backward()
        ember.manual_seed(7)
        l2 = cm(x).pow(2).sum()
        l2.backward()
        close(l1, l2)
    for p, q in zip(m1.parameters(), m2.parameters()):
        close(p.grad, q.grad)


def test_resume_in_a_frame_with_cells():
    from ember.utils.checkpoint import checkpoint

    def f(x, k):
        scale = 3.0
        h = checkpoint(lambda t: t * scale + k, x, use_reentrant=False)  # cells: scale, k
        print("between")
        scale = scale + 1.0
        return (lambda t: t * scale * k)(h)

    be = Counter()
    c = ember.compile(f, backend=be)
    close(c(X, 2.0), f(X, 2.0))
    close(c(X, 2.0), f(X, 2.0))
    e = entries(c)[0]
    assert e.eager_reason is None and e.spec[0] == "resume" and len(be.graphs) == 2


# ---- nanoGPT (karpathy/nanoGPT's model.py, trimmed): its Python control flow under compile ----
@dataclasses.dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 50
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32
    dropout: float = 0.1
    bias: bool = True

class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(ember.ones(ndim))
        self.bias = nn.Parameter(ember.zeros(ndim)) if bias else None
    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.flash = hasattr(ember.nn.functional, 'scaled_dot_product_attention')
        n = config.block_size
        self.register_buffer("bias", ember.tril(ember.ones(n, n)).view(1, 1, n, n))
    def forward(self, x):
        B, T, C = x.size()
        q, k, v  = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = ember.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0,
                is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:,:,:T,:T] == 0, float('-inf'))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.resid_dropout(self.c_proj(y))
        return y

class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc    = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu    = nn.GELU()
        self.c_proj  = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)
    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

class NanoBlock(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)
    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x

class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte = nn.Embedding(config.vocab_size, config.n_embd),
            wpe = nn.Embedding(config.block_size, config.n_embd),
            drop = nn.Dropout(config.dropout),
            h = nn.ModuleList([NanoBlock(config) for _ in range(config.n_layer)]),
            ln_f = LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.config.block_size, f"Cannot forward sequence of length {t}"
        pos = ember.arange(0, t, dtype=ember.long, device=device)
        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
        else:
            logits = self.lm_head(x[:, [-1], :])
            loss = None
        return logits, loss


def test_nanogpt_train_loop_equals_eager():
    def make():
        ember.manual_seed(0)
        return GPT(GPTConfig())
    m1, m2 = make(), make()
    cm = ember.compile(m2, backend="aot_eager")
    o1 = ember.optim.AdamW(m1.parameters(), lr=1e-3)
    o2 = ember.optim.AdamW(m2.parameters(), lr=1e-3)
    xb, yb = ember.randint(0, 50, (4, 16)), ember.randint(0, 50, (4, 16))
    for s in range(3):
        losses = []
        for m, o in ((m1, o1), (cm, o2)):
            ember.manual_seed(s)            # dropout masks: the same draws
            o.zero_grad()
            _, loss = m(xb, yb)
            loss.backward()
            o.step()
            losses.append(loss.item())
        assert losses[0] == pytest.approx(losses[1], rel=1e-6)
    m1.eval()
    m2.eval()
    with ember.no_grad():
        close(cm(xb)[0], m1(xb)[0])
    assert dynamo.explain(m2)(xb, yb).graph_break_count == 0


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_inplace_write_to_a_saved_output_raises_at_backward(backend):
    # softmax's output is returned and saved for backward (one tensor, stored once by
    # inductor): writing to it in place makes backward raise, as in eager and torch.compile
    def f(a):
        return F.softmax(a * 2, -1)
    x = ember.randn(3, 5, requires_grad=True)
    y = ember.compile(f, backend=backend)(x)
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    x.grad = None
    y = ember.compile(f, backend=backend)(x)    # untouched: gradients as eager's
    y.sum().backward()
    g = x.grad.clone()
    x.grad = None
    f(x).sum().backward()
    close(g, x.grad)
