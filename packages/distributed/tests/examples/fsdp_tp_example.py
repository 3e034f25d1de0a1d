"""2-D parallel training (FSDP over "dp", tensor + sequence parallel over "tp") of a small
Llama-style model, in the style of PyTorch's fsdp_tp_example, written for `torch` and run here
with `import ember as torch`:

    python -m ember.distributed.run --nproc-per-node 4 fsdp_tp_example.py [--tp-size 2]

The mesh is (world / tp, tp). Each dp rank takes its rows of one global batch (its tp ranks the
same rows), so rank 0 prints `LOSS <iter> <loss>` equal for any world size (1 process: a 1 x 1
mesh)."""
import argparse
import os

from llama_model import ModelArgs, Transformer

import ember as torch
import ember.distributed as dist
import ember.nn.functional as F
from ember.distributed.device_mesh import init_device_mesh
from ember.distributed.fsdp import fully_shard
from ember.distributed.tensor import Replicate, Shard
from ember.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


def main(args):
    world_size = int(os.environ["WORLD_SIZE"])
    tp_size = min(args.tp_size, world_size)
    assert world_size % tp_size == 0, f"world size {world_size} not divisible by TP {tp_size}"
    dp_size = world_size // tp_size
    device_mesh = init_device_mesh("cpu", (dp_size, tp_size), mesh_dim_names=("dp", "tp"))
    tp_mesh, dp_mesh = device_mesh["tp"], device_mesh["dp"]
    dp_rank = dp_mesh.get_local_rank()

    torch.manual_seed(0)
    model_args = ModelArgs()
    model = Transformer(model_args)

    model = parallelize_module(model, tp_mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    })
    for block in model.layers:
        layer_tp_plan = {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1), None),
                                            desired_input_layouts=(Replicate(), None)),
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),),
                                               desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
            "feed_forward.w3": ColwiseParallel(),
        }
        # each tp rank computes its share of the heads
        block.attention.n_heads = block.attention.n_heads // tp_mesh.size()
        block.attention.n_kv_heads = block.attention.n_kv_heads // tp_mesh.size()
        parallelize_module(block, tp_mesh, layer_tp_plan)

    for block in model.layers:
        fully_shard(block, mesh=dp_mesh)
    sharded_model = fully_shard(model, mesh=dp_mesh)

    optimizer = torch.optim.AdamW(sharded_model.parameters(), lr=3e-3, foreach=True)
    global_batch, seq_len = 4, 8
    rows = global_batch // dp_size
    for i in range(args.iters):
        torch.manual_seed(i)  # the same global batch everywhere; each dp rank takes its rows
        tokens = torch.randint(model_args.vocab_size, (global_batch, seq_len + 1))
        tokens = tokens[dp_rank * rows:(dp_rank + 1) * rows]
        inp, target = tokens[:, :-1], tokens[:, 1:]
        output = sharded_model(inp)
        loss = F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total = loss.detach().clone()
        dist.all_reduce(total, group=dp_mesh.get_group())
        if dist.get_rank() == 0:
            print(f"LOSS {i} {total.item() / dp_size:.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="FSDP + TP example")
    parser.add_argument("--tp-size", type=int, default=2)
    parser.add_argument("--iters", type=int, default=3)
    main(parser.parse_args())
