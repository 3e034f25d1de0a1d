"""Tensor parallel (Megatron-style: column- then row-parallel Linear) and sequence parallel
training of a toy MLP, in the style of PyTorch's tensor_parallel_example and
sequence_parallel_example, written for `torch` and run here with `import ember as torch`:

    python -m ember.distributed.run --nproc-per-node 2 tensor_parallel_example.py \
        [--sequence-parallel]

TP: every rank feeds the same input. SP: each rank feeds its rows of one input, and the output
stays sharded by rows. Rank 0 prints `LOSS <iter> <sum of the whole output>`, equal for any
world size."""
import argparse
import os

import ember as torch
import ember.distributed as dist
import ember.nn as nn
from ember.distributed.device_mesh import init_device_mesh
from ember.distributed.tensor import Shard
from ember.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class ToyModel(nn.Module):
    """MLP based model"""

    def __init__(self):
        super().__init__()
        self.in_proj = nn.Linear(10, 32)
        self.relu = nn.ReLU()
        self.out_proj = nn.Linear(32, 5)

    def forward(self, x):
        return self.out_proj(self.relu(self.in_proj(x)))


def main(args):
    device_mesh = init_device_mesh(device_type="cpu", mesh_shape=(int(os.environ["WORLD_SIZE"]),))
    rank, world = device_mesh.get_rank(), device_mesh.size()
    torch.manual_seed(0)
    model = ToyModel()
    if args.sequence_parallel:
        plan = {"in_proj": ColwiseParallel(input_layouts=Shard(0)),
                "out_proj": RowwiseParallel(output_layouts=Shard(0))}
    else:
        plan = {"in_proj": ColwiseParallel(), "out_proj": RowwiseParallel()}
    model = parallelize_module(module=model, device_mesh=device_mesh, parallelize_plan=plan)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.25, foreach=True)
    for i in range(args.iters):
        torch.manual_seed(i)  # mimics a data loader: the same input on every rank
        inp = torch.rand(20, 10)
        if args.sequence_parallel:
            rows = 20 // world
            inp = inp[rank * rows:(rank + 1) * rows]
        output = model(inp)
        output.sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        total = output.detach().sum()
        if args.sequence_parallel:
            dist.all_reduce(total)
        if rank == 0:
            print(f"LOSS {i} {total.item():.5f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="TP / SP example")
    parser.add_argument("--sequence-parallel", action="store_true")
    parser.add_argument("--iters", type=int, default=3)
    main(parser.parse_args())
