"""The MPI engine: every collective of one process group over one mpi4py communicator, on
zero-copy numpy views of CPU tensors' storage, always through nonblocking MPI calls so that a
wait can give up at the group's timeout instead of hanging.

Data movement uses byte views (any dtype: bfloat16 and float8 included). Reductions run on the
native type, except bfloat16/float16 (reduced in float32: MPI has no such types) and bool
(reduced as int32).
"""
from __future__ import annotations

import numpy as np

from ._mpi import MPI
from ._types import RedOpType, Work

__all__ = ["MPIEngine"]

_UPCAST = {"bfloat16": np.float32, "float16": np.float32, "bool": np.int32,
           "float8_e4m3fn": np.float32, "float8_e5m2": np.float32}
_INT_ONLY = (RedOpType.BAND, RedOpType.BOR, RedOpType.BXOR)


def _view(t, what: str):
    """(C-contiguous array aliasing t where possible, writeback or None)."""
    if t.device.type != "cpu":
        raise RuntimeError(f"{what}: the MPI engine serves CPU tensors, got a tensor on "
                           f"{t.device}; use backend 'nccl' (or 'cpu:gloo,cuda:nccl') for cuda")
    a = t._np
    if a.flags.c_contiguous:
        return a, None
    c = np.ascontiguousarray(a)
    return c, (lambda: np.copyto(a, c))


def _bytes(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1).view(np.uint8)


class MPIEngine:
    """Collectives over `comm` (an mpi4py Intracomm whose ranks are the group's ranks)."""

    def __init__(self, comm, timeout: float):
        self.comm, self.timeout = comm, timeout
        self.rank, self.size = comm.Get_rank(), comm.Get_size()

    # ---- plumbing ----------------------------------------------------------------------------
    def _work(self, reqs, finish, result, what, keep=()):
        """keep: arrays MPI reads or writes until the requests complete (temporaries: mpi4py's
        nonblocking collectives do not hold them, and a freed send buffer sends garbage)."""
        reqs = [r for r in reqs if r is not None]
        Request = MPI().Request
        w = Work(lambda: Request.Testall(reqs), finish, result, self.timeout, what, self.rank)
        w._keep = keep
        return w

    def _mpi_op(self, op, dtype, what):
        M = MPI()
        op = RedOpType(op)
        if op in _INT_ONLY and dtype.is_floating_point:
            raise RuntimeError(f"{what}: ReduceOp.{op.name} is not supported for {dtype} "
                               "(bitwise ops need integer or bool tensors)")
        if op == RedOpType.PREMUL_SUM:
            raise RuntimeError(f"{what}: ReduceOp.PREMUL_SUM is supported only by NCCL")
        return {RedOpType.SUM: M.SUM, RedOpType.AVG: M.SUM, RedOpType.PRODUCT: M.PROD,
                RedOpType.MIN: M.MIN, RedOpType.MAX: M.MAX, RedOpType.BAND: M.BAND,
                RedOpType.BOR: M.BOR, RedOpType.BXOR: M.BXOR}[op]

    def _reduce_buf(self, t, what):
        """(buffer to reduce in, finisher writing it back into t)."""
        a, wb = _view(t, what)
        up = _UPCAST.get(t.dtype.name)
        if up is None:
            return a, wb
        w = a.astype(up)

        def back():
            np.copyto(a, w != 0 if t.dtype.name == "bool" else w.astype(a.dtype))
            if wb:
                wb()
        return w, back

    def _avg(self, buf, op):
        if op != RedOpType.AVG:
            return
        if np.issubdtype(buf.dtype, np.integer):
            np.floor_divide(buf, self.size, out=buf)
        else:
            np.divide(buf, self.size, out=buf)

    @staticmethod
    def _chain(*fns):
        fns = [f for f in fns if f is not None]
        return (lambda: [f() for f in fns]) if fns else None

    # ---- reductions --------------------------------------------------------------------------
    def all_reduce(self, t, op):
        what = "all_reduce"
        mop = self._mpi_op(op, t.dtype, what)
        buf, back = self._reduce_buf(t, what)
        req = self.comm.Iallreduce(MPI().IN_PLACE, buf, mop)
        return self._work([req], self._chain(lambda: self._avg(buf, op), back), [t], what)

    def reduce(self, t, dst, op):
        what = "reduce"
        mop = self._mpi_op(op, t.dtype, what)
        buf, back = self._reduce_buf(t, what)
        if self.rank == dst:
            req = self.comm.Ireduce(MPI().IN_PLACE, buf, mop, root=dst)
            return self._work([req], self._chain(lambda: self._avg(buf, op), back), [t], what)
        req = self.comm.Ireduce(buf, None, mop, root=dst)
        return self._work([req], None, [t], what, keep=(buf,))

    def reduce_scatter(self, out, inputs, op):
        """inputs: one tensor per rank (flattened and concatenated); out gets this rank's part."""
        what = "reduce_scatter"
        mop = self._mpi_op(op, out.dtype, what)
        up = _UPCAST.get(out.dtype.name)
        parts = [_view(x, what)[0].reshape(-1) for x in inputs]
        send = np.concatenate(parts).astype(up or parts[0].dtype, copy=False)
        recv, back = self._reduce_buf(out, what)
        counts = [p.size for p in parts]
        if counts[self.rank] != recv.size:
            raise ValueError(f"{what}: output has {recv.size} elements but this rank's input "
                             f"has {counts[self.rank]}")
        req = self.comm.Ireduce_scatter(send, recv, counts, mop)
        return self._work([req], self._chain(lambda: self._avg(recv, op), back), [out], what,
                          keep=(send, recv))

    # ---- data movement (bytes) ---------------------------------------------------------------
    def broadcast(self, t, src):
        a, wb = _view(t, "broadcast")
        req = self.comm.Ibcast(_bytes(a), root=src)
        return self._work([req], wb if self.rank != src else None, [t], "broadcast", keep=(a,))

    def all_gather(self, outs, t):
        """outs: one tensor per rank (sizes may differ); t: this rank's contribution."""
        what = "all_gather"
        a, _ = _view(t, what)
        counts = [o.numel() * o.element_size() for o in outs]
        recv = np.empty(sum(counts), np.uint8)
        displs = np.cumsum([0] + counts[:-1]).tolist()
        req = self.comm.Iallgatherv(_bytes(a), [recv, (counts, displs), MPI().BYTE])
        return self._work([req], lambda: self._scatter_bytes(recv, outs, displs), outs, what,
                          keep=(a, recv))

    @staticmethod
    def _scatter_bytes(raw, outs, displs):
        for o, d in zip(outs, displs):
            dst = o._np
            n = dst.size * dst.itemsize
            np.copyto(dst, raw[d:d + n].view(dst.dtype).reshape(dst.shape))

    def all_to_all(self, outs, ins):
        what = "all_to_all"
        sc = [x.numel() * x.element_size() for x in ins]
        rc = [o.numel() * o.element_size() for o in outs]
        send = np.concatenate([_bytes(_view(x, what)[0]) for x in ins]) if ins else None
        recv = np.empty(sum(rc), np.uint8)
        sd = np.cumsum([0] + sc[:-1]).tolist()
        rd = np.cumsum([0] + rc[:-1]).tolist()
        req = self.comm.Ialltoallv([send, (sc, sd), MPI().BYTE], [recv, (rc, rd), MPI().BYTE])
        return self._work([req], lambda: self._scatter_bytes(recv, outs, rd), outs, what,
                          keep=(send, recv))

    def gather(self, t, outs, dst):
        what = "gather"
        a, _ = _view(t, what)
        if self.rank != dst:
            req = self.comm.Igatherv(_bytes(a), None, root=dst)
            return self._work([req], None, [], what, keep=(a,))
        rc = [o.numel() * o.element_size() for o in outs]
        rd = np.cumsum([0] + rc[:-1]).tolist()
        recv = np.empty(sum(rc), np.uint8)
        req = self.comm.Igatherv(_bytes(a), [recv, (rc, rd), MPI().BYTE], root=dst)
        return self._work([req], lambda: self._scatter_bytes(recv, outs, rd), outs, what,
                          keep=(a, recv))

    def scatter(self, t, ins, src):
        what = "scatter"
        a, wb = _view(t, what)
        nb = a.size * a.itemsize
        if self.rank != src:
            req = self.comm.Iscatterv(None, _bytes(a), root=src)
            return self._work([req], wb, [t], what, keep=(a,))
        sc = [x.numel() * x.element_size() for x in ins]
        sd = np.cumsum([0] + sc[:-1]).tolist()
        send = np.concatenate([_bytes(_view(x, what)[0]) for x in ins])
        if sc[src] != nb:
            raise ValueError(f"{what}: output has {nb} bytes, its input {sc[src]}")
        req = self.comm.Iscatterv([send, (sc, sd), MPI().BYTE], _bytes(a), root=src)
        return self._work([req], wb, [t], what, keep=(send, a))

    def barrier(self):
        return self._work([self.comm.Ibarrier()], None, None, "barrier")

    # ---- point to point ----------------------------------------------------------------------
    def send(self, t, dst, tag):
        a, _ = _view(t, "send")
        buf = np.ascontiguousarray(a)
        req = self.comm.Isend(_bytes(buf), dest=dst, tag=tag)
        return self._work([req], None, [t], f"send to rank {dst}", keep=(buf,))

    def recv(self, t, src, tag):
        a, wb = _view(t, "recv")
        M = MPI()
        st = M.Status()
        source = M.ANY_SOURCE if src is None else src
        req = self.comm.Irecv(_bytes(a), source=source, tag=tag)
        what = f"recv from rank {'any' if src is None else src}"
        holder = {}

        def poll():
            done = req.Test(st)
            if done:
                holder["src"] = st.Get_source()
            return done
        w = Work(poll, wb, [t], self.timeout, what, self.rank)
        w._keep = (a,)  # (a copy when t is not contiguous: MPI writes it until done)
        w._source = holder
        return w

    def close(self):
        """The group frees the communicator (destroy_process_group)."""
