"""The NCCL engine: collectives on CUDA tensors through nccl4py's low-level bindings (raw device
pointers, the current ember.cuda stream); the unique id travels through the group's store.

Imported only when a group first meets a CUDA tensor (nccl4py and ember-devices are optional).
Work completion is a CUDA event recorded after the op; wait() polls it on the host up to the
group's timeout and raises DistBackendError when it expires (the communicator is then unusable:
destroy the group). Not run on this project's CPU machines: tested on a lent GPU machine.
"""
from __future__ import annotations

from ._types import DistBackendError, RedOpType, Work

__all__ = ["NCCLEngine"]

# ncclDataType_t and ncclRedOp_t values (nccl.h)
_DT = {"int8": 0, "uint8": 1, "bool": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5,
       "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9, "float8_e4m3fn": 10,
       "float8_e5m2": 11}
_OP = {RedOpType.SUM: 0, RedOpType.PRODUCT: 1, RedOpType.MAX: 2, RedOpType.MIN: 3,
       RedOpType.AVG: 4}
_BOOL_OP = {RedOpType.SUM: 2, RedOpType.MAX: 2, RedOpType.BOR: 2, RedOpType.PRODUCT: 3,
            RedOpType.MIN: 3, RedOpType.BAND: 3}


def _nccl():
    try:
        from nccl.bindings import nccl
    except ImportError as e:
        raise RuntimeError("ember.distributed: the NCCL engine needs nccl4py; install it with "
                           "`pip install ember-distributed[nccl]`") from e
    return nccl


def _uid_bytes(uid) -> bytes:
    try:
        return bytes(uid)
    except TypeError:  # older bindings: read the 128 raw bytes
        import ctypes
        return ctypes.string_at(uid.ptr, 128)


class NCCLEngine:
    """Collectives over one NCCL communicator of `size` ranks."""

    def __init__(self, store, rank: int, size: int, timeout: float, device: int | None = None):
        import ember
        self.cuda = ember.cuda  # the public torch.cuda-like API of ember-devices
        self.nccl = _nccl()
        self.rank, self.size, self.timeout = rank, size, timeout
        self.device = self.cuda.current_device() if device is None else int(device)
        self.cuda.set_device(self.device)  # binds the device's context for NCCL (and the
        # process: one device per rank, as torch's ProcessGroupNCCL assumes)
        if rank == 0:
            store.set("uid", _uid_bytes(self.nccl.get_unique_id()))
        uid = store.get("uid")
        self.comm = self.nccl.comm_init_rank_scalable(size, rank, 1, bytearray(uid), 0)

    # ---- plumbing ----------------------------------------------------------------------------
    def _stream(self) -> int:
        return self.cuda.current_stream(self.device).cuda_stream

    def _work(self, result, what, finish=None):
        ev = self.cuda.Event()
        ev.record(self.cuda.current_stream(self.device))
        return Work(ev.query, finish, result, self.timeout, what, self.rank)

    def _ptr(self, t, what):
        if t.device.type != "cuda":
            raise RuntimeError(f"{what}: the NCCL engine serves CUDA tensors, got {t.device}")
        if not t.is_contiguous():
            raise ValueError(f"{what}: Tensors must be contiguous")
        return t.data_ptr()

    def _dt(self, t, what):
        dt = _DT.get(t.dtype.name)
        if dt is None:
            raise RuntimeError(f"{what}: NCCL has no data type for {t.dtype}")
        return dt

    def _op(self, op, t, what):
        op = RedOpType(op)
        table = _BOOL_OP if t.dtype.name == "bool" else _OP
        if op not in table:
            raise RuntimeError(f"{what}: Cannot use ReduceOp.{op.name} with NCCL on {t.dtype}")
        return table[op]

    def _group(self, fn):
        n = self.nccl
        n.group_start()
        try:
            fn()
        finally:
            n.group_end()

    # ---- collectives -------------------------------------------------------------------------
    def all_reduce(self, t, op):
        p = self._ptr(t, "all_reduce")
        self.nccl.all_reduce(p, p, t.numel(), self._dt(t, "all_reduce"),
                             self._op(op, t, "all_reduce"), self.comm, self._stream())
        return self._work([t], "all_reduce")

    def reduce(self, t, dst, op):
        p = self._ptr(t, "reduce")
        self.nccl.reduce(p, p, t.numel(), self._dt(t, "reduce"), self._op(op, t, "reduce"), dst,
                         self.comm, self._stream())
        return self._work([t], "reduce")

    def broadcast(self, t, src):
        p = self._ptr(t, "broadcast")
        self.nccl.broadcast(p, p, t.numel(), self._dt(t, "broadcast"), src, self.comm,
                            self._stream())
        return self._work([t], "broadcast")

    def all_gather(self, outs, t):
        """One broadcast per rank in a group call: sizes may differ."""
        sp, dt, s = self._ptr(t, "all_gather"), self._dt(t, "all_gather"), self._stream()

        def body():
            for r, o in enumerate(outs):
                self.nccl.broadcast(sp if r == self.rank else 0, self._ptr(o, "all_gather"),
                                    o.numel(), dt, r, self.comm, s)
        self._group(body)
        return self._work(outs, "all_gather")

    def reduce_scatter(self, out, inputs, op):
        import ember
        flat = ember.cat([x.reshape(-1) for x in inputs])
        self.nccl.reduce_scatter(self._ptr(flat, "reduce_scatter"),
                                 self._ptr(out, "reduce_scatter"), out.numel(),
                                 self._dt(out, "reduce_scatter"),
                                 self._op(op, out, "reduce_scatter"), self.comm, self._stream())
        w = self._work([out], "reduce_scatter")
        w._keep = flat
        return w

    def _exchange(self, sends, recvs, what):
        """Grouped point-to-point: sends/recvs are {peer: tensor}."""
        s = self._stream()

        def body():
            for peer, x in sends.items():
                self.nccl.send(self._ptr(x, what), x.numel(), self._dt(x, what), peer,
                               self.comm, s)
            for peer, x in recvs.items():
                self.nccl.recv(self._ptr(x, what), x.numel(), self._dt(x, what), peer,
                               self.comm, s)
        self._group(body)

    def all_to_all(self, outs, ins):
        me = self.rank
        outs[me].copy_(ins[me])
        peers = [p for p in range(self.size) if p != me]
        self._exchange({p: ins[p] for p in peers}, {p: outs[p] for p in peers}, "all_to_all")
        return self._work(outs, "all_to_all")

    def gather(self, t, outs, dst):
        if self.rank == dst:
            outs[dst].copy_(t)
            self._exchange({}, {p: outs[p] for p in range(self.size) if p != dst}, "gather")
        else:
            self._exchange({dst: t}, {}, "gather")
        return self._work(outs, "gather")

    def scatter(self, t, ins, src):
        if self.rank == src:
            t.copy_(ins[src])
            self._exchange({p: ins[p] for p in range(self.size) if p != src}, {}, "scatter")
        else:
            self._exchange({}, {src: t}, "scatter")
        return self._work([t], "scatter")

    def barrier(self):
        import ember
        one = ember.ones(1, device=f"cuda:{self.device}")
        return self.all_reduce(one, RedOpType.SUM)

    def send(self, t, dst, tag):
        self._exchange({dst: t}, {}, "send")
        return self._work([t], f"send to rank {dst}")

    def recv(self, t, src, tag):
        if src is None:
            raise RuntimeError("recv: NCCL needs the source rank (src=None is MPI only)")
        self._exchange({}, {src: t}, "recv")
        w = self._work([t], f"recv from rank {src}")
        w._source = {"src": src}
        return w

    def close(self):
        try:
            self.nccl.comm_destroy(self.comm)
        except Exception as e:
            raise DistBackendError(f"destroy_process_group: NCCL: {e}") from e
