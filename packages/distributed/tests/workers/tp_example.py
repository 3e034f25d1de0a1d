"""A PyTorch-style tensor-parallel script run with `import ember as torch` (after the pattern of
PyTorch's tensor/sequence parallel examples: a ToyModel, parallelize_module with Colwise/Rowwise
plans, AdamW(foreach=True)); prints a checksum per step that does not depend on the world size.

    python -m ember.distributed.run --nproc-per-node 2 tp_example.py"""
import ember as torch
import ember.distributed as dist
import ember.nn as nn
from ember.distributed.device_mesh import init_device_mesh
from ember.distributed.tensor import Shard
from ember.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.in_proj = nn.Linear(10, 32)
        self.relu = nn.ReLU()
        self.out_proj = nn.Linear(32, 5)

    def forward(self, x):
        return self.out_proj(self.relu(self.in_proj(x)))


def train(model, rank, world, sequence_parallel):
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.25, foreach=True)
    for i in range(3):
        torch.manual_seed(i)
        inp = torch.rand(8, 10)
        if sequence_parallel:  # each rank feeds its rows and gets its rows back
            rows = 8 // world
            inp = inp[rank * rows:(rank + 1) * rows]
        output = model(inp)
        output.sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        total = output.detach().sum()
        if sequence_parallel:
            dist.all_reduce(total)
        if rank == 0:
            print(f"STEP {'sp' if sequence_parallel else 'tp'} {i} {total.item():.5f}", flush=True)


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    tp_model = parallelize_module(ToyModel(), mesh, {"in_proj": ColwiseParallel(),
                                                     "out_proj": RowwiseParallel()})
    train(tp_model, rank, world, False)
    torch.manual_seed(0)
    sp_model = parallelize_module(ToyModel(), mesh, {
        "in_proj": ColwiseParallel(input_layouts=Shard(0)),
        "out_proj": RowwiseParallel(output_layouts=Shard(0))})
    train(sp_model, rank, world, True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
