"""Worker (mpiexec, 4 ranks): fully_shard on a 2x2 mesh (HSDP: replicate x shard) trains like
one process on the whole batch; parameters are (Replicate(), Shard(0)) DTensors."""
import numpy as np
from worker_check import check, finish

import ember
import ember.distributed as dist
import ember.nn as nn
from ember.distributed.fsdp import fully_shard
from ember.distributed.tensor import Replicate, Shard, init_device_mesh

dist.init_process_group("gloo")
R, N = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (2, N // 2), mesh_dim_names=("replicate", "shard"))


def make_model():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))


@check(R)
def hsdp_training_equals_single_process():
    ref, model = make_model(), make_model()
    fully_shard(model[0], mesh=mesh)
    fully_shard(model[2], mesh=mesh)
    fully_shard(model, mesh=mesh)
    w = model[0].weight
    assert w.placements == (Replicate(), Shard(0)), w.placements
    o_ref = ember.optim.Adam(ref.parameters(), lr=0.02)
    o = ember.optim.Adam(model.parameters(), lr=0.02)
    for step in range(3):
        g = ember.Generator().manual_seed(10 + step)
        x, y = ember.randn(2 * N, 6, generator=g), ember.randn(2 * N, 3, generator=g)
        o_ref.zero_grad()
        nn.functional.mse_loss(ref(x), y).backward()
        o_ref.step()
        o.zero_grad()
        nn.functional.mse_loss(model(x[2 * R:2 * R + 2]), y[2 * R:2 * R + 2]).backward()
        o.step()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        np.testing.assert_allclose(p.full_tensor().detach().numpy(), q.detach().numpy(),
                                   rtol=1e-5, atol=1e-6, err_msg=name)


finish(R)
