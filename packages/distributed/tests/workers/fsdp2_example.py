"""A PyTorch-style FSDP2 training script run with `import ember as torch` (written after the
pattern of PyTorch's FSDP2 example: a model built on the meta device, fully_shard per block
then the root, to_empty + init, AdamW, a distributed checkpoint, a full state dict).

    python -m ember.distributed.run --nproc-per-node 2 fsdp2_example.py CKPT_DIR [--mixed-precision]

Every rank takes its slice of one global batch, so the printed losses do not depend on the
world size."""
import sys

import ember as torch
import ember.distributed as dist
import ember.distributed.checkpoint as dcp
import ember.nn as nn
import ember.nn.functional as F
from ember.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from ember.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

DIM, HEADS, LAYERS, VOCAB, SEQ, BATCH = 16, 2, 2, 32, 8, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
        self.fc1, self.fc2 = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(C, dim=-1)
        q, k, v = (t.view(B, T, HEADS, C // HEADS).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, C))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        x = self.tok(idx)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))

    def reset_parameters(self):
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
            if isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)


def main():
    ckpt, mixed = sys.argv[1], "--mixed-precision" in sys.argv
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    with torch.device("meta"):
        model = Transformer()
    kw = {"mp_policy": MixedPrecisionPolicy(param_dtype=torch.float64,
                                            reduce_dtype=torch.float64)} if mixed else {}
    for layer in model.layers:
        fully_shard(layer, **kw)
    fully_shard(model, **kw)
    assert isinstance(model, FSDPModule)
    model.layers[0].set_modules_to_forward_prefetch([model.layers[1]])
    model.to_empty(device="cpu")
    model.reset_parameters()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    rows = BATCH // world
    for step in range(3):
        g = torch.Generator().manual_seed(step)
        idx = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
        x, y = idx[rank * rows:(rank + 1) * rows, :-1], idx[rank * rows:(rank + 1) * rows, 1:]
        loss = F.cross_entropy(model(x).reshape(-1, VOCAB).float(), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        total = loss.detach().clone()
        dist.all_reduce(total)
        if rank == 0:
            print(f"LOSS {step} {total.item() / world:.6f}", flush=True)
    dcp.save({"model": model.state_dict()}, checkpoint_id=ckpt)
    fresh = Transformer()
    for layer in fresh.layers:
        fully_shard(layer)
    fully_shard(fresh)
    sd = {"model": fresh.state_dict()}
    dcp.load(sd, checkpoint_id=ckpt)
    fresh.load_state_dict(sd["model"])
    full = get_model_state_dict(fresh, options=StateDictOptions(full_state_dict=True))
    ref = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
    bad = [k for k in ref if not bool((full[k] == ref[k]).all())]
    assert not bad, [(k, float((full[k] - ref[k]).abs().max())) for k in bad]
    if rank == 0:
        print(f"CHECKSUM {sum(float(v.double().sum()) for v in full.values()):.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
