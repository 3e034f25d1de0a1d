"""Worker for gpu_nccl_check.py (one process per GPU, RANK/WORLD_SIZE/MASTER_* set, real
nccl4py): DTensor ops and redistribution, tensor parallel and fully_shard on cuda tensors over
NCCL, each against the same computation in one process. With EMBER_REAL_NCCL unset it runs on
the fake cuda device and the nccl4py stand-in (slow: Triton's interpreter; a smoke run only)."""
import copy
import os

import numpy as np
from worker_check import check, finish

import ember
import ember.distributed as dist
import ember.nn as nn
from ember.distributed.fsdp import fully_shard
from ember.distributed.tensor import (
    DTensor,
    Partial,
    Replicate,
    Shard,
    distribute_tensor,
    init_device_mesh,
)
from ember.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

REAL = os.environ.get("EMBER_REAL_NCCL") == "1"
if REAL:
    ember.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
dist.init_process_group("nccl" if REAL else "cpu:gloo,cuda:nccl")
R, N = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cuda", (N,))


def cuda(t):
    return t.to("cuda")


def close(got, want, tol=1e-4):
    if isinstance(got, DTensor):
        got = got.full_tensor()
    assert got.device.type == "cuda", got.device
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().cpu().numpy(),
                               rtol=tol, atol=tol)


@check(R)
def dtensor_matmul_and_redistribute():
    ember.manual_seed(0)
    A, B = cuda(ember.randn(5, 4)), cuda(ember.randn(4, 3))
    for pa, pb in [(Shard(0), Replicate()), (Shard(1), Shard(0)), (Replicate(), Shard(1))]:
        c = distribute_tensor(A, mesh, [pa]) @ distribute_tensor(B, mesh, [pb])
        close(c, A @ B)
        for p in (Shard(0), Shard(1), Replicate()):
            close(c.redistribute(mesh, [p]), A @ B)
    d = distribute_tensor(A, mesh, [Shard(0)]).requires_grad_()
    (d.softmax(-1) * 2).sum().backward()
    ref = A.clone().requires_grad_()
    (ref.softmax(-1) * 2).sum().backward()
    close(d.grad, ref.grad)
    p = DTensor.from_local(cuda(ember.ones(3)) * (R + 1), mesh, [Partial()])
    close(p, cuda(ember.full((3,), float(N * (N + 1) // 2))))


@check(R)
def tensor_parallel_mlp():
    ember.manual_seed(1)
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8)).to("cuda")
    ref = copy.deepcopy(m)
    x = cuda(ember.randn(3, 8))
    tp = parallelize_module(m, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    xr, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
    y_ref, y = ref(xr), tp(xt)
    close(y, y_ref)
    y_ref.square().sum().backward()
    y.square().sum().backward()
    close(xt.grad, xr.grad)
    for p, q in zip(tp.parameters(), ref.parameters()):
        close(p.grad, q.grad)


@check(R)
def fully_shard_training():
    def make():
        ember.manual_seed(2)
        return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3)).to("cuda")
    ref, model = make(), make()
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    o_ref = ember.optim.SGD(ref.parameters(), lr=0.1)
    o = ember.optim.SGD(model.parameters(), lr=0.1)
    g = ember.Generator().manual_seed(5)
    x, y = cuda(ember.randn(2 * N, 6, generator=g)), cuda(ember.randn(2 * N, 3, generator=g))
    for _ in range(2):
        o_ref.zero_grad()
        nn.functional.mse_loss(ref(x), y).backward()
        o_ref.step()
        o.zero_grad()
        nn.functional.mse_loss(model(x[2 * R:2 * R + 2]), y[2 * R:2 * R + 2]).backward()
        o.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        close(p, q)


@check(R)
def fully_shard_cpu_offload():
    """CPUOffloadPolicy: the shards and their gradients live on the host (the optimizer steps
    there), the all-gathers and reduce-scatters run on cuda; training equals one process."""
    from ember.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy

    def make():
        ember.manual_seed(2)
        return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3)).to("cuda")
    ref, model = make(), make()
    policy = CPUOffloadPolicy()
    assert isinstance(policy, OffloadPolicy) and policy.pin_memory is True
    fully_shard(model[0], mesh=mesh, offload_policy=policy)
    fully_shard(model, mesh=mesh, offload_policy=policy)
    for p in model.parameters():
        assert p.device.type == "cpu" and p._local_tensor.device.type == "cpu", p.device
    o_ref = ember.optim.SGD(ref.parameters(), lr=0.1)
    o = ember.optim.SGD(model.parameters(), lr=0.1)
    g = ember.Generator().manual_seed(5)
    x, y = cuda(ember.randn(2 * N, 6, generator=g)), cuda(ember.randn(2 * N, 3, generator=g))
    for _ in range(2):
        o_ref.zero_grad()
        nn.functional.mse_loss(ref(x), y).backward()
        o_ref.step()
        o.zero_grad()
        out = model(x[2 * R:2 * R + 2])
        assert out.device.type == "cuda", out.device
        nn.functional.mse_loss(out, y[2 * R:2 * R + 2]).backward()
        for p in model.parameters():
            assert p.grad._local_tensor.device.type == "cpu", p.grad.device
        o.step()
    # each rank's host shard against its rows of the reference (dim 0 in torch.chunk's pieces);
    # full_tensor() would all-gather host tensors, which an NCCL-only group refuses (as torch)
    for p, q in zip(model.parameters(), ref.parameters()):
        local = p.to_local()
        assert local.device.type == "cpu", local.device
        pieces = q.detach().cpu().chunk(N, 0)
        want = pieces[R].numpy() if R < len(pieces) else np.zeros((0, *q.shape[1:]), "float32")
        np.testing.assert_allclose(local.detach().numpy(), want, rtol=1e-4, atol=1e-4)


finish(R)
