"""Worker (mpiexec, 2 ranks, EMBER_CUDA_FAKE=1 + TRITON_INTERPRET=1, the nccl4py stand-in of
workers/fake_nccl on PYTHONPATH): a "cpu:gloo,cuda:nccl" group sends cuda tensors through the NCCL
engine and cpu tensors through MPI; each result against numpy.
With EMBER_REAL_NCCL=1 (gpu_nccl_check.py on a GPU machine): backend "nccl", real nccl4py."""
import os

import numpy as np
from worker_check import check as _check
from worker_check import finish

import ember
import ember.distributed as dist

REAL = os.environ.get("EMBER_REAL_NCCL") == "1"
if REAL:
    ember.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
dist.init_process_group("nccl" if REAL else "cpu:gloo,cuda:nccl")
R, N = dist.get_rank(), dist.get_world_size()


check = _check(R)


def data(rank, shape, salt=0):
    return (np.random.default_rng(100 * salt + rank).random(shape) * 4 - 2).astype(np.float32)


def cuda(a, dtype=None):
    t = ember.tensor(a).to("cuda")
    return t.to(getattr(ember, dtype)) if dtype else t


def close(t, ref, tol=1e-5):
    assert t.device.type == "cuda", t.device
    got = t.cpu().float().numpy()
    np.testing.assert_allclose(got, np.asarray(ref, np.float32), rtol=tol, atol=tol)


@check
def all_reduce_sum_avg_max_bf16():
    ins = [data(r, (5,), 1) for r in range(N)]
    for op, ref in [("SUM", np.sum(ins, 0)), ("AVG", np.mean(ins, 0)), ("MAX", np.max(ins, 0))]:
        t = cuda(ins[R])
        dist.all_reduce(t, getattr(dist.ReduceOp, op))
        close(t, ref)
    t = cuda(ins[R], "bfloat16")
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    close(t, np.sum([ember.tensor(a).bfloat16().float().numpy() for a in ins], 0), tol=2e-2)
    if not REAL:
        from nccl.bindings import nccl as fake
        assert "all_reduce" in fake.CALLS
    try:
        dist.all_reduce(cuda(ins[R]), dist.ReduceOp.BXOR)
    except RuntimeError as e:
        assert "BXOR" in str(e) and "NCCL" in str(e), e
    else:
        raise AssertionError("no error")


@check
def broadcast_reduce():
    ins = [data(r, (2, 3), 2) for r in range(N)]
    t = cuda(ins[R])
    dist.broadcast(t, src=N - 1)
    close(t, ins[N - 1])
    t = cuda(ins[R])
    dist.reduce(t, dst=0)
    close(t, np.sum(ins, 0) if R == 0 else ins[R])


@check
def gathers_and_scatters():
    ins = [data(r, (r + 1,), 3) for r in range(N)]
    outs = [ember.zeros(r + 1, device="cuda") for r in range(N)]
    dist.all_gather(outs, cuda(ins[R]))
    for o, ref in zip(outs, ins):
        close(o, ref)
    flat = [data(r, (2 * N,), 4) for r in range(N)]
    out = ember.zeros(2, device="cuda")
    dist.reduce_scatter_tensor(out, cuda(flat[R]))
    close(out, np.sum(flat, 0)[2 * R:2 * R + 2])
    out = ember.zeros(2 * N, device="cuda")
    dist.all_gather_into_tensor(out, cuda(flat[R][:2]))
    close(out, np.concatenate([f[:2] for f in flat]))
    out = ember.zeros(2 * N, device="cuda")
    dist.all_to_all_single(out, cuda(flat[R]))
    close(out, np.concatenate([flat[s][2 * R:2 * R + 2] for s in range(N)]))
    g = [ember.zeros(2, device="cuda") for _ in range(N)] if R == 0 else None
    dist.gather(cuda(flat[R][:2]), g, dst=0)
    if R == 0:
        for o, f in zip(g, flat):
            close(o, f[:2])
    t = ember.zeros(2, device="cuda")
    dist.scatter(t, [cuda(flat[0][2 * i:2 * i + 2]) for i in range(N)] if R == 0 else None, 0)
    close(t, flat[0][2 * R:2 * R + 2])


@check
def p2p_and_barrier():
    t = cuda(data(R, (3,), 5))
    if N == 1:
        pass
    elif R == 0:
        dist.send(t, 1)
    else:
        got = ember.zeros(3, device="cuda")
        assert dist.recv(got, 0) == 0
        close(got, data(0, (3,), 5))
    dist.barrier()


def cpu_tensors_still_use_mpi():
    t = ember.full((2,), float(R + 1))
    dist.all_reduce(t)
    assert t.device.type == "cpu" and t.tolist() == [3.0, 3.0]


if not REAL:
    check(cpu_tensors_still_use_mpi)


finish(R)
