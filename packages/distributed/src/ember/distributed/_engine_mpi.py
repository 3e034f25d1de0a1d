"""The MPI engine: every collective of one process group over one mpi4py communicator, on
zero-copy numpy views of CPU tensors' storage (the buffer protocol on the storage itself: no
copy where the tensor is contiguous). A wait gives up at the group's timeout instead of hanging.

Two routes, one order: a small collective is a nonblocking MPI call, issued on the caller's
thread and polled; a large one (EMBER_MPI_BLOCKING_BYTES, default 16 MiB, and up) runs on the
communicator's CommThread (_comm_thread.py) as a sequence of nonblocking pieces of about
EMBER_MPI_PIECE_BYTES (4 MiB) polled there, one after another (all_reduce, reduce_scatter,
all_gather, broadcast: Open MPI's algorithms slow down 5-10x once a message outgrows the cache),
or a blocking MPI call (reduce). While that thread has work, later calls queue behind it.

Data movement uses byte views (any dtype: bfloat16 and float8 included). Reductions run on the
native type, except bfloat16/float16 (reduced in float32: MPI has no such types) and bool
(reduced as int32).
"""
from __future__ import annotations

import os
import time

import numpy as np

from ._comm_thread import CommThread, ThreadWork
from ._mpi import MPI
from ._types import SPIN_S, RedOpType, Work

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


def _progress(req) -> None:
    """Wait for req on the communication thread: test and yield the core (the peer rank may
    share it: faster than MPI_Wait's spin on an oversubscribed host), then back off with
    sleeps after SPIN_S (a peer that is late, or never comes: the caller's wait times out)."""
    start, delay = time.monotonic(), 0.0
    while not req.Test():
        if time.monotonic() - start < SPIN_S:
            os.sched_yield()
        else:
            delay = min(delay + 2e-5, 1e-3)
            time.sleep(delay)


class MPIEngine:
    """Collectives over `comm` (an mpi4py Intracomm whose ranks are the group's ranks)."""

    def __init__(self, comm, timeout: float):
        self.comm, self.timeout = comm, timeout
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.blocking_bytes = int(os.environ.get("EMBER_MPI_BLOCKING_BYTES", 16 << 20))
        self.piece_bytes = int(os.environ.get("EMBER_MPI_PIECE_BYTES", 4 << 20))
        self._thread = CommThread(f"ember-mpi-{id(comm):x}")

    # ---- plumbing ----------------------------------------------------------------------------
    def _post(self, what, nbytes, call, args, finish=None, result=None, keep=(), pieces=None):
        """Run `comm.<call>(*args)` (blocking) when nbytes reaches the threshold, else its
        nonblocking `I<call>`. MPI never matches a blocking collective with a nonblocking one,
        so the choice depends only on nbytes, which callers compute alike on every rank (0:
        always nonblocking). Blocking calls run on the communication thread; so does a
        nonblocking one issued while the thread has work (issue order is match order); any
        other is issued here and polled by the caller's wait. pieces: instead of the blocking
        call, nonblocking `I<call>`s on the argument tuples this iterable gives (on the thread,
        each once the previous one is done; the same split on every rank).
        keep: arrays MPI reads or writes until done (temporaries: mpi4py's nonblocking calls do
        not hold them, and a freed send buffer sends garbage)."""
        blocking = nbytes >= self.blocking_bytes
        icall = getattr(self.comm, "I" + call[0].lower() + call[1:])
        if not blocking and not self._thread.busy():
            return self._work([icall(*args)], finish, result, what, keep)

        def run():
            if not blocking:
                _progress(icall(*args))
            elif pieces is not None:
                for a in pieces:
                    _progress(icall(*a))
            else:
                getattr(self.comm, call)(*args)
            if finish is not None:
                finish()
        return self._thread.submit(ThreadWork(run, result, self.timeout, what, self.rank, keep))

    def _work(self, reqs, finish, result, what, keep=()):
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
        # large: pieces of piece_bytes one after another (Open MPI's own algorithms slow down
        # 5-10x once a message outgrows the cache; pieces keep each pass in it; two or three
        # pieces in flight at once measured no faster)
        flat, k = buf.reshape(-1), max(1, self.piece_bytes // buf.itemsize)
        pieces = [(MPI().IN_PLACE, flat[s:s + k], mop) for s in range(0, flat.size, k)]
        return self._post(what, buf.nbytes, "Allreduce", (MPI().IN_PLACE, buf, mop),
                          self._chain(lambda: self._avg(buf, op), back), [t], keep=(buf,),
                          pieces=pieces if len(pieces) > 1 else None)

    def reduce(self, t, dst, op):
        what = "reduce"
        mop = self._mpi_op(op, t.dtype, what)
        buf, back = self._reduce_buf(t, what)
        if self.rank == dst:
            return self._post(what, buf.nbytes, "Reduce", (MPI().IN_PLACE, buf, mop, dst),
                              self._chain(lambda: self._avg(buf, op), back), [t], keep=(buf,))
        return self._post(what, buf.nbytes, "Reduce", (buf, None, mop, dst), None, [t],
                          keep=(buf,))

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
        return self._post(what, send.nbytes, "Reduce_scatter", (send, recv, counts, mop),
                          self._chain(lambda: self._avg(recv, op), back), [out],
                          keep=(send, recv), pieces=self._rs_pieces(send, recv, counts, mop))

    def _split(self, counts, itemsize):
        """[(offset, counts)] pieces of a collective where rank r has counts[r] items: each
        piece takes up to k items of every rank's part (about piece_bytes in all), or None
        where one piece would do. The same on every rank (counts and piece_bytes are)."""
        k = max(1, self.piece_bytes // (itemsize * max(1, len(counts))))
        top = max(counts, default=0)
        if top <= k:
            return None
        return [(o, [min(k, max(0, c - o)) for c in counts]) for o in range(0, top, k)]

    def _rs_pieces(self, send, recv, counts, mop):
        split = self._split(counts, send.itemsize)
        if split is None:
            return None
        starts = np.cumsum([0] + counts[:-1]).tolist()
        recv = recv.reshape(-1)  # (C-contiguous: a view)

        def gen():  # each piece's send buffer is made when its turn comes (bounded memory)
            for o, cs in split:
                part = np.concatenate([send[s + o:s + o + c] for s, c in zip(starts, cs)])
                yield part, recv[o:o + cs[self.rank]], cs, mop
        return gen()

    # ---- data movement (bytes) ---------------------------------------------------------------
    def broadcast(self, t, src):
        a, wb = _view(t, "broadcast")
        b = _bytes(a)
        k = max(1, self.piece_bytes)
        pieces = [(b[o:o + k], src) for o in range(0, b.size, k)] if b.size > k else None
        return self._post("broadcast", a.nbytes, "Bcast", (b, src),
                          wb if self.rank != src else None, [t], keep=(a,), pieces=pieces)

    def all_gather(self, outs, t):
        """outs: one tensor per rank (sizes may differ); t: this rank's contribution."""
        what = "all_gather"
        a, _ = _view(t, what)
        counts = [o.numel() * o.element_size() for o in outs]
        recv = np.empty(sum(counts), np.uint8)
        displs = np.cumsum([0] + counts[:-1]).tolist()
        mine = _bytes(a)
        split = self._split(counts, 1)
        pieces = None if split is None else [
            (mine[o:o + cs[self.rank]], [recv, (cs, [d + o for d in displs]), MPI().BYTE])
            for o, cs in split]
        return self._post(what, recv.nbytes, "Allgatherv",
                          (mine, [recv, (counts, displs), MPI().BYTE]),
                          lambda: self._scatter_bytes(recv, outs, displs), outs, keep=(a, recv),
                          pieces=pieces)

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
        return self._post(what, 0, "Alltoallv",  # (sizes differ by rank: nonblocking)
                          ([send, (sc, sd), MPI().BYTE], [recv, (rc, rd), MPI().BYTE]),
                          lambda: self._scatter_bytes(recv, outs, rd), outs, keep=(send, recv))

    def gather(self, t, outs, dst):
        what = "gather"
        a, _ = _view(t, what)
        if self.rank != dst:
            return self._post(what, 0, "Gatherv", (_bytes(a), None, dst), None, [],
                              keep=(a,))
        rc = [o.numel() * o.element_size() for o in outs]
        rd = np.cumsum([0] + rc[:-1]).tolist()
        recv = np.empty(sum(rc), np.uint8)
        return self._post(what, 0, "Gatherv",  # (only the root knows the total: nonblocking)
                          (_bytes(a), [recv, (rc, rd), MPI().BYTE], dst),
                          lambda: self._scatter_bytes(recv, outs, rd), outs, keep=(a, recv))

    def scatter(self, t, ins, src):
        what = "scatter"
        a, wb = _view(t, what)
        nb = a.size * a.itemsize
        if self.rank != src:
            return self._post(what, 0, "Scatterv", (None, _bytes(a), src), wb, [t], keep=(a,))
        sc = [x.numel() * x.element_size() for x in ins]
        sd = np.cumsum([0] + sc[:-1]).tolist()
        send = np.concatenate([_bytes(_view(x, what)[0]) for x in ins])
        if sc[src] != nb:
            raise ValueError(f"{what}: output has {nb} bytes, its input {sc[src]}")
        return self._post(what, 0, "Scatterv",
                          ([send, (sc, sd), MPI().BYTE], _bytes(a), src), wb, [t],
                          keep=(send, a))

    def barrier(self):
        return self._post("barrier", 0, "Barrier", ())

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

    def close(self) -> bool:
        """Stop the communication thread; False when a collective is still blocked in it (a
        peer never joined): the group then leaves the communicator unfreed rather than hang.
        The group frees the communicator (destroy_process_group)."""
        return self._thread.close()
