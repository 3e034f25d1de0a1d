"""Stand-in for nccl4py's low-level `nccl.bindings.nccl` (tests only): the same functions and
argument order, carried out with MPI on host memory, where EMBER_CUDA_FAKE=1 keeps "device"
tensors. It lets the NCCL engine's calls (pointers, counts, types, roots, groups) be checked on 2
CPU ranks; the real library runs on the GPU machine."""
import ctypes

import ml_dtypes
import numpy as np
from mpi4py import MPI

W = MPI.COMM_WORLD
_NP = {0: np.int8, 1: np.uint8, 2: np.int32, 3: np.uint32, 4: np.int64, 5: np.uint64,
       6: np.float16, 7: np.float32, 8: np.float64, 9: ml_dtypes.bfloat16}
_OPS = {0: MPI.SUM, 1: MPI.PROD, 2: MPI.MAX, 3: MPI.MIN, 4: MPI.SUM}
_group = []
_depth = [0]
CALLS = []


class UniqueId:
    def __init__(self, raw=b"\x07" * 128):
        self.raw = raw

    def __bytes__(self):
        return self.raw


def get_unique_id():
    return UniqueId()


def comm_init_rank_scalable(nranks, rank, n_id, ids, cfg):
    assert nranks == W.Get_size() and rank == W.Get_rank(), (nranks, rank)
    assert bytes(ids) == b"\x07" * 128 and n_id == 1
    return 1234


def comm_destroy(comm):
    assert comm == 1234


def _arr(ptr, count, dt):
    t = np.dtype(_NP[dt])
    if count == 0:
        return np.empty(0, t)
    buf = (ctypes.c_char * (count * t.itemsize)).from_address(ptr)
    return np.frombuffer(buf, t)


def _up(a):
    return a.astype(np.float32) if a.dtype in (np.float16, ml_dtypes.bfloat16) else a


def _run(fn):
    if _depth[0]:
        _group.append(fn)
    else:
        for r in fn():
            r.Wait()


def group_start():
    _depth[0] += 1


def group_end():
    _depth[0] -= 1
    if _depth[0] == 0:
        reqs = [r for fn in _group for r in fn()]
        _group.clear()
        MPI.Request.Waitall(reqs)


def all_reduce(s, r, count, dt, op, comm, stream):
    CALLS.append("all_reduce")
    src, dst = _arr(s, count, dt), _arr(r, count, dt)

    def go():
        w = _up(src.copy())
        W.Allreduce(MPI.IN_PLACE, w, _OPS[op])
        if op == 4:
            w = w / W.Get_size()
        dst[:] = w.astype(dst.dtype)
        return []
    _run(go)


def reduce(s, r, count, dt, op, root, comm, stream):
    CALLS.append("reduce")
    src, dst = _arr(s, count, dt), _arr(r, count, dt)

    def go():
        w = _up(src.copy())
        out = np.empty_like(w)
        W.Reduce(w, out, _OPS[op], root=root)
        if W.Get_rank() == root:
            dst[:] = (out / W.Get_size() if op == 4 else out).astype(dst.dtype)
        return []
    _run(go)


def broadcast(s, r, count, dt, root, comm, stream):
    CALLS.append("broadcast")
    dst = _arr(r, count, dt)
    src = _arr(s, count, dt) if s else None

    def go():
        if W.Get_rank() == root and src is not None:
            dst[:] = src
        W.Bcast(dst.view(np.uint8), root=root)
        return []
    _run(go)


def reduce_scatter(s, r, recvcount, dt, op, comm, stream):
    CALLS.append("reduce_scatter")
    n = W.Get_size()
    src, dst = _arr(s, recvcount * n, dt), _arr(r, recvcount, dt)

    def go():
        w = _up(src.copy())
        out = np.empty(recvcount, w.dtype)
        W.Reduce_scatter_block(w, out, _OPS[op])
        dst[:] = (out / n if op == 4 else out).astype(dst.dtype)
        return []
    _run(go)


def send(ptr, count, dt, peer, comm, stream):
    CALLS.append("send")
    a = _arr(ptr, count, dt).copy()
    _run(lambda: [W.Isend(a.view(np.uint8), dest=peer, tag=77)])


def recv(ptr, count, dt, peer, comm, stream):
    CALLS.append("recv")
    a = _arr(ptr, count, dt)
    _run(lambda: [W.Irecv(a.view(np.uint8), source=peer, tag=77)])
