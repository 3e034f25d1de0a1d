"""Train a small character-level GPT with ember on Python's own standard-library sources.

    python examples/train_gpt.py                 # ~2 minutes on 2 CPU cores (600 steps or
                                                 # --time-budget seconds, whichever comes first)
    python examples/train_gpt.py --resume        # continue from the saved checkpoint

Writes out/gpt.pt (checkpoint: model, optimizer, step, losses), out/loss.png (train and
validation loss curves, by matplotlib; a plain PNG without it) and prints a generated sample.
Progress shows with tqdm (a text bar without it). Uses CUDA when ember-devices finds a GPU.
The model code is plain PyTorch-API code: it also runs with `--impl torch` for a side-by-side
check.
"""
from __future__ import annotations

import argparse
import glob
import importlib
import math
import os
import sys
import sysconfig
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _plot import plot_losses, progress  # noqa: E402


def load_text(max_chars: int) -> str:
    """Python's standard library sources: text every machine with Python has."""
    lib = sysconfig.get_paths()["stdlib"]
    parts, total = [], 0
    for path in sorted(glob.glob(os.path.join(lib, "*.py"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            s = f.read()
        parts.append(s)
        total += len(s)
        if total >= max_chars:
            break
    return "".join(parts)[:max_chars]


def build(torch, vocab: int, block: int, n_layer: int, n_head: int, n_embd: int, dropout: float):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
            self.attn = nn.Linear(n_embd, 3 * n_embd)
            self.proj = nn.Linear(n_embd, n_embd)
            self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                     nn.Linear(4 * n_embd, n_embd), nn.Dropout(dropout))

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.attn(self.ln1(x)).split(n_embd, dim=2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)  # (B, nh, T, hs)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.proj(y)
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, n_embd)
            self.pos = nn.Embedding(block, n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln = nn.LayerNorm(n_embd)
            self.head = nn.Linear(n_embd, vocab, bias=False)

        def forward(self, idx, targets=None):
            T = idx.shape[1]
            x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))  # (B, T, C)
            for b in self.blocks:
                x = b(x)
            logits = self.head(self.ln(x))  # (B, T, vocab)
            if targets is None:
                return logits
            return F.cross_entropy(logits.view(-1, vocab), targets.view(-1))

    return GPT()


def generate(torch, model, idx, n: int, block: int, temperature: float = 0.8):
    model.eval()
    with torch.no_grad():
        for _ in range(n):
            logits = model(idx[:, -block:])[:, -1, :] / temperature
            probs = torch.nn.functional.softmax(logits, dim=-1)
            idx = torch.cat([idx, torch.multinomial(probs, 1)], dim=1)
    model.train()
    return idx


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", default="ember", help="ember (default) or torch, for comparison")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--time-budget", type=float, default=110.0, help="seconds of training")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--embd", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--out", default=os.path.join(os.getcwd(), "out"))
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--device", default=None)
    ap.add_argument("--eval-every", type=int, default=50, help="steps between validation losses")
    args = ap.parse_args()

    torch = importlib.import_module(args.impl)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(1337)
    text = load_text(400_000)
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    split = int(0.9 * len(data))
    train, val = data[:split], data[split:]
    print(f"{args.impl} on {device}: {len(text):,} characters of stdlib source, "
          f"vocab {len(chars)}")

    model = build(torch, len(chars), args.block, args.layers, args.heads, args.embd, 0.0)
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps,
                                                       eta_min=args.lr / 10)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"model: {nparams / 1e3:.0f}k parameters")

    os.makedirs(args.out, exist_ok=True)
    ckpt_path = os.path.join(args.out, "gpt.pt")
    step, losses, val_losses = 0, [], []
    if args.resume and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path, map_location=device)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
        sched.load_state_dict(ck["sched"])
        step, losses = ck["step"], list(ck["losses"])
        val_losses = [tuple(p) for p in ck.get("val_losses", [])]
        print(f"resumed from {ckpt_path} at step {step}")

    def batch(src):
        ix = torch.randint(0, len(src) - args.block - 1, (args.batch,))
        x = torch.stack([src[i:i + args.block] for i in ix.tolist()])
        y = torch.stack([src[i + 1:i + 1 + args.block] for i in ix.tolist()])
        return x.to(device), y.to(device)

    def val_loss() -> float:
        g = torch.Generator().manual_seed(step)  # the same val batches at every point
        with torch.no_grad():
            total = 0.0
            for _ in range(4):
                ix = torch.randint(0, len(val) - args.block - 1, (args.batch,), generator=g)
                vx = torch.stack([val[i:i + args.block] for i in ix.tolist()]).to(device)
                vy = torch.stack([val[i + 1:i + 1 + args.block] for i in ix.tolist()]).to(device)
                total += model(vx, vy).item()
        return total / 4

    start = evaled = time.perf_counter()
    tokens = 0
    first = step
    bar = progress(args.steps, step)
    while step < args.steps and time.perf_counter() - start < args.time_budget:
        x, y = batch(train)
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        tokens += x.numel()
        losses.append(loss.item())
        # every --eval-every steps, and at least a dozen times in the time budget on slow machines
        if step % args.eval_every == 0 or time.perf_counter() - evaled > args.time_budget / 12:
            val_losses.append((step, val_loss()))
            evaled = time.perf_counter()
        bar.update(1, loss=sum(losses[-10:]) / len(losses[-10:]),
                   tok_s=tokens / (time.perf_counter() - start))
    bar.close()
    if not val_losses or val_losses[-1][0] != step:
        val_losses.append((step, val_loss()))
    print(f"trained {step - first} steps in {time.perf_counter() - start:.1f}s; "
          f"train loss {losses[0] if not first else losses[first]:.3f} -> "
          f"{sum(losses[-10:]) / len(losses[-10:]):.3f}, val loss {val_losses[-1][1]:.3f} "
          f"(uniform guess: {math.log(len(chars)):.3f})")

    torch.save({"model": model.state_dict(), "optim": opt.state_dict(),
                "sched": sched.state_dict(), "step": step, "losses": losses,
                "val_losses": val_losses, "chars": "".join(chars)}, ckpt_path)
    png = os.path.join(args.out, "loss.png")
    how = plot_losses(losses, val_losses, png, baseline=math.log(len(chars)))
    print(f"saved {ckpt_path} and {png} ({how})")

    ctx = torch.tensor([[stoi["d"], stoi["e"], stoi["f"], stoi[" "]]], device=device)
    out = generate(torch, model, ctx, 200, args.block)[0].tolist()
    print("sample:\n" + "".join(chars[i] for i in out))


if __name__ == "__main__":
    main()
