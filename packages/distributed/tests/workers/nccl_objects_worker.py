"""Worker (mpiexec, 2 ranks, EMBER_CUDA_FAKE=1 + TRITON_INTERPRET=1, workers/fake_nccl on
PYTHONPATH): a group with backend "nccl" only (as PyTorch's CUDA scripts make) has no CPU engine,
so the *_object collectives and barrier travel over the current CUDA device."""
from worker_check import check, finish

import ember
import ember.distributed as dist

dist.init_process_group("nccl")
R = dist.get_rank()


@check(R)
def cpu_tensor_collective_is_refused():
    try:
        dist.all_reduce(ember.ones(2))
    except RuntimeError as e:
        assert "no backend type associated with device type cpu" in str(e), e
    else:
        raise AssertionError("a cpu all_reduce on an nccl group did not raise")


@check(R)
def broadcast_object_list_over_cuda():
    objs = [{"step": 3, "lr": 0.1}, [1, 2.5, "x"]] if R == 0 else [None, None]
    dist.broadcast_object_list(objs, src=0)
    assert objs == [{"step": 3, "lr": 0.1}, [1, 2.5, "x"]], objs


@check(R)
def all_gather_and_gather_object_over_cuda():
    out = [None, None]
    dist.all_gather_object(out, {"rank": R, "pad": "y" * (R * 50)})
    assert out == [{"rank": 0, "pad": ""}, {"rank": 1, "pad": "y" * 50}], out
    got = [None, None] if R == 1 else None
    dist.gather_object(("r", R), got, dst=1)
    if R == 1:
        assert got == [("r", 0), ("r", 1)], got


@check(R)
def scatter_and_send_recv_object_over_cuda():
    out = [None]
    dist.scatter_object_list(out, [f"to{i}" for i in range(2)] if R == 0 else None, src=0)
    assert out == [f"to{R}"], out
    if R == 0:
        dist.send_object_list([{"a": [1, 2]}, 7], dst=1)
    else:
        box = [None, None]
        assert dist.recv_object_list(box, src=0) == 0
        assert box == [{"a": [1, 2]}, 7], box


@check(R)
def barrier_over_cuda():
    dist.barrier()


finish(R)
